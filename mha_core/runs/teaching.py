"""Small computations the teaching pages need, on top of the modules and their traces. Torch only.

The runs built on them (the knobs' runs, the entropy sweep, the references on any device) live in ``runs``, which
imports this module; nothing here imports ``runs`` back.

* ``row_entropy``: how spread out each row of attention weights is (0 = one-hot, log n = uniform over n keys).
* ``dropout_report``: the dropout keep-mask of a train-mode trace and the 1/(1−p) rescaling of the survivors.
* Hand-made weights: ``with_identity_qk`` (a copy with W_query = W_key = I) and ``positional_module`` (one-hot
  position inputs and a W_query that makes every head attend to the named position).
* Cross-attention with ``QKVMultiHeadAttention``: seeded modules and inputs, and every mask builder in one place
  (``make_mask``), True = may attend.
* ``scale_demo``: why the scores are divided by √head_dim, on fresh one-head modules at initialisation.

Nothing here mutates a module it is given: hand-made weights go into a deep copy or a new module.

Axis letters: b batch, h heads, i query position, j key position, d head_dim.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mha_core import devices
from mha_core.attention import masks
from mha_core.attention.kernels import ExplicitAttention, FusedAttention
from mha_core.attention.modules import MultiHeadAttention, QKVMultiHeadAttention, Trace, trace_forward
from mha_core.rng import seeded

# --- entropy of attention rows ---------------------------------------------------------------------------------------


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row (last axis) of attention weights: shape ``weights.shape[:-1]``.

    0 for a one-hot row, log(n) for a row spread evenly over n keys. 0·log 0 counts as 0, so masked keys
    (weight 0) add nothing and a fully masked row (all zeros) has entropy 0.
    """
    # entr(x) = −x·log x with entr(0) = 0: one pass over the weights where masking the logs took four
    entropy = torch.special.entr(weights.double()).sum(-1)
    return entropy.to(weights.dtype if weights.is_floating_point() else torch.float32)


def uniform_entropy(allowed: torch.Tensor) -> torch.Tensor:
    """log(number of keys a row may attend to): the entropy of uniform attention, the most a row can have."""
    count = allowed.sum(-1).double()
    return torch.log(count.clamp(min=1.0))


def mean_entropy(weights: torch.Tensor) -> float:
    """Mean row entropy over every batch element, head and query row."""
    return row_entropy(weights).double().mean().item()


# --- dropout ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DropoutReport:
    p: float
    keep: torch.Tensor  # (b, h, i, j) bool: dropout kept this weight (masked cells count as kept)
    allowed: torch.Tensor  # (b, h, i, j) bool: the weight was not masked (it could be dropped)
    kept_fraction: float  # among allowed cells
    scale: float  # 1 / (1 − p)
    max_rescale_error: float  # max |after − before × scale| over kept cells
    row_sums: torch.Tensor  # (b, h, i) rows of the weights after dropout: 1 on average, not each


def dropout_report(trace: Trace, p: float) -> DropoutReport:
    """What dropout did in a train-mode trace: which weights survived and how they were rescaled."""
    if "dropout_keep" not in trace.steps:
        raise ValueError("this trace has no dropout step: run in train mode with dropout > 0")
    before = trace.steps["attn_weights"].double()
    after = trace.steps["attn_weights_dropped"].double()
    keep = trace.steps["dropout_keep"]
    allowed = torch.broadcast_to(trace.steps["mask"], before.shape).clone()
    scale = 1.0 / (1.0 - p)
    kept_allowed = keep & allowed
    error = (after - before * scale).abs()[kept_allowed]
    return DropoutReport(
        p=p,
        keep=keep,
        allowed=allowed,
        kept_fraction=kept_allowed.sum().item() / max(1, allowed.sum().item()),
        scale=scale,
        max_rescale_error=error.max().item() if error.numel() else 0.0,
        row_sums=after.sum(-1),
    )


