"""Step through: one step per screen, its shapes, lit listing lines and figures, from one traced forward pass.

Axis letters: b batch, h heads, T tokens, i query position, j key position, d head_dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.attention.modules import Trace
from mha_core.runs.teaching import ScaleDemo

from . import figures
from .figures.panel import Panel, caption, head_names, index_labels, shape_text
from .knobs_that_teach import keep_mask_figure
from .step_notes import scale_panels, scores_notes
from .step_through_steps import STEP_COUNT, STEPS, Step, code_of, line_ranges, marked_listing


@dataclass(frozen=True)
class StepView:
    number: int  # 1-based
    count: int
    title: str
    lines: tuple[int, ...]  # highlighted lines of Listing 3.5, 1-based
    line_text: str  # those lines in words: "lines 14, 52–53"
    listing: str  # the whole listing with a + gutter on those lines
    code: str  # the highlighted lines alone
    shape_before: str  # "(b, T, d_out) = (2, 6, 2)", or "" for the first step
    shape_after: str
    sentences: tuple[str, ...]
    panels: tuple[Panel, ...]  # in reading order: what goes in (before) above what comes out (after)
    main_index: int = 0  # the step's main figure, its result: all that presenter mode shows

    @property
    def main(self) -> Panel:
        return self.panels[self.main_index]


# Where a step's result sits among its panels (default: the first); presenter mode shows only it.
MAIN_PANEL = {"view": -1, "transpose": 1, "mask": -1, "softmax": 1, "dropout": -1, "context": -1, "out_proj": -1}


def shape_line(trace: Trace, step: str, axes: str) -> str:
    return f"{axes} = {shape_text(trace.info[step].shape)}"


@dataclass(frozen=True)
class _StepDrawing:
    """What every panel of a step shares: the trace, the batch element drawn and how wide to draw it."""

    trace: Trace
    labels: list[str]
    b: int
    presenter: bool
    dropout_active: bool
    train: bool

    @property
    def where(self) -> str:
        return f"batch element {self.b}"

    @property
    def width_px(self) -> int:
        return figures.FULL_FIGURE_PX if self.presenter else figures.NARROW_FIGURE_PX  # the page's right column

    @property
    def sizes(self) -> tuple[int, int, int]:
        """(h, T, head_dim), read from the trace."""
        return tuple(self.trace.info["queries_heads"].shape[1:])

    def heads_panel(self, name: str, axes: str, kind: str, title: str, cols=None, col_title="key", note="") -> Panel:
        """One heatmap per head of ``name`` (b, h, …) at this batch element."""
        labels = self.labels
        return Panel(
            f"step_{name}",
            title,
            caption(self.trace, name, axes, note or self.where),
            figures.heads_heatmap(
                self.trace.numpy(name)[self.b],
                labels,
                labels if cols is None else cols,
                title=f"{name} · {self.where}",
                kind=kind,
                head_names=head_names(self.sizes[0]),
                presenter=self.presenter,
                col_title=col_title,
                width_px=self.width_px,
            ),
        )

    def matrix_panel(self, name: str, axes: str, title: str, groups: int | None = None, note="") -> Panel:
        """One matrix (b, T, features) at this batch element, columns optionally banded in ``groups``."""
        values = self.trace.numpy(name)[self.b]
        return Panel(
            f"step_{name}",
            title,
            caption(self.trace, name, axes, note or self.where),
            figures.matrix_heatmap(
                values,
                self.labels,
                index_labels(values.shape[-1]),
                title=f"{name} · {self.where}",
                column_groups=groups,
                presenter=self.presenter,
                width_px=self.width_px,
            ),
        )

    def reshape_panel(self, name: str, axes: str, stage: str, values_from: str, title: str) -> Panel:
        """The cells of ``values_from`` laid out as ``stage`` (flat, view, transpose) of a reshape."""
        h, T, head_dim = self.sizes
        return Panel(
            f"step_{name}_{stage}",
            title,
            caption(self.trace, name, axes, self.where),
            figures.reshape_figure(
                T,
                h,
                head_dim,
                token_labels=self.labels,
                stage=stage,
                values=self.trace.numpy(values_from)[self.b],
                title=f"{name} {axes}",
                presenter=self.presenter,
                width_px=self.width_px,
            ),
        )


def _x_panels(d: _StepDrawing) -> list[Panel]:
    x = d.trace.numpy("x")[d.b]
    return [
        Panel(
            "step_x",
            "x: one row per token",
            caption(d.trace, "x", "(b, T, d_in)", d.where),
            figures.matrix_heatmap(
                x,
                d.labels,
                index_labels(x.shape[-1]),
                title=f"x · {d.where}",
                presenter=d.presenter,
                col_title="embedding dim",
                width_px=d.width_px,
            ),
        )
    ]


def _projection_panels(d: _StepDrawing) -> list[Panel]:
    h, _, head_dim = d.sizes
    qkv = np.stack([d.trace.numpy(name)[d.b] for name in ("queries", "keys", "values")])  # (3, T, d_out)
    return [
        Panel(
            "step_qkv",
            "Q, K and V: one row per token, d_out columns",
            caption(d.trace, "queries", "(b, T, d_out)", f"{d.where} · keys and values have the same shape"),
            figures.heads_heatmap(
                qkv,
                d.labels,
                index_labels(h * head_dim),
                title=f"queries, keys, values · {d.where}",
                kind="values",
                head_names=["queries", "keys", "values"],
                presenter=d.presenter,
                row_title="token",
                col_title="feature",
                width_px=d.width_px,
            ),
        ),
        d.matrix_panel("queries", "(b, T, d_out)", "queries, columns banded by the head they will go to", h),
    ]


def _view_panels(d: _StepDrawing) -> list[Panel]:
    return [
        d.reshape_panel("queries", "(b, T, d_out)", "flat", "queries", "Before view"),
        d.reshape_panel("queries_split", "(b, T, h, head_dim)", "view", "queries", "After view"),
    ]


def _transpose_panels(d: _StepDrawing) -> list[Panel]:
    dims = index_labels(d.sizes[2])
    return [
        d.reshape_panel("queries_split", "(b, T, h, head_dim)", "view", "queries", "Before transpose"),
        d.reshape_panel("queries_heads", "(b, h, T, head_dim)", "transpose", "queries", "After transpose"),
        d.heads_panel("queries_heads", "(b, h, T, head_dim)", "values", "Each head's queries, on its own", dims, "dim"),
    ]


def _scores_panels(d: _StepDrawing) -> list[Panel]:
    return [d.heads_panel("attn_scores", "(b, h, T, T)", "scores", "Scores Q Kᵀ, per head")]


def _mask_panels(d: _StepDrawing) -> list[Panel]:
    note = "the book's buffer sliced to T tokens and inverted: the book's `mask_bool` is True = blocked"
    return [
        Panel(
            "step_mask",
            "The mask as used (True = may attend)",
            caption(d.trace, "mask", "(T, T)", note),
            figures.heads_heatmap(
                d.trace.numpy("mask")[None],
                d.labels,
                d.labels,
                title="mask[:T, :T]",
                kind="mask",
                head_names=["may attend"],
                presenter=d.presenter,
                width_px=d.width_px,
            ),
        ),
        d.heads_panel("masked_scores", "(b, h, T, T)", "scores", "Masked scores: −∞ on future keys"),
    ]


def _softmax_panels(d: _StepDrawing) -> list[Panel]:
    return [
        d.heads_panel("scaled_scores", "(b, h, T, T)", "scores", "Scaled scores (masked / √head_dim)"),
        d.heads_panel(
            "attn_weights",
            "(b, h, T, T)",
            "weights",
            "Attention weights, per head",
            note=f"{d.where} · each row sums to 1",
        ),
    ]


def _dropout_panels(d: _StepDrawing) -> list[Panel]:
    idle = "train mode with p = 0: unchanged" if d.train else "eval mode: unchanged"
    note = f"{d.where} · " + ("survivors scaled by 1/(1−p)" if d.dropout_active else idle)
    after = d.heads_panel("attn_weights_dropped", "(b, h, T, T)", "weights", "Weights after dropout", note=note)
    if not d.dropout_active:
        return [after]
    keep = d.trace.numpy("dropout_keep")[d.b].astype(np.float32)  # (h, T, T)
    keep[:, ~d.trace.numpy("mask").astype(bool)] = -np.inf  # causally masked: neither kept nor dropped
    return [
        d.heads_panel("attn_weights", "(b, h, T, T)", "weights", "Weights before dropout"),
        Panel(
            "step_dropout_keep",
            "Where dropout kept the weight",
            caption(d.trace, "dropout_keep", "(b, h, T, T)", f"{d.where} · 1 = kept, 0 = dropped"),
            keep_mask_figure(keep, d.labels, d.presenter, d.width_px),
        ),
        after,
    ]


def _context_panels(d: _StepDrawing) -> list[Panel]:
    dims = index_labels(d.sizes[2])
    return [
        d.heads_panel("values_heads", "(b, h, T, head_dim)", "values", "The values being averaged", dims, "dim"),
        d.heads_panel("context_heads", "(b, h, T, head_dim)", "values", "Context per head", dims, "dim"),
    ]


def _transpose_back_panels(d: _StepDrawing) -> list[Panel]:
    return [d.reshape_panel("context_transposed", "(b, T, h, head_dim)", "view", "context", "After the transpose back")]


def _concatenate_panels(d: _StepDrawing) -> list[Panel]:
    return [d.matrix_panel("context", "(b, T, d_out)", "Heads side by side", d.sizes[0])]


def _out_proj_panels(d: _StepDrawing) -> list[Panel]:
    return [
        d.matrix_panel("context", "(b, T, d_out)", "Its input: the concatenated heads", d.sizes[0]),
        d.matrix_panel("output", "(b, T, d_out)", "The output"),
    ]


STEP_PANELS = {  # each step's figures, by step key
    "x": _x_panels,
    "projections": _projection_panels,
    "view": _view_panels,
    "transpose": _transpose_panels,
    "scores": _scores_panels,
    "mask": _mask_panels,
    "softmax": _softmax_panels,
    "dropout": _dropout_panels,
    "context": _context_panels,
    "transpose_back": _transpose_back_panels,
    "concatenate": _concatenate_panels,
    "out_proj": _out_proj_panels,
}


def _step_panels(
    step: Step, trace: Trace, labels: list[str], b: int, presenter: bool, dropout_active: bool, train: bool = False
) -> list[Panel]:
    """The step's figures, main one first. Every number comes from the trace."""
    if step.key not in STEP_PANELS:
        raise ValueError(f"unknown step {step.key!r}")
    return STEP_PANELS[step.key](_StepDrawing(trace, labels, b, presenter, dropout_active, train))


