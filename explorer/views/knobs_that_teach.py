"""Knobs that teach: the softmax scale (temperature), dropout in train mode, and hand-made weights.

Each run (``mha_core.runs.forward``) computes once, cached apart by ``explorer.glue.cached.teaching_runs``; each
``build_*`` draws from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_core.runs import teaching
from mha_core.runs.forward import SCALE_MULTIPLIERS, DropoutRun, PresetRun, TemperatureRun

from . import figures
from .figures.panel import Panel, caption, head_names, index_labels, shape_text, to_numpy, token_heads_panel

# =====================================================================================================================
# Knobs that teach
# =====================================================================================================================


@dataclass(frozen=True)
class TemperatureView:
    multiplier: float
    scale: float  # multiplier / √head_dim
    mean_entropy: float  # nats, over batch, heads and rows
    max_mean_entropy: float  # the mean entropy of uniform attention over the allowed keys
    sweep: tuple[float, ...]  # mean entropy at each of SCALE_MULTIPLIERS
    panels: tuple[Panel, ...]


def _entropy_panel(run: TemperatureRun, presenter: bool) -> Panel:
    """Each row's entropy below the uniform row's, per head, along the query positions."""
    # log(visible keys) − entropy: 0 for uniform attention. Drawn as the gap, heads that all sit near uniform (the
    # book's scale, short inputs) stay apart instead of one line.
    below_uniform = to_numpy(run.most[0] - run.entropy[0])  # (h, T)
    positions = list(range(below_uniform.shape[1]))
    series = {"uniform": [0.0] * len(positions)}  # first, so that the heads are drawn over it
    series |= {f"head {k}": below_uniform[k].tolist() for k in range(below_uniform.shape[0])}
    return Panel(
        "temperature_entropy",
        "How far each query's weight row is from uniform",
        f"log(visible keys) − `row_entropy(attn_weights)` · shape (b, h, T) = {shape_text(run.entropy.shape)} · "
        "batch element 0 · 0 = uniform (every visible key weighted the same), log(number of visible keys) = "
        "one-hot",
        figures.line_chart(
            positions,
            series,
            title="Row entropy below uniform, per head",
            x_title="query position",
            y_title="nats below uniform",
            references=("uniform",),
            presenter=presenter,
        ).update_yaxes(range=[0, max(ENTROPY_AXIS_MIN, 1.1 * float(below_uniform.max()))]),
    )


# The entropy gap's axis reaches at least this (nats): autoscaled, 0.001 nats of float noise filled the plot.
ENTROPY_AXIS_MIN = 0.1


def _sweep_panel(run: TemperatureRun, presenter: bool) -> Panel:
    """The mean row entropy at each of SCALE_MULTIPLIERS, against uniform attention's."""
    sweep_values = [float(m) for m in SCALE_MULTIPLIERS]
    return Panel(
        "temperature_sweep",
        "Mean row entropy as the scale grows",
        "each point is one traced forward pass with ExplicitAttention(scale = multiplier / √head_dim) · "
        "the flat line is uniform attention",
        figures.line_chart(
            sweep_values,
            {"mean": list(run.sweep), "uniform": [run.uniform_mean] * len(sweep_values)},
            title="Mean entropy vs scale",
            x_title="scale × √head_dim",
            y_title="entropy (nats)",
            log_x=True,
            references=("uniform",),
            presenter=presenter,
        ).add_trace(_this_scale(run, presenter)),
    )


def _this_scale(run: TemperatureRun, presenter: bool) -> dict:
    """A star on the sweep at the page's own scale, labelled: the sweep did not say which point is on the page."""
    return {
        "type": "scatter",
        "x": [run.multiplier],
        "y": [float(run.entropy.mean())],  # the mean over batch, heads and rows, as the sweep's
        "mode": "markers+text",
        "name": f"this page: × {run.multiplier:g}",
        "text": [f"× {run.multiplier:g}"],
        "textposition": "top center",
        "marker": {"size": 18 * (1.6 if presenter else 1), "symbol": "star", "color": "#9C6ADE"},
        "hoverinfo": "skip",
    }


