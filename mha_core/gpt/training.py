"""Train the shipped GPT: the book's chapter-4 ``GPTModel``, small, on Python's documentation, seeded.

``python -m mha_core.gpt.training`` runs ``RECIPE`` (the final recipe) and writes ``mha_core/gpt/shipped/``:
``own_gpt.safetensors`` (weights) and ``own_gpt.json`` (config, recipe, losses, head scores, milestones, wall time);
the tokenizer is bytes (``ByteTokenizer``), so it needs no file. ``key=value`` arguments override recipe fields,
``out=DIR`` writes elsewhere, ``run=DIR`` keeps the checkpoints and the log (``training_run``) and ``resume`` goes
on from the newest checkpoint there. ``load_shipped`` reads the files back.

The recipe (docs/decisions.md, "The shipped GPT reads English", and issue 46): first ``induction_warmup`` steps on
the Trained heads page's induction task alone (random bytes, a segment repeated, scored on the repeat), where a
256-id model crosses its plateau in a few hundred steps; then text windows mixed with rows that repeat English and
random bytes, so the model learns the text while the heads stay and spread to every position (phase 1). Its
induction heads then match one character, which English defeats; from ``curriculum_start`` (phase 2) rows of random
strings over an alphabet that shrinks from 32 letters to 3 teach them to match several, beside text and repeated
English. Issue 46 adds, after the warm-up, rows of training sentences each typed twice and scored on the copy
(``doubled_rows``): the task the free-running probe (``writing_probe``) sets.

Axis letters: L layers, b batch, h heads, T tokens, V vocabulary.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

from mha_core.gpt import curriculum, english_probe, head_scores, training_run
from mha_core.gpt import data as gpt_data
from mha_core.gpt import evaluation as gpt_eval
from mha_core.gpt.evaluation import PROBE_BATCH, PROBE_SEED, heldout_loss, measure_heads, probe
from mha_core.gpt.model import CONFIG_KEYS, GPTModel, check_config, count_parameters
from mha_core.gpt.text_tokenizer import ByteTokenizer

SHIPPED = Path(__file__).resolve().parent / "shipped"
RUN_DIR = Path(__file__).resolve().parents[2] / "runs" / "own_gpt"  # checkpoints and log; ignored by git
WEIGHTS, RECORD = "own_gpt.safetensors", "own_gpt.json"
HELDOUT_WINDOWS = 64  # held-out windows of context_length tokens for the previous-token score on plain text
THREADS = 2  # torch threads for the shipped run: both cores of this machine


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recipe:
    """Everything that determines the shipped model: the GPT config, the tokenizer and the optimisation."""

    vocab_size: int = 256  # bytes
    context_length: int = 128
    emb_dim: int = 128
    n_heads: int = 4
    n_layers: int = 2
    drop_rate: float = 0.0
    qkv_bias: bool = False
    tie_weights: bool = False  # True: out_head shares tok_emb's matrix (as GPT-2 does)
    init_std: float = 0.0  # 0 keeps PyTorch's defaults; > 0: GPT-2's init (gpt2_init) with this std
    sinusoidal_positions: bool = False  # True: pos_emb starts as sinusoids (still learned)
    steps: int = 2400  # all steps, the induction warm-up and phase 2 included
    induction_warmup: int = 400  # first steps on random-byte induction rows alone
    warmup_rows: int = 64  # induction rows per warm-up step
    warmup_length: int = 32  # their length: the plateau is shortest on short rows
    batch_size: int = 16  # text windows per step after the warm-up
    repeat_rows: int = 4  # random-byte induction rows per step after the warm-up, context_length long
    text_repeat_rows: int = 8  # text windows with a stretch written again later (gpt_data.repeated_text_rows)
    periodic_rows: int = 8  # a text stretch repeated to fill the row (gpt_data.periodic_text_rows)
    few_letter_rows: int = 8  # a few common letters at random, a stretch repeated (gpt_data.few_letter_rows)
    few_letters: int = 6
    doubled_rows: int = 0  # rows of training sentences each typed twice (gpt_data.doubled_rows), after the warm-up
    sentence_min: int = 20  # their sentences' lengths, in bytes (at most half the context)
    sentence_max: int = 120
    span_min: int = 8  # the repeated text stretches' lengths, in tokens
    span_max: int = 64
    lr: float = 3e-3  # AdamW, constant after ``lr_warmup`` steps unless ``final_lr`` differs
    final_lr: float = 3e-4  # a cosine from lr down to this at step ``lr_horizon``
    lr_horizon: int = 4000  # the cosine's length (phase 1 stops before its end, at ``curriculum_start``)
    lr_warmup: int = 0  # steps of linear learning-rate ramp (not the induction warm-up)
    # phase 2, from ``curriculum_start`` on: a fresh AdamW at a constant rate, text and periodic rows beside
    # alphabet rows whose alphabet shrinks, so induction learns to match several characters (docs/decisions.md)
    curriculum_start: int = 1400
    curriculum_lr: float = 1e-3
    alphabet_rows: int = 32
    alphabet_length: int = 64
    alphabet_from: int = 32  # letters at the start of phase 2 ...
    alphabet_to: int = 3  # ... falling geometrically to this many over ``alphabet_decay`` steps
    alphabet_decay: int = 1050
    anneal: int = 0  # phase 2's last steps, where its rate falls linearly towards a tenth (0: constant to the end)
    # phase 3, from ``polish_start`` (0: none) to ``steps``: a fresh AdamW, text windows, doubled sentences and
    # alphabet rows at the smallest alphabet, with their own row counts; the rate falls over its last ``anneal``
    polish_start: int = 0
    polish_lr: float = 1e-3
    polish_text_rows: int = 16
    polish_doubled_rows: int = 16
    polish_alphabet_rows: int = 16
    weight_decay: float = 0.0
    beta2: float = 0.99
    clip: float = 1.0  # gradient norm clip; 0: none
    seed: int = 0  # model init from seed, batches from seed + 1
    log_every: int = 10
    probe_period: int = 32  # the probe: probe_period random ids, twice

    def config(self) -> dict:
        return check_config({key: getattr(self, key) for key in CONFIG_KEYS})


RECIPE = Recipe(
    context_length=256,  # a sentence of 120 characters fits twice (issue 46)
    n_layers=3,
    steps=6200,  # phase 2, steps 1,200 to 3,200, is where the copy is learnt; phase 3 polishes it (issue 46)
    polish_start=3200,  # 16 text windows, 16 rows of doubled sentences and 16 of three letters a step
    batch_size=8,  # 8 windows of 256: as many text tokens per step as 16 of 128
    text_repeat_rows=0,  # the doubled rows repeat English instead
    periodic_rows=4,
    few_letter_rows=0,
    repeat_rows=2,
    doubled_rows=8,
    curriculum_start=1200,
    alphabet_decay=900,
    anneal=300,
)


def build(recipe: Recipe) -> GPTModel:
    """A fresh (or, before loading, a blank) model; ``tie_weights`` makes out_head use tok_emb's weight."""
    model = GPTModel(recipe.config())
    if recipe.init_std:
        gpt2_init(model, recipe.init_std)
    if recipe.sinusoidal_positions:
        with torch.no_grad():
            scale = model.tok_emb.weight.std()  # positions start as large as tokens
            model.pos_emb.weight.copy_(sinusoids(recipe.context_length, recipe.emb_dim) * scale * math.sqrt(2))
    if recipe.tie_weights:
        model.out_head.weight = model.tok_emb.weight  # (V, E), one parameter
    return model


