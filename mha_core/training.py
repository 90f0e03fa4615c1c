"""Train a tiny model built from the real ``MultiHeadAttention`` on a synthetic task, then look inside.

The point is to show trained attention heads, not to build a language model. So the model is as
small as the tasks allow: token + learned position embeddings, one or two layers of the book's
``MultiHeadAttention`` with residual connections, and a linear read-out to vocabulary logits. There
is no MLP and no LayerNorm: what a layer writes into the residual stream is exactly its attention
output, so the weights shown are what does the work.

Every task states where each scored query position *should* attend (``Task.attend_to``). The
target is read off that key position, and ``Task.pattern_score`` measures how much weight each head
puts there. Data is sampled on the fly from a seeded ``torch.Generator``: nothing is downloaded.

* ``previous_token``: output token t-1 (position-based; one layer).
* ``first_token``: output token 0 (position-based; one layer).
* ``key_value_lookup``: pairs "A=3" with distinct keys, then queries "A?"; output the value of the
  pair whose key matches (content-based; one layer, because each pair is a single token).
* ``induction``: a segment of distinct tokens repeated; in the repeat, output the token that followed
  the current token's previous occurrence (two layers: a previous-token head feeds an induction head).

Typical use: ``result = train("previous_token")``, then ``result.inspect()`` for weights and
scores on a held-out example, and ``explorer_module(result)`` for the trained layer itself.

Axis letters: b batch, t query position, s key position, h heads, d d_model, v vocabulary.
"""

from __future__ import annotations

import math
import numbers
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import NamedTuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .modules import MultiHeadAttention
from .rng import seeded
from .trace import trace_forward

NOT_SCORED = -1  # attend_to value for a position the task does not score


# ---------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------


def _most_recent_earlier(match: torch.Tensor) -> torch.Tensor:
    """(b, t, s) bool "key s matches query t" -> (b, t) latest s < t that matches, else NOT_SCORED."""
    num_tokens = match.shape[-1]
    earlier = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=match.device).tril(-1)  # (t, s): s < t
    match = match & earlier  # (b, t, s)
    positions = torch.arange(num_tokens, device=match.device)  # (s,)
    return torch.where(match, positions, NOT_SCORED).amax(dim=-1)  # (b, t)


def _distinct_tokens(gen: torch.Generator, batch_size: int, length: int, vocab_size: int) -> torch.Tensor:
    """(b, length) rows of distinct tokens from [0, vocab_size): the first `length` of a random permutation."""
    return torch.rand(batch_size, vocab_size, generator=gen).argsort(dim=-1)[:, :length]  # (b, length)


# previous_token ----------------------------------------------------------------------------


def _sample_uniform(gen, batch_size, seq_len, vocab_size):
    return torch.randint(vocab_size, (batch_size, seq_len), generator=gen)  # (b, T)


def _attend_previous(tokens):
    positions = torch.arange(tokens.shape[-1]).expand_as(tokens)  # (b, T)
    return torch.where(positions >= 1, positions - 1, NOT_SCORED)


def _attend_first(tokens):
    positions = torch.arange(tokens.shape[-1]).expand_as(tokens)  # (b, T)
    return torch.where(positions >= 1, 0, NOT_SCORED)


# key_value_lookup --------------------------------------------------------------------------
# Vocabulary layout for n keys (letters) and n values (digits):
#   [0, n)              value tokens "0".."n-1"  (only ever targets)
#   [n, n + n·n)        pair tokens  "A=3": key k, value v at id n + k·n + v
#   [n + n·n, n·(n+2))  query tokens "A?"  : key k at id n + n·n + k


def _lookup_size(vocab_size: int) -> int:
    """Largest n (keys = values = n) whose vocabulary n·(n+2) fits in vocab_size."""
    return int(math.isqrt(vocab_size + 1)) - 1


def _sample_lookup(gen, batch_size, seq_len, vocab_size):
    """P = ceil(T / 2) pairs with distinct keys, then Q = T - P queries asking distinct keys among them."""
    n = _lookup_size(vocab_size)
    num_pairs = (seq_len + 1) // 2
    keys = _distinct_tokens(gen, batch_size, num_pairs, n)  # (b, P)
    values = torch.randint(n, (batch_size, num_pairs), generator=gen)  # (b, P)
    pairs = n + keys * n + values  # (b, P)
    asked = _distinct_tokens(gen, batch_size, seq_len - num_pairs, num_pairs)  # (b, Q): which pair each query asks
    queries = n + n * n + keys.gather(1, asked)  # (b, Q)
    return torch.cat([pairs, queries], dim=1)  # (b, T)


