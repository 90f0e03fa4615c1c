"""Step through: one step per screen, its shapes, lit listing lines and figures, from one traced forward pass.

Axis letters: b batch, h heads, T tokens, i query position, j key position, d head_dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.trace import Trace

from . import figures
from .knobs_that_teach import keep_mask_figure
from .panel import Panel, caption, head_names, index_labels, shape_text
from .step_through_steps import STEP_COUNT, STEPS, Step, code_of, marked_listing


@dataclass(frozen=True)
class StepView:
    number: int  # 1-based
    count: int
    title: str
    lines: tuple[int, ...]  # highlighted lines of Listing 3.5, 1-based
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
MAIN_PANEL = {"view": -1, "transpose": 1, "mask": -1, "softmax": -1, "dropout": -1, "context": -1, "out_proj": -1}


def shape_line(trace: Trace, step: str, axes: str) -> str:
    return f"{axes} = {shape_text(trace.info[step].shape)}"


def _step_panels(
    step: Step, trace: Trace, labels: list[str], b: int, presenter: bool, dropout_active: bool, train: bool = False
) -> list[Panel]:
    """The step's figures, main one first. Every number comes from the trace."""
    h, T, head_dim = trace.info["queries_heads"].shape[1:]
    d_out = h * head_dim
    where = f"batch element {b}"
    width_px = figures.FULL_FIGURE_PX if presenter else figures.NARROW_FIGURE_PX  # the page's right column

    def heads_panel(name: str, axes: str, kind: str, title: str, cols=None, col_title="key", note="", **kw):
        return Panel(
            f"step_{name}",
            title,
            caption(trace, name, axes, note or where),
            figures.heads_heatmap(
                trace.numpy(name)[b],
                labels,
                labels if cols is None else cols,
                title=f"{name} · {where}",
                kind=kind,
                head_names=head_names(h),
                presenter=presenter,
                col_title=col_title,
                width_px=width_px,
                **kw,
            ),
        )

    def matrix_panel(name: str, axes: str, title: str, groups: int | None = None, note=""):
        values = trace.numpy(name)[b]
        return Panel(
            f"step_{name}",
            title,
            caption(trace, name, axes, note or where),
            figures.matrix_heatmap(
                values,
                labels,
                index_labels(values.shape[-1]),
                title=f"{name} · {where}",
                column_groups=groups,
                presenter=presenter,
                width_px=width_px,
            ),
        )

    def reshape_panel(name: str, axes: str, stage: str, values_from: str, title: str):
        return Panel(
            f"step_{name}_{stage}",
            title,
            caption(trace, name, axes, where),
            figures.reshape_figure(
                T,
                h,
                head_dim,
                token_labels=labels,
                stage=stage,
                values=trace.numpy(values_from)[b],
                title=f"{name} {axes}",
                presenter=presenter,
                width_px=width_px,
            ),
        )

    key = step.key
    if key == "x":
        x = trace.numpy("x")[b]
        return [
            Panel(
                "step_x",
                "x: one row per token",
                caption(trace, "x", "(b, T, d_in)", where),
                figures.matrix_heatmap(
                    x,
                    labels,
                    index_labels(x.shape[-1]),
                    title=f"x · {where}",
                    presenter=presenter,
                    col_title="embedding dim",
                    width_px=width_px,
                ),
            )
        ]
    if key == "projections":
        qkv = np.stack([trace.numpy(name)[b] for name in ("queries", "keys", "values")])  # (3, T, d_out)
        return [
            Panel(
                "step_qkv",
                "Q, K and V: one row per token, d_out columns",
                caption(trace, "queries", "(b, T, d_out)", f"{where} · keys and values have the same shape"),
                figures.heads_heatmap(
                    qkv,
                    labels,
                    index_labels(d_out),
                    title=f"queries, keys, values · {where}",
                    kind="values",
                    head_names=["queries", "keys", "values"],
                    presenter=presenter,
                    row_title="token",
                    col_title="feature",
                    width_px=width_px,
                ),
            ),
            matrix_panel("queries", "(b, T, d_out)", "queries, columns banded by the head they will go to", h),
        ]
    if key == "view":
        return [
            reshape_panel("queries", "(b, T, d_out)", "flat", "queries", "Before view"),
            reshape_panel("queries_split", "(b, T, h, head_dim)", "view", "queries", "After view"),
        ]
    if key == "transpose":
        return [
            reshape_panel("queries_split", "(b, T, h, head_dim)", "view", "queries", "Before transpose"),
            reshape_panel("queries_heads", "(b, h, T, head_dim)", "transpose", "queries", "After transpose"),
            heads_panel(
                "queries_heads",
                "(b, h, T, head_dim)",
                "values",
                "Each head's queries, on its own",
                cols=index_labels(head_dim),
                col_title="dim",
            ),
        ]
    if key == "scores":
        return [heads_panel("attn_scores", "(b, h, T, T)", "scores", "Scores Q Kᵀ, per head")]
    if key == "mask":
        return [
            Panel(
                "step_mask",
                "The mask as used (True = may attend)",
                caption(
                    trace,
                    "mask",
                    "(T, T)",
                    "the book's buffer sliced to T tokens and inverted: the book's `mask_bool` is True = blocked",
                ),
                figures.heads_heatmap(
                    trace.numpy("mask")[None],
                    labels,
                    labels,
                    title="mask[:T, :T]",
                    kind="mask",
                    head_names=["may attend"],
                    presenter=presenter,
                    width_px=width_px,
                ),
            ),
            heads_panel("masked_scores", "(b, h, T, T)", "scores", "Masked scores: −∞ on future keys"),
        ]
    if key == "softmax":
        return [
            heads_panel("scaled_scores", "(b, h, T, T)", "scores", "Scaled scores (masked / √head_dim)"),
            heads_panel(
                "attn_weights",
                "(b, h, T, T)",
                "weights",
                "Attention weights, per head",
                note=f"{where} · each row sums to 1",
            ),
        ]
    if key == "dropout":
        idle = "train mode with p = 0: unchanged" if train else "eval mode: unchanged"
        note = f"{where} · " + ("survivors scaled by 1/(1−p)" if dropout_active else idle)
        after = heads_panel("attn_weights_dropped", "(b, h, T, T)", "weights", "Weights after dropout", note=note)
        if not dropout_active:
            return [after]
        keep = trace.numpy("dropout_keep")[b].astype(np.float32)  # (h, T, T)
        keep[:, ~trace.numpy("mask").astype(bool)] = -np.inf  # causally masked: neither kept nor dropped
        return [
            heads_panel("attn_weights", "(b, h, T, T)", "weights", "Weights before dropout"),
            Panel(
                "step_dropout_keep",
                "Where dropout kept the weight",
                caption(trace, "dropout_keep", "(b, h, T, T)", f"{where} · 1 = kept, 0 = dropped"),
                keep_mask_figure(keep, labels, presenter, width_px),
            ),
            after,
        ]
    if key == "context":
        return [
            heads_panel(
                "values_heads",
                "(b, h, T, head_dim)",
                "values",
                "The values being averaged",
                cols=index_labels(head_dim),
                col_title="dim",
            ),
            heads_panel(
                "context_heads",
                "(b, h, T, head_dim)",
                "values",
                "Context per head",
                cols=index_labels(head_dim),
                col_title="dim",
            ),
        ]
    if key == "transpose_back":
        return [
            reshape_panel("context_transposed", "(b, T, h, head_dim)", "view", "context", "After the transpose back")
        ]
    if key == "concatenate":
        return [matrix_panel("context", "(b, T, d_out)", "Heads side by side", h)]
    if key == "out_proj":
        return [
            matrix_panel("context", "(b, T, d_out)", "Its input: the concatenated heads", h),
            matrix_panel("output", "(b, T, d_out)", "The output"),
        ]
    raise ValueError(f"unknown step {key!r}")


def build_step_view(
    trace: Trace,
    labels: list[str],
    number: int,
    *,
    batch_index: int,
    presenter: bool,
    dropout_active: bool,
    train: bool = False,
) -> StepView:
    """Step ``number`` (1-based) of ``STEPS`` for one traced forward pass."""
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
    return StepView(
        number=number,
        count=STEP_COUNT,
        title=step.title,
        lines=step.lines,
        listing=marked_listing(step.lines),
        code=code_of(step.lines),
        shape_before=shape_line(trace, *step.before) if step.before else "",
        shape_after=shape_line(trace, *step.after),
        sentences=sentences,
        panels=tuple(_step_panels(step, trace, labels, batch_index, presenter, dropout_active, train)),
        main_index=MAIN_PANEL.get(step.key, 0),
    )