def sinusoids(num_positions: int, dim: int) -> torch.Tensor:
    """(T, E) the Transformer paper's sin/cos position code (values in [-1, 1], std about 1/sqrt(2))."""
    positions = torch.arange(num_positions, dtype=torch.float32)[:, None]  # (T, 1)
    rates = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)  # (E/2,)
    angles = positions * rates  # (T, E/2)
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(1)  # (T, E/2, 2) -> (T, E)


def gpt2_init(model: GPTModel, std: float) -> None:
    """GPT-2's initialisation: every weight N(0, std²), biases 0, the two projections that write into the
    residual stream scaled by 1/sqrt(2·layers), so embeddings and block outputs start at comparable sizes."""
    for name, param in model.named_parameters():
        if name.endswith(("norm1.scale", "norm2.scale", "final_norm.scale")):
            continue
        if param.ndim < 2:
            nn.init.zeros_(param)
        else:
            scaled = name.endswith(("att.out_proj.weight", "ff.layers.2.weight"))
            nn.init.normal_(param, std=std / math.sqrt(2 * model.cfg["n_layers"]) if scaled else std)


def prepare(recipe: Recipe) -> tuple[ByteTokenizer, torch.Tensor, torch.Tensor]:
    """(tokenizer, training ids, held-out ids): the corpus as UTF-8 bytes."""
    tokenizer = ByteTokenizer()
    if tokenizer.vocab_size != recipe.vocab_size:
        raise ValueError(f"the byte tokenizer has {tokenizer.vocab_size} ids, the recipe {recipe.vocab_size}")
    train_text, heldout_text = gpt_data.corpus()
    return tokenizer, gpt_data.encode(tokenizer, train_text), gpt_data.encode(tokenizer, heldout_text)