def _lookup_parts(tokens, vocab_size):
    """Per token: (key or -1, is a pair token, is a query token), each (b, T)."""
    n = _lookup_size(vocab_size)
    is_pair = (tokens >= n) & (tokens < n + n * n)
    is_query = tokens >= n + n * n
    key = torch.where(is_pair, (tokens - n) // n, torch.where(is_query, tokens - n - n * n, -1))
    return key, is_pair, is_query


def _attend_lookup(tokens, vocab_size):
    key, is_pair, is_query = _lookup_parts(tokens, vocab_size)
    match = (key[:, :, None] == key[:, None, :]) & is_query[:, :, None] & is_pair[:, None, :]  # (b, t, s)
    return _most_recent_earlier(match)


def _target_lookup(tokens, attend_to, vocab_size):
    n = _lookup_size(vocab_size)
    attended = tokens.gather(1, attend_to.clamp(min=0))  # (b, T): the pair token looked up
    return (attended - n) % n  # its value part, which is the id of value token "v"


def _label_lookup(token, vocab_size):
    n = _lookup_size(vocab_size)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if token < n:
        return str(token)
    if token < n + n * n:
        key, value = divmod(token - n, n)
        return f"{letters[key % 26]}={value}"
    return f"{letters[(token - n - n * n) % 26]}?"


def _check_lookup(vocab_size, seq_len):
    n = _lookup_size(vocab_size)
    num_pairs = (seq_len + 1) // 2
    if seq_len < 2 or n < num_pairs:
        raise ValueError(
            f"key_value_lookup needs seq_len >= 2 and (seq_len + 1) // 2 = {num_pairs} distinct keys, "
            f"but vocab_size={vocab_size} holds only {n} keys (n keys need vocab_size >= n·(n+2))"
        )


# induction ---------------------------------------------------------------------------------


def _sample_repeated_segment(gen, batch_size, seq_len, vocab_size):
    """Rows of distinct tokens: prefix (T - 2p), segment (p), the same segment again.

    The segment length p varies by row, in [T // 4, T // 2], so no fixed positional offset
    finds the earlier copy; the model has to match content. All tokens before the repeat are
    distinct, so every repeated token has exactly one earlier occurrence.
    """
    segment_len = torch.randint(max(2, seq_len // 4), seq_len // 2 + 1, (batch_size, 1), generator=gen)  # (b, 1)
    distinct = _distinct_tokens(gen, batch_size, seq_len, vocab_size)  # (b, T); only the first T - p are used
    positions = torch.arange(seq_len)  # (T,)
    source = torch.where(positions < seq_len - segment_len, positions, positions - segment_len)  # (b, T)
    return distinct.gather(1, source)  # (b, T)


def _attend_induction(tokens):
    match = tokens[:, :, None] == tokens[:, None, :]  # (b, t, s)
    previous = _most_recent_earlier(match)  # (b, T)
    return torch.where(previous >= 0, previous + 1, NOT_SCORED)


def _check_induction(vocab_size, seq_len):
    if seq_len < 4 or vocab_size < seq_len:
        raise ValueError(
            f"induction needs seq_len >= 4 and vocab_size >= seq_len (tokens before the repeat are distinct), "
            f"got seq_len={seq_len}, vocab_size={vocab_size}"
        )


def _check_any(vocab_size, seq_len):
    if seq_len < 2:
        raise ValueError(f"seq_len must be at least 2, got {seq_len}")


# the registry --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskDefaults:
    """The default budget: what ``train`` uses for arguments left as None."""

    num_layers: int
    vocab_size: int
    seq_len: int
    steps: int
    batch_size: int
    lr: float


class TaskBatch(NamedTuple):
    """One sampled batch. Unscored positions have attend_to = NOT_SCORED and a meaningless target."""

    tokens: torch.Tensor  # (b, T) long
    targets: torch.Tensor  # (b, T) long
    scored: torch.Tensor  # (b, T) bool
    attend_to: torch.Tensor  # (b, T) long: the key position each scored query should attend to


@dataclass(frozen=True)
class Task:
    """A synthetic task: how to sample it, where each query should attend, what it must output."""

    name: str
    description: str  # one sentence, for the page
    defaults: TaskDefaults
    sample_tokens: Callable = field(repr=False)  # (gen, b, T, vocab_size) -> tokens (b, T)
    find_key: Callable = field(repr=False)  # (tokens (b, T), vocab_size) -> expected key (b, T) or NOT_SCORED
    read_target: Callable | None = field(default=None, repr=False)  # (tokens, key, vocab_size) -> (b, T); None: copy
    token_label: Callable | None = field(default=None, repr=False)  # (token id, vocab_size) -> str; None: the id
    check_sizes: Callable = field(default=_check_any, repr=False)  # (vocab_size, T) -> None, or ValueError

    def check(self, vocab_size: int, seq_len: int) -> None:
        """Raise ValueError if this task cannot be sampled at this vocabulary size and length."""
        _check_any(vocab_size, seq_len)
        self.check_sizes(vocab_size, seq_len)

    def attend_to(self, tokens: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """(b, T) -> (b, T): the key position each query should attend to, NOT_SCORED where none."""
        return self.find_key(tokens, vocab_size)

    def targets(self, tokens: torch.Tensor, attend_to: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """(b, T) target ids, read off the expected key (meaningless where NOT_SCORED)."""
        if self.read_target is None:
            return tokens.gather(-1, attend_to.clamp(min=0))  # (b, T): copy the attended token
        return self.read_target(tokens, attend_to, vocab_size)

    def batch(self, gen: torch.Generator, batch_size: int, seq_len: int, vocab_size: int) -> TaskBatch:
        """Sample tokens and derive expected keys, scored positions and targets from them."""
        tokens = self.sample_tokens(gen, batch_size, seq_len, vocab_size)  # (b, T)
        attend_to = self.attend_to(tokens, vocab_size)  # (b, T)
        targets = self.targets(tokens, attend_to, vocab_size)  # (b, T)
        return TaskBatch(tokens, targets, attend_to != NOT_SCORED, attend_to)

    def label(self, token: int, vocab_size: int) -> str:
        """A short readable name for one token id."""
        return str(token) if self.token_label is None else self.token_label(token, vocab_size)

    def pattern_score(self, weights, tokens, vocab_size: int | None = None) -> np.ndarray:
        """Mean attention weight each head puts on the expected key, over the scored query positions.

        weights: (h, T, T) or (b, h, T, T), tensor or array; tokens: (T,) or (b, T).
        Returns (h,) floats in [0, 1]. vocab_size matters only for key_value_lookup
        (default: the task's default vocab_size).
        """
        weights = torch.as_tensor(weights)
        tokens = torch.as_tensor(tokens).cpu()
        if weights.ndim == 3:
            weights, tokens = weights[None], tokens.reshape(1, -1)  # (1, h, T, T), (1, T)
        vocab_size = self.defaults.vocab_size if vocab_size is None else vocab_size
        attend_to = self.attend_to(tokens, vocab_size).to(weights.device)  # (b, T)
        scored = attend_to != NOT_SCORED  # (b, T)
        index = attend_to.clamp(min=0)[:, None, :, None].expand(-1, weights.shape[1], -1, 1)  # (b, h, T, 1)
        on_expected = weights.gather(-1, index)[..., 0]  # (b, h, T): weight each query puts on its expected key
        on_expected = on_expected * scored[:, None, :]  # (b, h, T): zero where not scored
        return (on_expected.sum(dim=(0, 2)) / scored.sum().clamp(min=1)).double().cpu().numpy()  # (h,)


def _ignore_vocab(fn):
    """Adapt a (tokens) -> keys function to the (tokens, vocab_size) signature tasks share."""
    return lambda tokens, vocab_size: fn(tokens)


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="previous_token",
            description="At each position output the token just before it; positions t >= 1 are scored.",
            defaults=TaskDefaults(num_layers=1, vocab_size=16, seq_len=16, steps=200, batch_size=64, lr=1e-2),
            sample_tokens=_sample_uniform,
            find_key=_ignore_vocab(_attend_previous),
        ),
        Task(
            name="first_token",
            description="At each position output the sequence's first token; positions t >= 1 are scored.",
            defaults=TaskDefaults(num_layers=1, vocab_size=16, seq_len=16, steps=200, batch_size=64, lr=1e-2),
            sample_tokens=_sample_uniform,
            find_key=_ignore_vocab(_attend_first),
        ),
        Task(
            name="key_value_lookup",
            description=(
                "The first half holds pairs like A=3 with distinct keys; at each query like A? in the second "
                "half output the value paired with that key (content-based: the key position is random)."
            ),
            defaults=TaskDefaults(num_layers=1, vocab_size=80, seq_len=12, steps=400, batch_size=64, lr=1e-2),
            sample_tokens=_sample_lookup,
            find_key=_attend_lookup,
            read_target=_target_lookup,
            token_label=_label_lookup,
            check_sizes=_check_lookup,
        ),
        Task(
            name="induction",
            description=(
                "Distinct random tokens end with a segment of varying length repeated; in the repeat, predict the "
                "next token by finding the current token's previous occurrence and copying what followed it."
            ),
            defaults=TaskDefaults(num_layers=2, vocab_size=16, seq_len=16, steps=400, batch_size=64, lr=1e-2),
            sample_tokens=_sample_repeated_segment,
            find_key=_ignore_vocab(_attend_induction),
            check_sizes=_check_induction,
        ),
    )
}


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


class TinyAttentionModel(nn.Module):
    """Embeddings, 1-2 residual layers of the real ``MultiHeadAttention``, a linear read-out.

    ``forward``: tokens (b, T) -> logits (b, T, vocab_size).
    """

    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_heads: int, num_layers: int):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(context_length, d_model)
        self.layers = nn.ModuleList(
            MultiHeadAttention(d_model, d_model, context_length, dropout=0.0, num_heads=num_heads)
            for _ in range(num_layers)
        )
        self.readout = nn.Linear(d_model, vocab_size)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """(b, T) -> (b, T, d): token plus position embedding, the first layer's input."""
        positions = torch.arange(tokens.shape[-1], device=tokens.device)  # (T,)
        return self.token_embedding(tokens) + self.position_embedding(positions)  # (b, T, d)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)  # (b, T, d)
        for layer in self.layers:
            x = x + layer(x)  # (b, T, d): each layer adds its attention output to the residual stream
        return self.readout(x)  # (b, T, v)

    @torch.no_grad()
    def layer_inputs(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """What each layer's attention module receives, (b, T, d) per layer."""
        inputs = [self.embed(tokens)]
        for layer in self.layers[:-1]:
            inputs.append(inputs[-1] + layer(inputs[-1]))
        return inputs

    @torch.no_grad()
    def attention_weights(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Softmax weights (b, h, T, T) per layer, traced from each real module on its actual input."""
        weights = []
        x = self.embed(tokens)  # (b, T, d)
        for layer in self.layers:
            trace = trace_forward(layer, x)
            weights.append(trace.steps["attn_weights"])  # (b, h, T, T)
            x = x + trace.output  # (b, T, d)
        return weights


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

HELDOUT_SIZE = 512  # held-out sequences for the final accuracy and head scores
HELDOUT_CHUNK = 64  # held-out sequences run at once: the evaluation's memory is that of a 64-sequence batch
NUM_LOG_POINTS = 100  # history keeps about this many points; progress is called at each


@dataclass(frozen=True)
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


@dataclass
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


@dataclass(frozen=True, eq=False)
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


def build_model(config: TrainConfig) -> TinyAttentionModel:
    """A freshly initialised model for this config (initialisation uses the global RNG)."""
    return TinyAttentionModel(config.vocab_size, config.seq_len, config.d_model, config.num_heads, config.num_layers)


def load_model(result: TrainResult) -> TinyAttentionModel:
    """The trained model, rebuilt from the result's state dict, on the CPU in eval mode."""
    model = build_model(result.config)
    model.load_state_dict(result.state_dict)
    return model.eval()


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
    alone: it belongs to the process (the app sets it once, in ``explorer.glue.server_setup``), never to one run.
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


# ---------------------------------------------------------------------------------------------
# A trained layer as one URL-safe string: "Open in the explorer" links carry it as ?trained=<spec>
# ---------------------------------------------------------------------------------------------

# (spec prefix, TrainConfig field, low, high). The bounds keep a URL from asking for a long run:
# the largest spec trains in about a minute on one CPU core.
SPEC_NUMBERS = (
    ("heads", "num_heads", 1, 16),
    ("layers", "num_layers", 1, 2),
    ("d", "d_model", 1, 128),
    ("vocab", "vocab_size", 2, 256),
    ("len", "seq_len", 2, 64),
    ("steps", "steps", 1, 2000),
    ("batch", "batch_size", 1, 256),
)
SPEC_MAX_SEED = 2**31 - 1
SPEC_MAX_CHARS = 200
_SPEC_INT = r"(0|[1-9][0-9]{0,9})"  # no sign, no leading zeros: one spelling per number
_SPEC_LR = r"lr([1-9][0-9]{0,16})e(0|-?[1-9][0-9]{0,2})"  # digits e exponent: 0.01 is lr1e-2
_SPEC_DEVICE = r"(cpu|cuda|cuda:(?:0|[1-9][0-9]?))"


def _spec_quote(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _format_lr(lr: float) -> str:
    """The shortest decimal that gives lr back, written without a dot: 0.01 -> "1e-2", 0.0015 -> "15e-4"."""
    _, digits, exponent = Decimal(repr(lr)).normalize().as_tuple()
    return f"lr{''.join(map(str, digits))}e{exponent}"


def format_trained_spec(config: TrainConfig, layer: int = 0) -> str:
    """One layer of a trained config as a URL-safe string, e.g.

    ``previous_token.heads2.layers1.d32.vocab16.len16.steps200.batch64.lr1e-2.seed0.cpu.layer0``

    Every field of the config is spelled out, so ``parse_trained_spec`` rebuilds an equal config
    (and so hits the same cache entry). Raises ValueError when the config or layer is outside
    what a spec may carry (``SPEC_NUMBERS``, ``SPEC_MAX_SEED``).
    """
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= layer < config.num_layers:
        raise ValueError(f"layer must be in [0, {config.num_layers}), got {layer!r}")
    parts = [config.task]
    for prefix, name, low, high in SPEC_NUMBERS:
        value = getattr(config, name)
        if not low <= value <= high:
            raise ValueError(f"{name}={value} is outside {low}–{high}, which a trained spec can carry")
        parts.append(f"{prefix}{value}")
    if not 0 <= config.seed <= SPEC_MAX_SEED:
        raise ValueError(f"seed={config.seed} is outside 0–{SPEC_MAX_SEED}, which a trained spec can carry")
    if not re.fullmatch(_SPEC_DEVICE, config.device):
        raise ValueError(f"device {config.device!r} cannot be written in a trained spec (cpu, cuda, cuda:N)")
    parts += [_format_lr(config.lr), f"seed{config.seed}", config.device, f"layer{int(layer)}"]
    return ".".join(parts)


def parse_trained_spec(text: str) -> tuple[TrainConfig, int]:
    """(config, layer) from ``format_trained_spec``'s string; strict, since it comes from a URL.

    Raises ValueError naming the first part that is wrong: an unknown task, a missing or
    misspelled field, a number out of bounds, a config ``make_config`` rejects (for example a
    CUDA device on a machine without one), or a layer the model does not have.
    """
    if not isinstance(text, str):
        raise ValueError(f"a trained spec must be a string, got {type(text).__name__}")
    if len(text) > SPEC_MAX_CHARS:
        raise ValueError(f"trained spec is {len(text)} characters long; at most {SPEC_MAX_CHARS}")
    parts = text.split(".")
    expected = ["task", *(prefix for prefix, *_ in SPEC_NUMBERS), "lr", "seed", "device", "layer"]
    if len(parts) != len(expected):
        raise ValueError(
            f"trained spec {_spec_quote(text)} has {len(parts)} dot-separated parts, expected {len(expected)}: "
            + ".".join(expected)
        )
    task, *numbers_, lr_part, seed_part, device, layer_part = parts
    if task not in TASKS:
        raise ValueError(f"unknown task {_spec_quote(task)} in trained spec; choose one of {sorted(TASKS)}")
    values: dict[str, int] = {}
    for part, (prefix, name, low, high) in zip(numbers_, SPEC_NUMBERS, strict=True):
        values[name] = _spec_int(part, prefix, name, low, high)
    match = re.fullmatch(_SPEC_LR, lr_part)
    if match is None:
        raise ValueError(f"lr part {_spec_quote(lr_part)} is not like lr1e-2 (digits, 'e', exponent)")
    lr = float(f"{match[1]}e{match[2]}")
    seed = _spec_int(seed_part, "seed", "seed", 0, SPEC_MAX_SEED)
    if not re.fullmatch(_SPEC_DEVICE, device):
        raise ValueError(f"device {_spec_quote(device)} in trained spec is not cpu, cuda or cuda:N")
    layer = _spec_int(layer_part, "layer", "layer", 0, values["num_layers"] - 1)
    try:
        config = make_config(task, **values, lr=lr, seed=seed, device=device)
    except ValueError as error:
        raise ValueError(f"trained spec: {error}") from None
    canonical = format_trained_spec(config, layer)
    if canonical != text:  # e.g. lr10e-3 for lr1e-2: one config, one spelling, one cache entry
        raise ValueError(f"trained spec {_spec_quote(text)} is not in canonical form; expected {canonical!r}")
    return config, layer


def _spec_int(part: str, prefix: str, name: str, low: int, high: int) -> int:
    match = re.fullmatch(re.escape(prefix) + _SPEC_INT, part)
    if match is None:
        raise ValueError(f"expected {prefix}<number> for {name} in trained spec, got {_spec_quote(part)}")
    value = int(match[1])
    if not low <= value <= high:
        raise ValueError(f"{name}={value} in trained spec is outside {low}–{high}")
    return value
