"""Train the shipped GPT: the book's chapter-4 ``GPTModel``, small, on Python's documentation, seeded.

``python -m mha_core.gpt_training`` runs ``RECIPE`` (the final recipe) and writes ``mha_core/shipped/``:
``own_gpt.safetensors`` (weights), ``own_gpt_tokenizer.json`` and ``own_gpt.json`` (config, recipe, losses,
head scores, wall time). ``key=value`` arguments override recipe fields, ``out=DIR`` writes elsewhere, for
experiments. ``load_shipped`` reads the three files back.

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
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from . import gpt_data, head_scores
from .gpt import CONFIG_KEYS, GPTModel, check_config, count_parameters
from .text_tokenizer import TextTokenizer

SHIPPED = Path(__file__).resolve().parent / "shipped"
WEIGHTS, TOKENIZER, RECORD = "own_gpt.safetensors", "own_gpt_tokenizer.json", "own_gpt.json"
PROBE_SEED = 1234  # the repeated random probe the head scores are measured on
PROBE_BATCH = 16
HELDOUT_WINDOWS = 64  # held-out windows of context_length tokens scored for the held-out loss


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recipe:
    """Everything that determines the shipped model: the GPT config, the tokenizer and the optimisation."""

    vocab_size: int = 2048
    context_length: int = 128
    emb_dim: int = 128
    n_heads: int = 4
    n_layers: int = 2
    drop_rate: float = 0.0
    qkv_bias: bool = False
    steps: int = 2000
    batch_size: int = 32
    lr: float = 2e-3  # AdamW peak, after a linear warm-up, then a cosine to a tenth of it
    warmup: int = 100
    weight_decay: float = 0.1
    repeat_share: float = 0.25  # share of each batch that is a random stretch repeated (gpt_data)
    seed: int = 0  # model init from seed, batches from seed + 1
    log_every: int = 10
    probe_period: int = 64  # the probe: probe_period random ids, twice

    def config(self) -> dict:
        return check_config({key: getattr(self, key) for key in CONFIG_KEYS})


RECIPE = Recipe()


def learning_rate(recipe: Recipe, step: int) -> float:
    """Linear warm-up over ``warmup`` steps, then a cosine from ``lr`` down to ``lr / 10`` at the last step."""
    if step < recipe.warmup:
        return recipe.lr * (step + 1) / recipe.warmup
    progress = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
    return recipe.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def probe(recipe: Recipe) -> torch.Tensor:
    """(b, 2·period) the fixed repeated random probe the head scores are read on."""
    return head_scores.repeated_random_tokens(
        recipe.vocab_size, recipe.probe_period, repeats=2, batch_size=PROBE_BATCH, seed=PROBE_SEED
    )


@torch.no_grad()
def measure_heads(model: GPTModel, ids: torch.Tensor, period: int) -> dict[str, torch.Tensor]:
    """Each kind of score, (L, h), on ``ids`` (a probe repeating every ``period`` tokens), batch averaged."""
    was_training = model.training
    model.eval()
    weights = model.attention_weights(ids).mean(dim=1)  # (L, b, h, T, T) -> (L, h, T, T)
    model.train(was_training)
    return {
        "previous token": head_scores.previous_token_score(weights),
        "first token": head_scores.first_token_score(weights),
        "induction": head_scores.induction_score(weights, period),
    }


@torch.no_grad()
def mean_loss(model: GPTModel, windows: torch.Tensor, chunk: int = 16) -> float:
    """Mean next-token cross-entropy (nats) over (n, T + 1) windows, in eval mode."""
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, windows.shape[0], chunk):
        part = windows[i : i + chunk]  # (c, T + 1)
        logits = model(part[:, :-1])  # (c, T, V)
        total += F.cross_entropy(logits.flatten(0, 1), part[:, 1:].flatten(), reduction="sum").item()
    model.train(was_training)
    return total / (windows.shape[0] * (windows.shape[1] - 1))


def prepare(recipe: Recipe, tokenizer: TextTokenizer | None = None) -> tuple[TextTokenizer, torch.Tensor, torch.Tensor]:
    """(tokenizer, training ids, held-out ids); the tokenizer trained on the training text unless given."""
    train_text, heldout_text = gpt_data.corpus()
    if tokenizer is None:
        tokenizer = gpt_data.train_tokenizer(train_text, recipe.vocab_size)
    if tokenizer.vocab_size != recipe.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} ids, the recipe {recipe.vocab_size}")
    return tokenizer, gpt_data.encode(tokenizer, train_text), gpt_data.encode(tokenizer, heldout_text)


def train(recipe: Recipe, train_ids: torch.Tensor, *, stop_after: int | None = None, eval_every: int = 0):
    """(model, losses): ``recipe.steps`` AdamW steps (or the first ``stop_after``); ``losses`` maps each
    ``log_every``-th step (1-based) to that step's batch loss. ``eval_every`` > 0 prints probe scores."""
    torch.manual_seed(recipe.seed)
    model = GPTModel(recipe.config())
    model.train()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=recipe.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(recipe.seed + 1)
    losses, started = {}, time.perf_counter()
    for step in range(recipe.steps if stop_after is None else min(stop_after, recipe.steps)):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(recipe, step)
        batch = gpt_data.training_batch(
            train_ids, gen, recipe.batch_size, recipe.context_length, recipe.vocab_size, recipe.repeat_share
        )  # (b, T + 1)
        logits = model(batch[:, :-1])  # (b, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if (step + 1) % recipe.log_every == 0:
            losses[step + 1] = loss.item()
        if eval_every and (step + 1) % eval_every == 0:
            report_progress(model, recipe, step + 1, loss.item(), time.perf_counter() - started)
    model.eval()
    return model, losses