def train(
    recipe: Recipe,
    train_ids: torch.Tensor,
    *,
    stop_after: int | None = None,
    eval_every: int = 0,
    run_dir: Path | None = None,
    checkpoint_every: int = 100,
    writing_every: int = 0,
):
    """(model, losses, seconds, milestones): ``recipe.steps`` AdamW steps (or the first ``stop_after``); ``losses``
    maps each ``log_every``-th step (1-based) to that step's batch loss; ``seconds`` counts every session of the run.
    ``eval_every`` > 0 prints probe scores.

    With ``run_dir``, every ``checkpoint_every`` steps the run measures a milestone (``training_run.milestone``, the
    free-running probe too every ``writing_every`` steps), logs it and saves a checkpoint there; a run started on a
    directory that holds one resumes from the newest: a two-hour run survives a stopped session."""
    torch.manual_seed(recipe.seed)
    model = build(recipe)
    model.train()
    optimizer, gen = _optimizer(model, recipe, phase=1), torch.Generator().manual_seed(recipe.seed + 1)
    losses, milestones, first, spent = {}, [], 0, 0.0
    saved = training_run.checkpoints(run_dir) if run_dir is not None else []
    if saved:
        payload = training_run.load(saved[-1], recipe)
        phase = curriculum.phase_of(recipe, payload["step"] - 1)
        if phase > 1:  # the checkpoint's optimiser is that phase's
            optimizer, gen = _optimizer(model, recipe, phase=phase), torch.Generator()
        training_run.restore(payload, model, optimizer, gen)
        first, losses, milestones, spent = (payload[k] for k in ("step", "losses", "milestones", "wall_time_s"))
        training_run.log(run_dir, f"resuming at step {first} from {saved[-1].name}")
    data = (train_ids, curriculum.sentence_pool(recipe, train_ids))
    started = time.perf_counter() - spent
    for step in range(first, recipe.steps if stop_after is None else min(stop_after, recipe.steps)):
        if step in (recipe.curriculum_start, recipe.polish_start or -1):  # phases 2 and 3: a fresh optimiser, batches
            phase = curriculum.phase_of(recipe, step)
            optimizer, gen = _optimizer(model, recipe, phase=phase), torch.Generator().manual_seed(recipe.seed + phase)
        loss = _step(model, optimizer, recipe, data, gen, step)
        if (step + 1) % recipe.log_every == 0:
            losses[step + 1] = loss
        if eval_every and (step + 1) % eval_every == 0:
            gpt_eval.report_progress(model, recipe, step + 1, loss, time.perf_counter() - started)
        if run_dir is not None and (step + 1) % checkpoint_every == 0:
            writing = bool(writing_every) and (step + 1) % writing_every == 0
            milestones.append(training_run.milestone(model, recipe, step + 1, writing=writing))
            wall = time.perf_counter() - started
            training_run.log(
                run_dir, f"step {step + 1}  {wall:.0f}s  loss {loss:.3f}  {training_run.describe(milestones[-1])}"
            )
            state = {"model": model, "optimizer": optimizer, "generator": gen, "step": step + 1}
            training_run.save(
                run_dir, recipe, state | {"losses": losses, "milestones": milestones, "wall_time_s": wall}
            )
    model.eval()
    return model, losses, time.perf_counter() - started, milestones


def _step(model: GPTModel, optimizer, recipe: Recipe, data, gen: torch.Generator, step: int) -> float:
    """One AdamW step at ``step``'s learning rate, the gradient norm clipped; the batch loss."""
    for group in optimizer.param_groups:
        group["lr"] = curriculum.learning_rate(recipe, step)
    loss = curriculum.batch_loss(model, recipe, data, gen, step)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if recipe.clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
    optimizer.step()
    return loss.item()


def _optimizer(model: GPTModel, recipe: Recipe, *, phase: int) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only; phases 2 and 3 start afresh at their own rates."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    rate = {1: recipe.lr, 2: recipe.curriculum_lr, 3: recipe.polish_lr}[phase]
    return torch.optim.AdamW(groups, lr=rate, betas=(0.9, recipe.beta2))


