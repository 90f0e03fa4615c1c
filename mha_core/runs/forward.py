"""Settings in, module and trace out: every run the pages draw, one function per kind of run, with no UI in it.

A module is fully determined by its settings (the seed included), which is what lets the
app cache modules by settings and share them between sessions read-only. A view takes one of these runs and draws
it; the glue caches the runs apart from the figures. The maths the knobs' runs use is in ``teaching``.
"""

from __future__ import annotations

import copy
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from mha_core import devices
from mha_core.attention import inputs, masks
from mha_core.attention.kernels import ExplicitAttention
from mha_core.attention.modules import MultiHeadAttention, Trace, trace_forward
from mha_core.attention.reference import ReferenceReport, compare_with_torch
from mha_core.rng import seeded
from mha_core.runs import teaching

INPUT_KINDS = ("book", "random", "text")
SCALE_MULTIPLIERS = ("0.01", "0.1", "0.25", "0.5", "1", "2", "4", "8", "16", "32", "64", "128")


@dataclass(frozen=True, kw_only=True)
class ModuleSpec:
    d_in: int = 3
    d_out: int = 2
    context_length: int = 6
    dropout: float = 0.0
    num_heads: int = 2
    qkv_bias: bool = False
    seed: int = 123  # torch.manual_seed(seed) right before construction, as the book does
    device: str = "cpu"
    dtype: str = "float32"


@dataclass(frozen=True, kw_only=True)
class InputSpec:
    kind: str = "book"  # one of INPUT_KINDS
    num_tokens: int = 6
    d_in: int = 3
    batch_size: int = 2
    seed: int = 123
    text: str = inputs.BOOK_TEXT


def build_module(spec: ModuleSpec) -> MultiHeadAttention:
    """A fresh eval-mode module, seeded without disturbing the caller's global RNG."""
    device, dtype = devices.resolve(spec.device, spec.dtype)
    with seeded(spec.seed):
        module = MultiHeadAttention(
            spec.d_in, spec.d_out, spec.context_length, spec.dropout, spec.num_heads, qkv_bias=spec.qkv_bias
        )
    return module.to(device=device, dtype=dtype).eval()


def build_input(spec: InputSpec) -> tuple[torch.Tensor, list[str]]:
    """(x (batch, num_tokens, d_in) float32 on CPU, token labels).

    A short input is extended with seeded random embeddings (labelled t6, t7, ...);
    a long one is cut to num_tokens.
    """
    if spec.kind == "book":
        if spec.d_in != 3:
            raise ValueError(f"the book's embeddings are 3-dimensional, not d_in={spec.d_in}")
        x, labels = inputs.book_tokens()
    elif spec.kind == "text":
        x, labels = inputs.sentence_embeddings(spec.text, spec.d_in, spec.seed)
    elif spec.kind == "random":
        x, labels = inputs.random_embeddings(spec.num_tokens, spec.d_in, spec.seed)
    else:
        raise ValueError(f"input kind must be one of {INPUT_KINDS}, got {spec.kind!r}")
    x, labels = inputs.extend(x, labels, spec.num_tokens, spec.seed)
    return inputs.batch_of(x, spec.batch_size), labels


def run_trace(module: MultiHeadAttention, x: torch.Tensor, *, train: bool = False, seed: int = 0, **kwargs) -> Trace:
    """Trace the module on x, moved to the module's device and dtype.

    In train mode (dropout active) a private copy is switched to training, so a module
    shared between sessions is never mutated, and the dropout draw is seeded.
    """
    weight = module.W_query.weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    if not train:
        return trace_forward(module, x, **kwargs)
    training_copy = copy.deepcopy(module).train()
    with seeded(seed, weight.device):  # dropout draws from the global RNG
        return trace_forward(training_copy, x, **kwargs)