def scale_note(multiplier: float, scale: float) -> str:
    """The caption's note: the listing's line divides by √head_dim; at another multiplier the scale shown differs."""
    if multiplier == 1:
        return "batch element 0"
    return (
        f"batch element 0 · here the scores are multiplied by {multiplier:g}/√head_dim = {scale:.3g}, not the "
        "listing's 1/√head_dim"
    )


def build_temperature_view(run: TemperatureRun, labels: list[str], *, presenter: bool) -> TemperatureView:
    """The weights at softmax scale multiplier/√head_dim, the entropy of each row and its sweep over scales."""
    multiplier, scale, trace = run.multiplier, run.scale, run.trace
    weights = trace.steps["attn_weights"]
    panels = (
        token_heads_panel(
            "temperature_weights",
            f"Attention weights at scale {scale:.3g} (× {multiplier:g} of 1/√head_dim)",
            caption(trace, "attn_weights", "(b, h, T, T)", scale_note(multiplier, scale)),
            to_numpy(weights[0]),
            labels,
            figure_title=f"attn_weights at scale {scale:.3g}",
            kind="weights",
            presenter=presenter,
        ),
        _entropy_panel(run, presenter),
        _sweep_panel(run, presenter),
    )
    return TemperatureView(
        multiplier, scale, teaching.mean_entropy(weights), run.most.mean().item(), tuple(run.sweep), panels
    )


@dataclass(frozen=True)
class DropoutView:
    p: float
    scale: float
    kept_fraction: float
    max_rescale_error: float
    row_sum_range: tuple[float, float]
    panels: tuple[Panel, ...]  # before → keep mask → after, then the row sums
    main_index: int = 2  # the panel presenter mode shows: the weights after dropout


def _row_sums_panel(report: teaching.DropoutReport, presenter: bool) -> Panel:
    """Each row's sum of weights after dropout, per head: 1 on average, not row by row."""
    sums = to_numpy(report.row_sums[0])  # (h, T)
    return Panel(
        "dropout_row_sums",
        "Row sums after dropout: 1 on average, not row by row",
        f"sum over keys of attn_weights_dropped · shape (b, h, T) = {shape_text(report.row_sums.shape)} · "
        "batch element 0",
        figures.line_chart(
            list(range(sums.shape[1])),
            {f"head {k}": sums[k].tolist() for k in range(sums.shape[0])} | {"before": [1.0] * sums.shape[1]},
            title="Row sums after dropout",
            x_title="query position",
            y_title="sum of weights",
            references=("before",),
            presenter=presenter,
        ),
    )


def build_dropout_view(run: DropoutRun, labels: list[str], *, presenter: bool) -> DropoutView:
    p, trace, report = run.p, run.trace, run.report
    keep = to_numpy(report.keep[0]).astype(np.float32)
    keep[~to_numpy(report.allowed[0])] = -np.inf  # causally masked: neither kept nor dropped
    where = "batch element 0"
    panels = (
        token_heads_panel(
            "dropout_before",
            "Before dropout",
            caption(trace, "attn_weights", "(b, h, T, T)", where),
            trace.numpy("attn_weights")[0],
            labels,
            figure_title="attn_weights before dropout",
            kind="weights",
            presenter=presenter,
        ),
        Panel(
            "dropout_keep",
            "The dropout mask: 1 = kept, 0 = dropped (grey: causally masked)",
            caption(trace, "dropout_keep", "(b, h, T, T)", where),
            keep_mask_figure(keep, labels, presenter),
        ),
        token_heads_panel(
            "dropout_after",
            f"After dropout: survivors × 1/(1−p) = × {report.scale:.3g}",
            caption(trace, "attn_weights_dropped", "(b, h, T, T)", where),
            trace.numpy("attn_weights_dropped")[0],
            labels,
            figure_title=f"attn_weights after dropout (p = {p:g})",
            kind="weights",
            presenter=presenter,
        ),
        _row_sums_panel(report, presenter),
    )
    sums = to_numpy(report.row_sums[0])  # (h, T)
    lo, hi = (float(sums.min()), float(sums.max())) if sums.size else (0.0, 0.0)
    return DropoutView(p, report.scale, report.kept_fraction, report.max_rescale_error, (lo, hi), panels)