# --- hand-made weights -----------------------------------------------------------------------------------------------

POSITION_PATTERNS = ("self", "previous", "first")
PRESETS = ("none", "identity", *POSITION_PATTERNS)
MAX_PRESET_TOKENS = 16  # positional presets use one-hot positions: d_in = head_dim = number of tokens
PRESET_STRENGTH = 8.0  # the target key's scaled score; the others get 0, so it takes ≥ e⁸/(e⁸ + 15) ≈ 0.995


def pattern_targets(pattern: str, num_tokens: int) -> list[int]:
    """The key each query attends to under a positional pattern (query 0 has no previous token: itself)."""
    if pattern == "self":
        return list(range(num_tokens))
    if pattern == "previous":
        return [max(t - 1, 0) for t in range(num_tokens)]
    if pattern == "first":
        return [0] * num_tokens
    raise ValueError(f"pattern must be one of {POSITION_PATTERNS}, got {pattern!r}")


def position_inputs(num_tokens: int, batch_size: int = 1) -> torch.Tensor:
    """(b, T, T): token t is the one-hot vector e_t, so the input carries positions and nothing else."""
    return torch.eye(num_tokens).unsqueeze(0).repeat(batch_size, 1, 1)


def positional_module(
    pattern: str,
    num_tokens: int,
    num_heads: int,
    strength: float = PRESET_STRENGTH,
    *,
    device: str = "cpu",
    dtype: str = "float32",
) -> MultiHeadAttention:
    """A MultiHeadAttention whose every head attends by position, for one-hot position inputs.

    d_in = head_dim = T and d_out = num_heads·T. Per head: W_key = I, so key j is e_j; W_query sends e_t to
    c·√T·e_target(t), so the scaled score of query t is c on its target key and 0 elsewhere. W_value = I and
    out_proj = I, so each head's context row is its weight row itself.
    """
    if not 1 <= num_tokens <= MAX_PRESET_TOKENS:
        raise ValueError(f"positional presets take 1–{MAX_PRESET_TOKENS} tokens, got {num_tokens}")
    targets = pattern_targets(pattern, num_tokens)
    T, h = num_tokens, num_heads
    with seeded(None):  # every weight is overwritten below; leave the caller's RNG alone
        module = MultiHeadAttention(T, h * T, T, 0.0, h, qkv_bias=False)
    shift = torch.zeros(T, T)
    shift[targets, range(T)] = strength * math.sqrt(T)  # column t (input e_t) -> c·√T·e_target(t)
    eye = torch.eye(T)
    with torch.no_grad():
        module.W_query.weight.copy_(shift.repeat(h, 1))  # (h·T, T): every head the same pattern
        module.W_key.weight.copy_(eye.repeat(h, 1))
        module.W_value.weight.copy_(eye.repeat(h, 1))
        module.out_proj.weight.copy_(torch.eye(h * T))
        module.out_proj.bias.zero_()
    torch_device, torch_dtype = devices.resolve(device, dtype)
    return module.to(device=torch_device, dtype=torch_dtype).eval()


