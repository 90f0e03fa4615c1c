"""Train a tiny model built from the real ``MultiHeadAttention`` on a synthetic task, then look inside.

The point is to show trained attention heads, not to build a language model. So the model
(``tiny_model.TinyAttentionModel``) is as small as the tasks (``tasks.TASKS``) allow. This module holds
what a run is: its config (``make_config`` validates one), the loop (``train``, ``run``), the held-out
evaluation and the result (``TrainResult``), which ``inspect`` and ``explorer_module`` look inside.

Typical use: ``result = train("previous_token")``, then ``result.inspect()`` for weights and
scores on a held-out example, and ``explorer_module(result)`` for the trained layer itself.

Axis letters: b batch, t query position, s key position, h heads, d d_model, v vocabulary.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from mha_core.attention.modules import MultiHeadAttention
from mha_core.rng import seeded
from mha_core.toy.tasks import NOT_SCORED, TASKS, Task, TaskBatch
from mha_core.toy.tiny_model import TinyAttentionModel

HELDOUT_SIZE = 512  # held-out sequences for the final accuracy and head scores
HELDOUT_CHUNK = 64  # held-out sequences run at once: the evaluation's memory is that of a 64-sequence batch
NUM_LOG_POINTS = 100  # history keeps about this many points; progress is called at each


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything that determines a training run: hashable, so usable as a cache key."""

    task: str  # a key of TASKS
    num_heads: int
    num_layers: int  # 1 or 2 residual attention layers
    d_model: int  # embedding width = d_in = d_out of every attention layer
    vocab_size: int  # rows of the embedding table = logits per position
    seq_len: int  # tokens per sequence, also the model's context_length
    steps: int  # optimizer steps, one fresh batch each
    batch_size: int
    lr: float  # Adam's peak learning rate, decayed to 0 on a cosine
    seed: int  # init from torch.manual_seed(seed); training data from 2·seed, held-out data from 2·seed + 1
    device: str  # where training runs; the result is always on the CPU


@dataclass(kw_only=True)
class TrainHistory:
    """Training-batch loss and accuracy at the logged steps (1-based step numbers)."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)


class Inspection(NamedTuple):
    """One held-out example, run through the trained model."""

    tokens: np.ndarray  # (T,) token ids
    labels: list[str]  # (T,) readable tokens
    targets: np.ndarray  # (T,) target ids (meaningless where not scored)
    predictions: np.ndarray  # (T,) argmax of the logits
    scored: np.ndarray  # (T,) bool
    attend_to: np.ndarray  # (T,) expected key per query, NOT_SCORED where none
    weights: list[np.ndarray]  # per layer (h, T, T) attention weights of the real module
    scores: np.ndarray  # (num_layers, h) pattern score of each head on this example


class ExplorerInput(NamedTuple):
    """A trained layer's real module and what it receives on the held-out example."""

    module: MultiHeadAttention
    x: torch.Tensor  # (1, T, d_model)
    labels: list[str]  # (T,)


def build_model(config: TrainConfig) -> TinyAttentionModel:
    """A freshly initialised model for this config (initialisation uses the global RNG)."""
    return TinyAttentionModel(config.vocab_size, config.seq_len, config.d_model, config.num_heads, config.num_layers)


def load_model(result: TrainResult) -> TinyAttentionModel:
    """The trained model, rebuilt from the result's state dict, on the CPU in eval mode."""
    model = build_model(result.config)
    model.load_state_dict(result.state_dict)
    return model.eval()


@dataclass(frozen=True, eq=False, kw_only=True)
class TrainResult:
    """A finished (or stopped) run. Picklable; tensors are on the CPU."""

    config: TrainConfig
    state_dict: dict[str, torch.Tensor]
    history: TrainHistory
    steps_run: int
    stopped_early: bool
    heldout_accuracy: float  # on HELDOUT_SIZE fresh sequences from the held-out generator
    head_scores: np.ndarray  # (num_layers, h) pattern score per head over the held-out sequences
    example_tokens: np.ndarray  # (T,) the first held-out sequence, shown by inspect() and explorer_module()
    seconds: float  # wall time of the training loop and evaluation

    @property
    def task(self) -> Task:
        return TASKS[self.config.task]

    def best_head(self) -> tuple[int, int, float]:
        """(layer, head, score) of the head that best follows the task's pattern on held-out data."""
        layer, head = np.unravel_index(int(np.argmax(self.head_scores)), self.head_scores.shape)
        return int(layer), int(head), float(self.head_scores[layer, head])

    def labels(self, tokens=None) -> list[str]:
        """Readable labels of the held-out example (or of the given token ids)."""
        tokens = self.example_tokens if tokens is None else np.asarray(tokens)
        return [self.task.label(int(token), self.config.vocab_size) for token in tokens]

    def inspect(self, tokens=None) -> Inspection:
        """Run the trained model on the held-out example (or given tokens (T,)) and collect what to show."""
        tokens = torch.as_tensor(self.example_tokens if tokens is None else np.asarray(tokens)).reshape(1, -1)  # (1, T)
        model = load_model(self)
        task, vocab_size = self.task, self.config.vocab_size
        attend_to = task.attend_to(tokens, vocab_size)  # (1, T)
        scored = attend_to != NOT_SCORED  # (1, T)
        targets = task.targets(tokens, attend_to, vocab_size)  # (1, T)
        with torch.no_grad():
            predictions = model(tokens).argmax(dim=-1)  # (1, T)
        weights = [w[0].numpy() for w in model.attention_weights(tokens)]  # per layer (h, T, T)
        scores = np.stack([task.pattern_score(w, tokens[0], vocab_size) for w in weights])  # (layers, h)
        return Inspection(
            tokens=tokens[0].numpy(),
            labels=self.labels(tokens[0].numpy()),
            targets=targets[0].numpy(),
            predictions=predictions[0].numpy(),
            scored=scored[0].numpy(),
            attend_to=attend_to[0].numpy(),
            weights=weights,
            scores=scores,
        )