def record(recipe: Recipe, model: GPTModel, losses: dict, ids: tuple[torch.Tensor, torch.Tensor], wall: float) -> dict:
    """The JSON record: config, recipe, losses, held-out and unigram losses, head scores, wall time, threads."""
    train_ids, heldout_ids = ids
    windows = gpt_data.heldout_windows(heldout_ids, recipe.context_length, HELDOUT_WINDOWS)  # (n, T + 1)
    scores = measure_heads(model, probe(recipe), recipe.probe_period)
    english = english_probe.report(model, ByteTokenizer(), windows[:, :-1])
    return {
        "config": recipe.config(),
        "recipe": dataclasses.asdict(recipe),
        "parameters": count_parameters(model),
        "corpus": f"pydoc_data.topics, sorted keys, last {gpt_data.HELDOUT_TOPICS} topics held out",
        "tokens": {"train": train_ids.numel(), "heldout": heldout_ids.numel()},
        "loss_every": recipe.log_every,
        "train_loss": {str(step): value for step, value in losses.items()},
        "heldout_loss": heldout_loss(model, heldout_ids, recipe.context_length),
        "heldout_tokens_scored": heldout_ids.numel() - 1,  # every held-out byte after the first
        "unigram_heldout_loss": gpt_data.unigram_loss(train_ids, heldout_ids[1:], recipe.vocab_size),
        "english_probe": english,
        "probe": {"period": recipe.probe_period, "repeats": 2, "batch_size": PROBE_BATCH, "seed": PROBE_SEED},
        "writing": training_run.writing(model, recipe),
        "head_scores": {kind: value.tolist() for kind, value in scores.items()},
        "strongest": {kind: head_scores.strongest(value) for kind, value in scores.items()},
        "wall_time_s": wall,
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
    }


def save(directory: Path, model: GPTModel, rec: dict) -> None:
    """The shipped files, weights in float32 (the causal mask buffers are rebuilt on load, not stored; a tied
    out_head is stored as a copy, as safetensors stores no shared tensors)."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if not k.endswith("att.mask")}
    save_file(tensors, str(directory / WEIGHTS))
    (directory / RECORD).write_text(json.dumps(rec, indent=1) + "\n")


def load_record(directory: Path = SHIPPED) -> dict:
    """The shipped JSON record (config, recipe, losses, head scores)."""
    return json.loads((Path(directory) / RECORD).read_text())


def load_shipped(directory: Path = SHIPPED) -> tuple[GPTModel, ByteTokenizer]:
    """(model in eval mode, float32; tokenizer) from the shipped files."""
    directory = Path(directory)
    model = build(Recipe(**load_record(directory)["recipe"]))
    missing, unexpected = model.load_state_dict(load_file(str(directory / WEIGHTS)), strict=False)
    if unexpected or any(not k.endswith("att.mask") for k in missing):
        raise ValueError(f"{directory / WEIGHTS} does not fit the config: missing {missing}, unexpected {unexpected}")
    return model.float().eval(), ByteTokenizer()


OPTIONS = {"out": Path, "run": Path, "eval_every": int, "checkpoint_every": int, "writing_every": int, "threads": int}


def parse_args(argv: list[str]) -> tuple[Recipe, dict]:
    """``key=value`` overrides of ``RECIPE`` and the run's options (``OPTIONS``: where to write, the run directory,
        how often to measure, torch threads); ``resume`` takes the recipe from the run directory's newest checkpoint,
    with the overrides given (``training_run.load`` refuses any but ``steps``)."""
    fields = {f.name: f.type for f in dataclasses.fields(Recipe)}
    overrides = {}
    options = {"out": SHIPPED, "run": RUN_DIR, "eval_every": 0, "checkpoint_every": 100, "writing_every": 100}
    options |= {"threads": THREADS, "resume": False}
    for arg in argv:
        key, _, value = arg.partition("=")
        if arg == "resume":
            options["resume"] = True
        elif key in OPTIONS:
            options[key] = OPTIONS[key](value)
        elif key in fields:
            kind = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true")}[fields[key]]
            overrides[key] = kind(value)
        else:
            raise ValueError(f"unknown argument {arg!r}: key=value with key in {sorted(fields)}, {sorted(OPTIONS)}")
    recipe = dataclasses.replace(RECIPE, **overrides)
    if options["resume"]:
        saved = training_run.checkpoints(options["run"])
        if not saved:
            raise ValueError(f"resume: {options['run']} holds no checkpoint (step-*.pt)")
        recipe = Recipe(**torch.load(saved[-1], weights_only=False)["recipe"] | overrides)  # steps=N: go on longer
    return recipe, options


def main(argv: list[str]) -> dict:
    """Train (or resume) the recipe with the options, then write the weights and the record to ``out``."""
    recipe, options = parse_args(argv)
    torch.set_num_threads(options["threads"])
    _, train_ids, heldout_ids = prepare(recipe)
    run = {k: options[k] for k in ("eval_every", "checkpoint_every", "writing_every")}
    model, losses, wall, milestones = train(recipe, train_ids, run_dir=options["run"], **run)
    rec = record(recipe, model, losses, (train_ids, heldout_ids), wall) | {"milestones": milestones}
    save(options["out"], model, rec)
    summary = {k: rec[k] for k in ("heldout_loss", "unigram_heldout_loss", "strongest", "wall_time_s")}
    training_run.log(options["run"], f"done: {json.dumps(summary | {'writing': rec.get('writing')})}")
    return rec


if __name__ == "__main__":
    main(sys.argv[1:])