def with_identity_qk(module: MultiHeadAttention) -> MultiHeadAttention:
    """A deep copy with W_query = W_key = I (d_out × d_in, no bias): scores become x·xᵀ, head by head.

    Head k then compares tokens on input features k·head_dim … (k+1)·head_dim − 1 (those that exist).
    W_value and out_proj are the module's own. The module passed in is never touched.
    """
    copied = copy.deepcopy(module)
    weight = copied.W_query.weight
    eye = torch.eye(copied.d_out, copied.d_in, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        for linear in (copied.W_query, copied.W_key):
            linear.weight.copy_(eye)
            if linear.bias is not None:
                linear.bias.zero_()
    return copied.eval()


def top_key_hits(weights: torch.Tensor, targets: Sequence[int]) -> float:
    """Fraction of (batch, head, query) rows whose heaviest key is the target key of that query."""
    top = weights.argmax(dim=-1)  # (b, h, i)
    expected = torch.tensor(list(targets), device=weights.device)
    return (top == expected).double().mean().item()


# --- cross-attention with QKVMultiHeadAttention ----------------------------------------------------------------------

IMPLEMENTATIONS = ("explicit", "fused")
MASK_KINDS = ("none", "causal", "padding", "sliding window", "random", "custom")
MAX_CROSS_TOKENS = 32  # query and key lengths: a custom mask is edited cell by cell, one bit per key


def build_qkv_module(
    hidden_dim: int,
    n_heads: int,
    *,
    implementation: str = "explicit",
    bias: bool = True,
    seed: int = 0,
    device: str = "cpu",
    dtype: str = "float32",
) -> QKVMultiHeadAttention:
    """A seeded eval-mode QKVMultiHeadAttention; both implementations get the same weights for the same seed."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    attention = ExplicitAttention() if implementation == "explicit" else FusedAttention()
    torch_device, torch_dtype = devices.resolve(device, dtype)
    with seeded(seed):
        module = QKVMultiHeadAttention(hidden_dim, n_heads, attention=attention, bias=bias)
    return module.to(device=torch_device, dtype=torch_dtype).eval()


def cross_inputs(batch_size: int, tgt_len: int, src_len: int, hidden_dim: int, seed: int):
    """(query (b, i, E), source (b, j, E), query labels, key labels): seeded uniform [0, 1) embeddings.

    The source is both the keys and the values: queries from one sequence attend to another.
    """
    gen = torch.Generator().manual_seed(seed)
    query = torch.rand(batch_size, tgt_len, hidden_dim, generator=gen)
    source = torch.rand(batch_size, src_len, hidden_dim, generator=gen)
    return query, source, [f"q{i}" for i in range(tgt_len)], [f"k{j}" for j in range(src_len)]


@dataclass(frozen=True, kw_only=True)
class MaskParams:
    """Everything a mask builder needs; hashable, so it can key a cache."""

    kind: str = "causal"
    lengths: tuple[int, ...] = ()  # padding: keys each batch element may attend to
    window: int = 2  # sliding window: query i sees key j where |i − j| < window
    causal_only: bool = True  # sliding window: earlier keys only
    keep_fraction: float = 0.7  # random: chance a position is kept, in [0, 1]
    seed: int = 0  # random
    custom: tuple[tuple[bool, ...], ...] = ()  # custom: one row per query, one flag per key, True = may attend

    def __post_init__(self):
        if not 0.0 <= self.keep_fraction <= 1.0:  # also refuses NaN
            raise ValueError(f"keep_fraction must be in [0, 1], got {self.keep_fraction}")


def make_mask(params: MaskParams, batch_size: int, tgt_len: int, src_len: int) -> torch.Tensor | None:
    """(b, i, j) bool mask, True = may attend; None for "none". One place for every builder."""
    kind = params.kind
    if kind == "none":
        return None
    if kind == "causal":
        mask = masks.causal(tgt_len, src_len)
    elif kind == "padding":
        if len(params.lengths) != batch_size:
            raise ValueError(f"padding needs {batch_size} lengths, one per batch element, got {len(params.lengths)}")
        return masks.padding(list(params.lengths), tgt_len, src_len)
    elif kind == "sliding window":
        mask = masks.sliding_window(tgt_len, src_len, params.window, causal_only=params.causal_only)
    elif kind == "random":
        return masks.random(tgt_len, src_len, params.keep_fraction, params.seed, batch_size=batch_size)
    elif kind == "custom":
        if len(params.custom) != tgt_len:
            raise ValueError(f"a custom mask needs one row per query ({tgt_len}), got {len(params.custom)}")
        widths = sorted({len(row) for row in params.custom})
        if widths and widths != [src_len]:
            raise ValueError(f"a custom mask needs one flag per key ({src_len}) in every row, got rows of {widths}")
        mask = torch.tensor(params.custom, dtype=torch.bool).reshape(tgt_len, src_len)  # (i, j)
    else:
        raise ValueError(f"mask kind must be one of {MASK_KINDS}, got {kind!r}")
    return mask.expand(batch_size, tgt_len, src_len).clone()


@dataclass(frozen=True, kw_only=True)
class CrossRun:
    trace: Trace  # the explicit implementation: every step
    output_fused: torch.Tensor  # the fused implementation's output on the same inputs
    max_diff_explicit_fused: float


def run_cross(
    hidden_dim: int,
    n_heads: int,
    *,
    bias: bool,
    seed: int,
    device: str,
    dtype: str,
    query: torch.Tensor,
    source: torch.Tensor,
    mask: torch.Tensor | None,
) -> CrossRun:
    """Run the explicit and the fused module (same weights) on the same query, source and mask."""
    runs = {}
    for implementation in IMPLEMENTATIONS:
        module = build_qkv_module(
            hidden_dim, n_heads, implementation=implementation, bias=bias, seed=seed, device=device, dtype=dtype
        )
        weight = module.query_project.weight
        q, s = (t.to(device=weight.device, dtype=weight.dtype) for t in (query, source))
        runs[implementation] = trace_forward(module, q, s, s, mask)
    explicit, fused = runs["explicit"], runs["fused"]
    diff = (explicit.output.double() - fused.output.double()).abs().max().item() if explicit.output.numel() else 0.0
    return CrossRun(trace=explicit, output_fused=fused.output, max_diff_explicit_fused=diff)


# --- why √head_dim: the scores' spread and the softmax's peak at initialisation ---------------------------------------

SCALE_HEAD_DIMS = (1, 4, 16, 64)


@dataclass(frozen=True, kw_only=True)
class ScaleDemo:
    """Per head_dim: a fresh one-head module's raw score spread and each row's largest weight, ÷ √head_dim or not."""

    head_dims: tuple[int, ...]
    spread: tuple[float, ...]  # std of the raw scores q · k over visible (i, j)
    spread_scaled: tuple[float, ...]  # the same ÷ √head_dim
    top_weight: tuple[float, ...]  # mean over rows (two or more visible keys) of the largest weight, no division
    top_weight_scaled: tuple[float, ...]  # the same with the module's own ÷ √head_dim


@torch.no_grad()
def scale_demo(
    head_dims: Sequence[int] = SCALE_HEAD_DIMS, *, d_in: int = 64, num_tokens: int = 32, seed: int = 0
) -> ScaleDemo:
    """One traced forward pass per head_dim at initialisation (nn.Linear's default init, x ~ N(0, 1)): the raw scores
    spread like √head_dim, and without the division the softmax turns towards one-hot as head_dim grows."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(4, num_tokens, d_in, generator=gen)  # (b, T, d_in)
    rows = slice(1, None)  # row 0 sees one key: its weight is 1 either way
    columns = {name: [] for name in ("spread", "spread_scaled", "top_weight", "top_weight_scaled")}
    for d in head_dims:
        with seeded(seed):
            module = MultiHeadAttention(d_in, d, num_tokens, 0.0, 1).eval()
        trace = trace_forward(module, x)
        allowed = trace.steps["mask"]  # (T, T)
        scores = trace.steps["attn_scores"][..., allowed]  # (b, h, visible cells)
        columns["spread"].append(scores.std().item())
        columns["spread_scaled"].append((scores / d**0.5).std().item())
        unscaled = torch.softmax(trace.steps["masked_scores"], dim=-1)  # (b, h, T, T): no ÷ √head_dim
        columns["top_weight"].append(unscaled[..., rows, :].amax(-1).mean().item())
        columns["top_weight_scaled"].append(trace.steps["attn_weights"][..., rows, :].amax(-1).mean().item())
    return ScaleDemo(head_dims=tuple(head_dims), **{k: tuple(v) for k, v in columns.items()})