def trace_npz(trace: Trace, labels: list[str]) -> bytes:
    """The trace as a compressed .npz: every step under its name, plus the token labels."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, tokens=np.array(labels), **trace.to_npz_dict())
    return buffer.getvalue()


@dataclass(frozen=True, kw_only=True)
class ExplorerRun:
    """One forward pass of the explorer's module: its trace and the module's parts the panels draw.

    This is the computed view: every figure of every section, batch element and presentation is drawn from it,
    so changing only those never runs the module again (see ``caches.explorer_run``).
    """

    trace: Trace
    labels: list[str]
    mask_allowed: np.ndarray | None  # the book's (context_length, context_length) buffer as may-attend
    out_proj_weight: np.ndarray  # (d_out, d_out)
    dropout_shown: bool  # train mode with p > 0: the weights after dropout differ from the weights
    out_proj_bias: np.ndarray | None = None  # (d_out,)


def run_explorer(module, x, labels, *, train: bool, seed: int, dropout: float) -> ExplorerRun:
    """Run the module once on x (train mode on a private copy, see ``run_trace``)."""
    trace = run_trace(module, x, train=train, seed=seed)
    return ExplorerRun(
        trace=trace,
        labels=list(labels),
        mask_allowed=None if module.mask is None else masks.from_blocked(module.mask).cpu().numpy(),  # 1 = blocked
        out_proj_weight=module.out_proj.weight.detach().float().cpu().numpy(),
        dropout_shown=train and dropout > 0,
        out_proj_bias=module.out_proj.bias.detach().float().cpu().numpy(),
    )


# --- section 3.6.2: each head on its own, as the book's MultiHeadAttentionWrapper does -------------------------------
# Section 3.6.2 claims that one batched module (view + transpose + one matmul) computes what num_heads separate
# CausalAttention heads compute; separate_heads runs the separate path, so the app can show the two side by side.


@dataclass(frozen=True, kw_only=True)
class SeparateHeads:
    scores: torch.Tensor  # (b, h, T, T) Q Kᵀ of each head, computed alone
    weights: torch.Tensor  # (b, h, T, T)
    context: torch.Tensor  # (b, h, T, head_dim)
    concatenated: torch.Tensor  # (b, T, d_out): heads side by side, before out_proj
    max_abs_diff: dict[str, float]  # step name -> max |separate − batched|


def _head_slice(linear: torch.nn.Linear, head: int, head_dim: int, x: torch.Tensor) -> torch.Tensor:
    """x projected by rows [head·d, (head+1)·d) of the layer: one head's own projection."""
    rows = slice(head * head_dim, (head + 1) * head_dim)
    bias = None if linear.bias is None else linear.bias[rows]
    return F.linear(x, linear.weight[rows], bias)  # (b, T, d)


@torch.no_grad()
def separate_heads(module: MultiHeadAttention, x: torch.Tensor) -> SeparateHeads:
    """Run every head alone (eval-mode math, no dropout) and compare with the batched module."""
    num_tokens, head_dim = x.shape[1], module.head_dim
    blocked = module.mask.bool()[:num_tokens, :num_tokens]  # (T, T), the book's convention
    scores, weights, contexts = [], [], []
    for head in range(module.num_heads):
        queries = _head_slice(module.W_query, head, head_dim, x)  # (b, T, d)
        keys = _head_slice(module.W_key, head, head_dim, x)
        values = _head_slice(module.W_value, head, head_dim, x)
        head_scores = queries @ keys.transpose(1, 2)  # (b, T, T)
        head_weights = torch.softmax(head_scores.masked_fill(blocked, -torch.inf) / head_dim**0.5, dim=-1)
        scores.append(head_scores)
        weights.append(head_weights)
        contexts.append(head_weights @ values)  # (b, T, d)
    result_scores = torch.stack(scores, dim=1)  # (b, h, T, T)
    result_weights = torch.stack(weights, dim=1)  # (b, h, T, T)
    result_context = torch.stack(contexts, dim=1)  # (b, h, T, d)
    concatenated = torch.cat(contexts, dim=-1)  # (b, T, h·d)

    was_training = module.training
    if was_training:
        raise ValueError("separate_heads compares eval-mode numbers; call module.eval() first")
    batched = trace_forward(module, x).steps
    pairs = {
        "attn_scores": (result_scores, batched["attn_scores"]),
        "attn_weights": (result_weights, batched["attn_weights"]),
        "context_heads": (result_context, batched["context_heads"]),
        "context": (concatenated, batched["context"]),
    }
    diffs = {name: (a - b).abs().max().item() if a.numel() else 0.0 for name, (a, b) in pairs.items()}
    return SeparateHeads(
        scores=result_scores,
        weights=result_weights,
        context=result_context,
        concatenated=concatenated,
        max_abs_diff=diffs,
    )


@dataclass(frozen=True, kw_only=True)
class HeadsRun:
    """Every head run on its own and the batched module on the same input: what the heads view draws from."""

    separate: SeparateHeads
    batched: Trace


def run_heads(module, x: torch.Tensor) -> HeadsRun:
    weight = module.W_query.weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    return HeadsRun(separate=separate_heads(module, x), batched=trace_forward(module, x))


# --- references on any device ----------------------------------------------------------------------------------------


@torch.no_grad()
def compare_on_device(spec: ModuleSpec, x: torch.Tensor, *, cpu_baseline: bool | None = None) -> ReferenceReport:
    """``compare_with_torch`` for the module of ``spec`` on x (moved to its device and dtype).

    Where the device has float64 this is exactly ``compare_with_torch``. Where it has not (mps), or when
    ``cpu_baseline`` is True, the float64 baseline is the same module built on the CPU in float64.
    """
    if cpu_baseline is None:
        cpu_baseline = "float64" not in devices.available_dtypes(spec.device)
    module = build_module(spec)
    weight = module.W_query.weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    return compare_with_torch(module, x, baseline_device="cpu" if cpu_baseline else None)