def build_step_view(
    trace: Trace,
    labels: list[str],
    number: int,
    *,
    batch_index: int,
    presenter: bool,
    dropout_active: bool,
    train: bool = False,
    scale_demo: ScaleDemo | None = None,
) -> StepView:
    """Step ``number`` (1-based) of ``STEPS`` for one traced forward pass; the softmax step draws ``scale_demo``
    (``mha_core.runs.teaching.scale_demo``) below its own figures when given."""
    if not 1 <= number <= STEP_COUNT:
        raise ValueError(f"step must be in 1–{STEP_COUNT}, got {number}")
    step = STEPS[number - 1]
    sentences = step.sentences
    if step.key == "dropout":
        if dropout_active:
            sentences = sentences[:1] + ("Train mode is on: look at the zeros and the values above 1.",) + sentences[2:]
        elif train:
            sentences = (
                sentences[:1]
                + ("Train mode is on, but p = 0: nothing is dropped, the weights pass through unchanged.",)
                + sentences[2:]
            )
    head_dim = trace.info["queries_heads"].shape[-1]
    if step.key == "softmax" and head_dim == 1:
        sentences = sentences + (
            "Here head_dim = 1, so √head_dim = 1 and the division changes nothing: try head_dim 16 to see it matter.",
        )
    if step.key == "scores":
        sentences = sentences + scores_notes(trace, labels, batch_index)
    panels = _step_panels(step, trace, labels, batch_index, presenter, dropout_active, train)
    if step.key == "softmax" and scale_demo is not None:
        panels += scale_panels(scale_demo, presenter)
    return StepView(
        number=number,
        count=STEP_COUNT,
        title=step.title,
        lines=step.lines,
        line_text=line_ranges(step.lines),
        listing=marked_listing(step.lines),
        code=code_of(step.lines),
        shape_before=shape_line(trace, *step.before) if step.before else "",
        shape_after=shape_line(trace, *step.after),
        sentences=sentences,
        panels=tuple(panels),
        main_index=MAIN_PANEL.get(step.key, 0),
    )