def explorer_module(result: TrainResult, layer: int = 0) -> ExplorerInput:
    """Layer ``layer``'s real attention module with trained weights, its input on the held-out example, labels."""
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < result.config.num_layers:
        raise ValueError(f"layer must be in [0, {result.config.num_layers}), got {layer!r}")
    model = load_model(result)
    tokens = torch.as_tensor(result.example_tokens).reshape(1, -1)  # (1, T)
    x = model.layer_inputs(tokens)[layer]  # (1, T, d)
    return ExplorerInput(model.layers[layer], x, result.labels())


def _as_int(name: str, value, minimum: int) -> int:
    """A plain int (numpy integers from widgets are fine), or ValueError naming the number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def make_config(
    task_name: str,
    *,
    num_heads: int = 2,
    num_layers: int | None = None,
    d_model: int = 32,
    vocab_size: int | None = None,
    seq_len: int | None = None,
    steps: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> TrainConfig:
    """The validated config ``train`` runs: arguments left as None take the task's defaults.

    Raises ValueError naming the offending numbers. Numbers are stored as plain int and
    float, so equal settings give equal (and equally hashed) configs.
    """
    if task_name not in TASKS:
        raise ValueError(f"unknown task {task_name!r}; choose one of {sorted(TASKS)}")
    task = TASKS[task_name]
    num_layers = task.defaults.num_layers if num_layers is None else num_layers
    if isinstance(num_layers, bool) or num_layers not in (1, 2):
        raise ValueError(f"num_layers must be 1 or 2, got {num_layers!r}")
    steps = _as_int("steps", task.defaults.steps if steps is None else steps, 1)
    num_heads = _as_int("num_heads", num_heads, 1)
    d_model = _as_int("d_model", d_model, 1)
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
    batch_size = _as_int("batch_size", task.defaults.batch_size if batch_size is None else batch_size, 1)
    vocab_size = _as_int("vocab_size", task.defaults.vocab_size if vocab_size is None else vocab_size, 2)
    seq_len = _as_int("seq_len", task.defaults.seq_len if seq_len is None else seq_len, 2)
    task.check(vocab_size, seq_len)
    seed = _as_int("seed", seed, 0)
    lr = task.defaults.lr if lr is None else lr
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not 0 < lr < 1:
        raise ValueError(f"lr must be a number in (0, 1), got {lr!r}")
    _check_device(device)
    return TrainConfig(
        task=task_name,
        num_heads=num_heads,
        num_layers=int(num_layers),
        d_model=d_model,
        vocab_size=vocab_size,
        seq_len=seq_len,
        steps=steps,
        batch_size=batch_size,
        lr=float(lr),
        seed=seed,
        device=str(device),
    )


def _check_device(device) -> None:
    """Only the CPU and an available CUDA device: the app runs nowhere else."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device {device!r} is not a torch device: {error}") from None
    if parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or a CUDA device, got {device!r}")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA device")