# --- the Knobs that teach page: one forward pass per knob, on the shared module or a copy ----------------------------


def entropy_sweep(module: MultiHeadAttention, x: torch.Tensor, multipliers: Sequence[float]) -> list[float]:
    """Mean row entropy of the module's weights at softmax scale m/√head_dim, for each multiplier m > 0.

    Each point is a traced forward pass of the module itself, with ``ExplicitAttention(scale=...)``.
    """
    head_dim = module.head_dim
    result = []
    for m in multipliers:
        if not m > 0:
            raise ValueError(f"scale multipliers must be positive, got {m}")
        trace = run_trace(module, x, attention=ExplicitAttention(scale=m / math.sqrt(head_dim)))
        result.append(teaching.mean_entropy(trace.steps["attn_weights"]))
    return result


@dataclass(frozen=True, kw_only=True)
class TemperatureRun:
    """A forward pass at one softmax scale, its row entropies and the sweep over every scale."""

    multiplier: float
    scale: float
    trace: Trace
    entropy: torch.Tensor  # (b, h, T)
    most: torch.Tensor  # (b, h, T): the entropy of uniform attention over the allowed keys
    uniform_mean: float
    sweep: tuple[float, ...]  # mean entropy at each of SCALE_MULTIPLIERS


def run_temperature(module, x: torch.Tensor, multiplier: float) -> TemperatureRun:
    scale = multiplier / math.sqrt(module.head_dim)
    weight = module.W_query.weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    trace = trace_forward(module, x, attention=ExplicitAttention(scale=scale))
    weights = trace.steps["attn_weights"]
    allowed = torch.broadcast_to(trace.steps["mask"], weights.shape)
    most = teaching.uniform_entropy(allowed)  # (b, h, T)
    sweep = entropy_sweep(module, x, [float(m) for m in SCALE_MULTIPLIERS])
    return TemperatureRun(
        multiplier=multiplier,
        scale=scale,
        trace=trace,
        entropy=teaching.row_entropy(weights),
        most=most,
        uniform_mean=most.mean().item(),
        sweep=tuple(sweep),
    )


@dataclass(frozen=True, kw_only=True)
class DropoutRun:
    """A train-mode forward pass and what dropout did to its weights."""

    p: float
    trace: Trace
    report: teaching.DropoutReport


def run_dropout(module, x: torch.Tensor, p: float, seed: int) -> DropoutRun:
    """A train-mode trace on a private copy (``run_trace``): the shared module is never put in train mode."""
    trace = run_trace(module, x, train=True, seed=seed)
    return DropoutRun(p=p, trace=trace, report=teaching.dropout_report(trace, p))


@dataclass(frozen=True, kw_only=True)
class PresetRun:
    """A module with hand-made weights (a copy or a new module, never the shared one) and its forward pass."""

    preset: str
    made: torch.nn.Module
    trace: Trace
    labels: list[str]
    hits: float | None  # fraction of rows whose heaviest key is the pattern's target (positional presets)


def run_preset(module, x: torch.Tensor, labels: list[str], preset: str, *, num_heads: int) -> PresetRun:
    hits = None
    if preset in teaching.POSITION_PATTERNS:
        num_tokens = min(x.shape[1], teaching.MAX_PRESET_TOKENS)
        weight = module.W_query.weight
        made = teaching.positional_module(
            preset, num_tokens, num_heads, device=weight.device.type, dtype=str(weight.dtype).removeprefix("torch.")
        )
        x_made = teaching.position_inputs(num_tokens, 1).to(device=weight.device, dtype=weight.dtype)
        labels = [f"pos {t}" for t in range(num_tokens)]
    elif preset == "identity":
        made = teaching.with_identity_qk(module)
        x_made = x[:1].to(device=module.W_query.weight.device, dtype=module.W_query.weight.dtype)
    elif preset == "none":
        made = module
        x_made = x[:1].to(device=module.W_query.weight.device, dtype=module.W_query.weight.dtype)
    else:
        raise ValueError(f"preset must be one of {teaching.PRESETS}, got {preset!r}")
    trace = trace_forward(made, x_made)
    if preset in teaching.POSITION_PATTERNS:
        weights = trace.steps["attn_weights"]
        hits = teaching.top_key_hits(weights, teaching.pattern_targets(preset, weights.shape[-1]))
    return PresetRun(preset=preset, made=made, trace=trace, labels=list(labels), hits=hits)
