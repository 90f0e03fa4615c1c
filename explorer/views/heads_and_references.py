"""Heads and references: each head on its own beside the batched module, and the module against torch's attention."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_core.attention.reference import ReferenceReport
from mha_core.runs.forward import HeadsRun

from . import figures
from .figures.panel import Panel, caption, rows_and_columns, shape_text, to_numpy, token_heads_panel

# =====================================================================================================================
# Heads and references
# =====================================================================================================================

FUSED_NO_WEIGHTS = (
    "F.scaled_dot_product_attention returns no attention weights. Its fused kernels (flash, memory-efficient, "
    "cuDNN) never build the T × T matrix: they stream keys in tiles and keep a running maximum and sum per query "
    "(an online softmax). Its math fallback, which runs where no fused kernel fits (float64 on CUDA, for "
    "example), does build it. This app shows the weights from the explicit path, which computes the same output "
    "step by step; the differences below show that the two agree on this input, to float rounding."
)


@dataclass(frozen=True)
class HeadsView:
    panels: tuple[Panel, ...]  # separate heads, the batched module, their difference
    max_abs_diff: dict[str, float]  # mha_core.runs.forward.separate_heads' own numbers, by step
    weights_diff_per_head: tuple[float, ...]  # max |separate − batched| of each head's weights, this batch element


def build_heads_view(run: HeadsRun, labels: list[str], *, batch_index: int, presenter: bool) -> HeadsView:
    """Section 3.6.2: every head on its own (the wrapper's way) beside the batched module, and the difference."""
    separate, batched = run.separate, run.batched
    b = batch_index
    alone = to_numpy(separate.weights[b])  # (h, T, T)
    together = to_numpy(batched.steps["attn_weights"][b])
    diff = alone.astype(np.float64) - together.astype(np.float64)
    where = f"batch element {b}"
    shape = f"(b, h, T, T) = {shape_text(separate.weights.shape)}"
    diff_max = float(np.abs(diff).max()) if diff.size else 0.0
    top = figures.weights_top(alone, together)  # the pair on one scale, by the one rule for weights
    reading = rows_and_columns("(b, h, T, T)")
    panels = (
        token_heads_panel(
            "heads_separate",
            "Each head on its own (MultiHeadAttentionWrapper)",
            f"`separate_heads(...).weights` · shape {shape} · {reading} · {where} · each head's own slice of "
            "W_query, W_key, W_value and its own softmax",
            alone,
            labels,
            figure_title=f"separate heads · {where}",
            kind="weights",
            zmax=top,
            presenter=presenter,
        ),
        token_heads_panel(
            "heads_batched",
            "The same heads from the batched module (Listing 3.5)",
            caption(batched, "attn_weights", "(b, h, T, T)", where),
            together,
            labels,
            figure_title=f"batched module · {where}",
            kind="weights",
            zmax=top,
            presenter=presenter,
        ),
        token_heads_panel(
            "heads_difference",
            "Difference: separate − batched",
            f"shape {shape} · {reading} · {where} · max |difference| = {diff_max:.3g}",
            np.nan_to_num(diff, nan=0.0),
            labels,
            figure_title=f"separate − batched · {where}",
            kind="difference",
            zmax=None,
            presenter=presenter,
        ),
    )
    per_head = tuple(float(np.abs(diff[k]).max()) if diff[k].size else 0.0 for k in range(diff.shape[0]))
    return HeadsView(panels, dict(separate.max_abs_diff), per_head)


REFERENCE_ROWS: tuple[tuple[str, str], ...] = (
    ("output_vs_torch_mha", "output: ours vs nn.MultiheadAttention"),
    ("weights_vs_torch_mha", "weights: ours vs nn.MultiheadAttention (per head)"),
    ("output_vs_sdpa", "output: ours vs F.scaled_dot_product_attention"),
    ("output_vs_float64", "output error: ours vs float64 baseline"),
    ("torch_mha_output_vs_float64", "output error: nn.MultiheadAttention vs float64 baseline"),
    ("sdpa_output_vs_float64", "output error: SDPA vs float64 baseline"),
    ("weights_vs_float64", "weights error: ours vs float64 baseline"),
    ("torch_mha_weights_vs_float64", "weights error: nn.MultiheadAttention vs float64 baseline"),
)


def reference_table(reports: dict[str, ReferenceReport]) -> dict[str, list]:
    """Columns for a table: "comparison", then one column of max |differences| per dtype."""
    table: dict[str, list] = {"comparison": [label for _, label in REFERENCE_ROWS]}
    for dtype, report in reports.items():
        table[dtype] = [float(getattr(report, field)) for field, _ in REFERENCE_ROWS]
    return table


def float_tolerance(dtype: str) -> float:
    """Our float error may be at most twice torch's own, plus this floor (a few units of rounding)."""
    return 8 * torch.finfo(getattr(torch, dtype)).eps


def agreement_tolerance(dtype: str) -> float:
    """Two implementations of the same attention agree when their outputs differ by at most this."""
    return max(1e-5, 16 * torch.finfo(getattr(torch, dtype)).eps)


def within_torch_error(report: ReferenceReport) -> bool:
    """flash-attention's rule: our error against float64 is at most about twice torch's own error."""
    floor = float_tolerance(report.dtype)
    torch_output = max(report.torch_mha_output_vs_float64, report.sdpa_output_vs_float64)
    return (
        report.output_vs_float64 <= 2 * torch_output + floor
        and report.weights_vs_float64 <= 2 * report.torch_mha_weights_vs_float64 + floor
    )
