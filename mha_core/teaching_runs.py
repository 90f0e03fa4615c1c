"""The runs the Knobs that teach page draws: one forward pass per knob, on the shared module or a copy. Torch only.

A view takes one of these runs and draws it; the glue (``teaching_cache``) caches them apart from the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import teaching
from .attention import ExplicitAttention
from .modules import Trace, trace_forward
from .runs import run_trace

SCALE_MULTIPLIERS = ("0.01", "0.1", "0.25", "0.5", "1", "2", "4", "8", "16", "32", "64", "128")


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
    sweep = teaching.entropy_sweep(module, x, [float(m) for m in SCALE_MULTIPLIERS])
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
    """A train-mode trace on a private copy (runs.run_trace): the shared module is never put in train mode."""
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