def keep_mask_figure(keep: np.ndarray, labels: list[str], presenter: bool, width_px: int = figures.FULL_FIGURE_PX):
    """(h, T, T) keep mask: 1 kept, 0 dropped, −∞ causally masked (drawn grey, named "causally masked").

    Shrunk for display, each shown cell is the fraction kept in its block (kind "keep"), so the picture agrees
    with the kept fraction the page reports.
    """
    return figures.heads_heatmap(
        keep,
        labels,
        labels,
        title="dropout keep mask",
        kind="keep",
        head_names=head_names(keep.shape[0]),
        presenter=presenter,
        width_px=width_px,
    )


PRESET_TEXT = {
    "none": "The module's own seeded random weights, for comparison.",
    "identity": "W_query = W_key = I (`torch.eye(d_out, d_in)`): each score is the raw dot product of two slices of "
    "input embeddings. Head k uses only input features k·head_dim … (k+1)·head_dim − 1; features from d_out on are "
    "used by no head. At the book's defaults (head_dim = 1) head 0 compares tokens on feature 0 alone, head 1 on "
    "feature 1 alone, and no head uses feature 2. A dot product grows with the vectors' lengths as well as with "
    "their alignment, so a long key can outscore a similar one, but in one dimension every positive key points the "
    "same way: length and alignment cannot be told apart, and the weights come out nearly uniform (from "
    '"starts", head 1 weighs "journey" 0.396 against "starts" itself 0.389). The lesson needs head_dim ≥ 2: raise '
    "d_out in the sidebar.",
    "self": "One-hot position inputs; W_query = c·I: every query matches its own key.",
    "previous": "One-hot position inputs; W_query shifts `e_t` to `e_(t−1)`: every query matches the previous token's "
    "key (token 0 has only itself).",
    "first": "One-hot position inputs; W_query sends every `e_t` to `e_0`: every query matches the first token's key.",
}


@dataclass(frozen=True)
class PresetView:
    preset: str
    description: str
    num_tokens: int
    hits: float | None  # fraction of rows whose heaviest key is the pattern's target (positional presets)
    panels: tuple[Panel, ...]  # the weights first


def _projection_weight_panel(
    made: torch.nn.Module, role: str, produces: str, input_labels: list[str], h: int, presenter: bool
) -> Panel:
    """W_query or W_key (``role`` "query" or "key") transposed, (d_in, d_out): inputs down, features across."""
    name = f"W_{role}"
    weight = to_numpy(getattr(made, name).weight).T  # (d_in, d_out): x @ Wᵀ
    d_in, d_out = made.d_in, made.d_out
    return Panel(
        f"preset_w_{role}",
        f"{name}ᵀ ({produces} = x @ {name}ᵀ)",
        f"`{name}.weight.T` · shape (d_in, d_out) = ({d_in}, {d_out}) · columns banded by head",
        figures.matrix_heatmap(
            weight,
            input_labels,
            index_labels(d_out),
            title=f"{name}.weight.T",
            column_groups=h,
            presenter=presenter,
            width_px=figures.half_figure_px(presenter),  # two to a row
            row_title="input",
            col_title=f"{role} feature",
        ),
    )


def build_preset_view(run: PresetRun, *, presenter: bool) -> PresetView:
    """The heatmaps the hand-made weights give."""
    preset, trace, labels = run.preset, run.trace, run.labels
    weights = trace.steps["attn_weights"]
    input_labels = labels if preset in teaching.POSITION_PATTERNS else index_labels(run.made.d_in)
    panels = (
        token_heads_panel(
            "preset_weights",
            "Attention weights with these weights",
            caption(trace, "attn_weights", "(b, h, T, T)", "one sequence"),
            to_numpy(weights[0]),
            labels,
            figure_title=f"attn_weights · preset {preset}",
            kind="weights",
            presenter=presenter,
        ),
        token_heads_panel(
            "preset_scores",
            "Scores Q Kᵀ",
            caption(trace, "attn_scores", "(b, h, T, T)", "one sequence"),
            to_numpy(trace.steps["attn_scores"][0]),
            labels,
            figure_title=f"attn_scores · preset {preset}",
            kind="scores",
            presenter=presenter,
        ),
        _projection_weight_panel(run.made, "query", "queries", input_labels, weights.shape[1], presenter),
        _projection_weight_panel(run.made, "key", "keys", input_labels, weights.shape[1], presenter),
    )
    return PresetView(preset, PRESET_TEXT[preset], weights.shape[-1], run.hits, panels)