def _scored_loss_and_accuracy(logits: torch.Tensor, batch: TaskBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy and accuracy over the scored positions only."""
    scored_logits = logits[batch.scored]  # (n, v)
    scored_targets = batch.targets[batch.scored]  # (n,)
    loss = F.cross_entropy(scored_logits, scored_targets)
    accuracy = (scored_logits.argmax(dim=-1) == scored_targets).float().mean()
    return loss, accuracy


def _to(batch: TaskBatch, device: torch.device) -> TaskBatch:
    return TaskBatch(*(tensor.to(device) for tensor in batch))


def train(
    task_name: str,
    *,
    progress: Callable[[int, int, float, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    **settings,
) -> TrainResult:
    """Train a fresh model on a task; ``settings`` are ``make_config``'s keywords (None: the task's defaults).

    Deterministic for a given config: data come from seeded generators and the
    initialisation from ``torch.manual_seed(seed)`` under ``rng.seeded``, so the caller's
    global RNG state is untouched. ``progress(step, total, loss, accuracy)`` gets the
    training batch's numbers about NUM_LOG_POINTS times; ``should_stop()`` is polled
    before every step and ends training early (the result says ``stopped_early``).
    """
    config = make_config(task_name, **settings)
    return run(config, progress=progress, should_stop=should_stop)


def _cosine_decay(total_steps: int) -> Callable[[int], float]:
    """Learning-rate factor from 1 down to 0: the weights settle instead of bouncing at the end."""
    return lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, total_steps) / total_steps))


def run(config: TrainConfig, *, progress=None, should_stop=None, time_budget_s: float | None = None) -> TrainResult:
    """Train on an already validated config (see ``train`` and ``make_config``).

    ``should_stop()`` is polled before every step; past ``time_budget_s`` seconds training also stops early.
    Either way the result says ``stopped_early`` and is evaluated on the steps run. torch's thread count is left
    alone: it belongs to the process (the app sets it once, in ``explorer.glue.frame.server_setup``), never to one run.
    """
    if time_budget_s is not None:
        deadline = time.monotonic() + time_budget_s
        asked = should_stop
        should_stop = lambda: time.monotonic() > deadline or (asked is not None and asked())  # noqa: E731
    return _run(config, progress, should_stop)


def _evaluate(model: TinyAttentionModel, task: Task, tokens_batch: TaskBatch, vocab_size: int):
    """(accuracy, head scores (layers, h)) over a held-out batch, HELDOUT_CHUNK sequences at a time.

    Sums of correct predictions and of pattern weight are accumulated, so the result equals one big batch's
    (up to float rounding) while memory stays that of a chunk: b·h·T² for HELDOUT_CHUNK sequences.
    """
    correct, counted = 0.0, 0
    head_sums = None
    for begin in range(0, tokens_batch.tokens.shape[0], HELDOUT_CHUNK):
        chunk = TaskBatch(*(tensor[begin : begin + HELDOUT_CHUNK] for tensor in tokens_batch))
        scored = int(chunk.scored.sum())
        if scored == 0:
            continue
        with torch.no_grad():
            _, accuracy = _scored_loss_and_accuracy(model(chunk.tokens), chunk)
            weights = model.attention_weights(chunk.tokens)  # per layer (b, h, T, T)
        correct += float(accuracy) * scored
        counted += scored
        sums = np.stack([task.pattern_score(w, chunk.tokens, vocab_size) for w in weights]) * scored
        head_sums = sums if head_sums is None else head_sums + sums
        del weights
    if head_sums is None:  # nothing scored anywhere
        return 0.0, np.zeros((len(model.layers), model.layers[0].num_heads))
    return correct / counted, head_sums / counted


def _run(config: TrainConfig, progress, should_stop) -> TrainResult:
    start = time.perf_counter()
    task = TASKS[config.task]
    device = torch.device(config.device)
    with seeded(config.seed, device):
        model = build_model(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, _cosine_decay(config.steps))
    train_gen = torch.Generator().manual_seed(2 * config.seed)
    log_every = max(1, config.steps // NUM_LOG_POINTS)
    history = TrainHistory()
    steps_run, stopped_early = 0, False
    model.train()
    for step in range(1, config.steps + 1):
        if should_stop is not None and should_stop():
            stopped_early = True
            break
        batch = _to(task.batch(train_gen, config.batch_size, config.seq_len, config.vocab_size), device)
        loss, accuracy = _scored_loss_and_accuracy(model(batch.tokens), batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        steps_run = step
        if step % log_every == 0 or step == config.steps:
            history.steps.append(step)
            history.loss.append(loss.item())
            history.accuracy.append(accuracy.item())
            if progress is not None:
                progress(step, config.steps, history.loss[-1], history.accuracy[-1])

    model = model.cpu().eval()
    heldout = task.batch(
        torch.Generator().manual_seed(2 * config.seed + 1), HELDOUT_SIZE, config.seq_len, config.vocab_size
    )
    heldout_accuracy, head_scores = _evaluate(model, task, heldout, config.vocab_size)  # head_scores (layers, h)
    return TrainResult(
        config=config,
        state_dict={name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()},
        history=history,
        steps_run=steps_run,
        stopped_early=stopped_early,
        heldout_accuracy=float(heldout_accuracy),
        head_scores=head_scores,
        example_tokens=heldout.tokens[0].numpy(),
        seconds=time.perf_counter() - start,
    )
