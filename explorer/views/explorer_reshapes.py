"""The explorer's "reshapes" section: Q, K, V banded by head, the view and transpose, the context back, out_proj.

No streamlit. Every number comes from the module's trace (``mha_core.attention.modules.Trace``); captions give the
tensor's shape and its line of Listing 3.5.
"""

from __future__ import annotations

import numpy as np

from mha_core.attention.listing import init_line, listing_line
from mha_core.attention.modules import Trace

from . import figures
from .figures.panel import Panel, caption, head_names


def _projection_panels(trace: Trace, labels: list[str], b: int, presenter: bool) -> list[Panel]:
    """Q, K and V of one batch element, their d_out columns banded by the head each goes to."""
    h, _, head_dim = trace.info["queries_heads"].shape[1:]
    features = [str(c) for c in range(h * head_dim)]
    return [
        Panel(
            step,
            f"{letter} = W_{step[:-1] if step != 'queries' else 'query'}(x), columns banded by head",
            caption(trace, step, "(b, T, d_out)", f"batch element {b}"),
            figures.matrix_heatmap(
                trace.numpy(step)[b],
                labels,
                features,
                title=f"{step} ({letter}) · batch {b}",
                column_groups=h,
                presenter=presenter,
            ),
        )
        for step, letter in (("queries", "Q"), ("keys", "K"), ("values", "V"))
    ]


def _query_reshape_panels(trace: Trace, labels: list[str], b: int, presenter: bool) -> list[Panel]:
    """The queries flat, after view and after transpose: which numbers move where."""
    h, T, head_dim = trace.info["queries_heads"].shape[1:]
    queries = trace.numpy("queries")[b]  # (T, d_out)
    return [
        Panel(
            f"reshape_{stage}",
            f"Q {stage}: which numbers move where",
            caption(trace, step, axes, f"batch element {b}"),
            figures.reshape_figure(
                T,
                h,
                head_dim,
                token_labels=labels,
                stage=stage,
                values=queries,
                title=f"{step} {axes}",
                presenter=presenter,
            ),
        )
        for stage, step, axes in (
            ("flat", "queries", "(b, T, d_out)"),
            ("view", "queries_split", "(b, T, h, head_dim)"),
            ("transpose", "queries_heads", "(b, h, T, head_dim)"),
        )
    ]


def _context_panels(trace: Trace, labels: list[str], b: int, presenter: bool) -> list[Panel]:
    """The context per head, transposed back, then concatenated: the way back to (b, T, d_out)."""
    h, T, head_dim = trace.info["queries_heads"].shape[1:]
    context = trace.numpy("context")[b]  # (T, d_out)
    per_head = Panel(
        "context_heads",
        "Per-head context: weights @ values",
        caption(trace, "context_heads", "(b, h, T, head_dim)", f"batch element {b}"),
        figures.heads_heatmap(
            trace.numpy("context_heads")[b],
            labels,
            [str(d) for d in range(head_dim)],
            title=f"context per head · batch {b}",
            kind="values",
            head_names=head_names(h),
            presenter=presenter,
            col_title="dim",
        ),
    )
    transposed = Panel(
        "context_transposed",
        "Transpose back: tokens in front of heads",
        caption(trace, "context_transposed", "(b, T, h, head_dim)", "the same numbers, heads now inside each row"),
        figures.reshape_figure(
            T,
            h,
            head_dim,
            token_labels=labels,
            stage="view",
            values=context,
            title="context_transposed (b, T, h, head_dim)",
            presenter=presenter,
        ),
    )
    concatenated = Panel(
        "context",
        "Heads concatenated (before out_proj)",
        caption(trace, "context", "(b, T, d_out)", "contiguous().view joins the heads side by side"),
        figures.matrix_heatmap(
            context,
            labels,
            [str(c) for c in range(h * head_dim)],
            title=f"context · batch {b}",
            column_groups=h,
            presenter=presenter,
        ),
    )
    return [per_head, transposed, concatenated]


def _out_proj_panel(out_proj_weight: np.ndarray, features: list[str], presenter: bool) -> Panel:
    """out_proj's (d_out, d_out) weight, rows the output features."""
    d_out = len(features)
    return Panel(
        "out_proj",
        "out_proj weights",
        f"`out_proj.weight` · shape (d_out, d_out) = ({d_out}, {d_out}) · Listing 3.5, line "
        f"{init_line('out_proj')[0]}: `{init_line('out_proj')[1]}` (applied on line {listing_line('output')[0]}) "
        "· output = context @ Wᵀ + bias",
        figures.matrix_heatmap(
            out_proj_weight,
            features,
            features,
            title="out_proj.weight",
            presenter=presenter,
            row_title="output feature",
            col_title="context feature",
        ),
    )


def reshape_panels(
    trace: Trace, labels: list[str], *, batch_index: int, presenter: bool, out_proj_weight: np.ndarray
) -> list[Panel]:
    """Q, K, V banded by head, the view and transpose, the context back, out_proj and the output."""
    b = batch_index
    h, _, head_dim = trace.info["queries_heads"].shape[1:]
    features = [str(c) for c in range(h * head_dim)]  # d_out
    return [
        *_projection_panels(trace, labels, b, presenter),
        *_query_reshape_panels(trace, labels, b, presenter),
        *_context_panels(trace, labels, b, presenter),
        _out_proj_panel(out_proj_weight, features, presenter),
        Panel(
            "output",
            "Final output",
            caption(trace, "output", "(b, T, d_out)", f"batch element {b}"),
            figures.matrix_heatmap(
                trace.numpy("output")[b], labels, features, title=f"output · batch {b}", presenter=presenter
            ),
        ),
    ]