def report_progress(model: GPTModel, recipe: Recipe, step: int, loss: float, seconds: float) -> None:
    """One line: step, loss, the strongest head of each kind on the probe."""
    scores = measure_heads(model, probe(recipe), recipe.probe_period)
    best = {kind: head_scores.strongest(value) for kind, value in scores.items()}
    text = "  ".join(f"{kind[:4]} L{layer}H{head}={score:.3f}" for kind, (layer, head, score) in best.items())
    print(f"step {step:5d}  {seconds:7.1f}s  loss {loss:.3f}  {text}", flush=True)


def record(recipe: Recipe, model: GPTModel, losses: dict, ids: tuple[torch.Tensor, torch.Tensor], wall: float) -> dict:
    """The JSON record: config, recipe, losses, held-out and unigram losses, head scores, wall time, threads."""
    train_ids, heldout_ids = ids
    windows = gpt_data.heldout_windows(heldout_ids, recipe.context_length, HELDOUT_WINDOWS)  # (n, T + 1)
    scores = measure_heads(model, probe(recipe), recipe.probe_period)
    return {
        "config": recipe.config(),
        "recipe": dataclasses.asdict(recipe),
        "parameters": count_parameters(model),
        "corpus": f"pydoc_data.topics, sorted keys, last {gpt_data.HELDOUT_TOPICS} topics held out",
        "tokens": {"train": train_ids.numel(), "heldout": heldout_ids.numel()},
        "loss_every": recipe.log_every,
        "train_loss": {str(step): value for step, value in losses.items()},
        "heldout_loss": mean_loss(model, windows),
        "heldout_tokens_scored": windows.shape[0] * recipe.context_length,
        "unigram_heldout_loss": gpt_data.unigram_loss(train_ids, heldout_ids, recipe.vocab_size),
        "probe": {"period": recipe.probe_period, "repeats": 2, "batch_size": PROBE_BATCH, "seed": PROBE_SEED},
        "head_scores": {kind: value.tolist() for kind, value in scores.items()},
        "strongest": {kind: head_scores.strongest(value) for kind, value in scores.items()},
        "wall_time_s": wall,
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
    }


def save(directory: Path, model: GPTModel, tokenizer: TextTokenizer, rec: dict) -> None:
    """The three shipped files, weights in float32 (the causal mask buffers are rebuilt on load, not stored)."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("att.mask")}
    save_file(tensors, str(directory / WEIGHTS))
    (directory / TOKENIZER).write_text(tokenizer.to_str())
    (directory / RECORD).write_text(json.dumps(rec, indent=1) + "\n")


def load_record(directory: Path = SHIPPED) -> dict:
    """The shipped JSON record (config, recipe, losses, head scores)."""
    return json.loads((Path(directory) / RECORD).read_text())


def load_shipped(directory: Path = SHIPPED) -> tuple[GPTModel, TextTokenizer]:
    """(model in eval mode, float32; tokenizer) from the shipped files."""
    directory = Path(directory)
    model = GPTModel(load_record(directory)["config"])
    missing, unexpected = model.load_state_dict(load_file(str(directory / WEIGHTS)), strict=False)
    if unexpected or any(not k.endswith("att.mask") for k in missing):
        raise ValueError(f"{directory / WEIGHTS} does not fit the config: missing {missing}, unexpected {unexpected}")
    return model.float().eval(), TextTokenizer.from_file(directory / TOKENIZER)


def parse_args(argv: list[str]) -> tuple[Recipe, Path, int]:
    """``key=value`` overrides of ``RECIPE``; ``out=DIR`` and ``eval_every=N`` are not recipe fields."""
    fields = {f.name: f.type for f in dataclasses.fields(Recipe)}
    overrides, out, eval_every = {}, SHIPPED, 0
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "out":
            out = Path(value)
        elif key == "eval_every":
            eval_every = int(value)
        elif key in fields:
            kind = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true")}[fields[key]]
            overrides[key] = kind(value)
        else:
            raise ValueError(f"unknown argument {arg!r}: use key=value with key in {sorted(fields)}, out or eval_every")
    return dataclasses.replace(RECIPE, **overrides), out, eval_every


def main(argv: list[str]) -> dict:
    recipe, out, eval_every = parse_args(argv)
    started = time.perf_counter()
    tokenizer, train_ids, heldout_ids = prepare(recipe)
    model, losses = train(recipe, train_ids, eval_every=eval_every)
    wall = time.perf_counter() - started
    rec = record(recipe, model, losses, (train_ids, heldout_ids), wall)
    save(out, model, tokenizer, rec)
    print(json.dumps({k: rec[k] for k in ("heldout_loss", "unigram_heldout_loss", "strongest", "wall_time_s")}))
    return rec


if __name__ == "__main__":
    main(sys.argv[1:])
