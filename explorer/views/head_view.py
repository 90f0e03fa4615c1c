"""The at-a-glance head view (after BertViz's): tokens on two sides, a line from each query to each key it attends
to, its strength the weight, one colour per head.

Lines are grouped by head and by a few weight bands, so a figure has at most h × len(BANDS) line traces whatever T
is; beyond ``ALL_LINES_TOKENS`` tokens only each query's ``top_k`` heaviest keys are drawn, so the payload stays
bounded (``MAX_LINES`` segments in all). Weights come from the trace. No streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from mha_core.runs import ExplorerRun

from . import figures
from .figures.panel import Panel

# (lowest weight, opacity, line width): a weight falls in the last band whose lowest weight it reaches
BANDS = ((0.02, 0.15, 1.0), (0.1, 0.3, 1.5), (0.25, 0.5, 2.5), (0.5, 0.75, 3.5), (0.75, 1.0, 5.0))
ALL_LINES_TOKENS = 32  # up to this many tokens every weight above the first band is drawn
MAX_LINES = 12_000  # segments in all heads together, beyond ALL_LINES_TOKENS
TEXT_TOKENS = 64  # token labels are written beside the markers up to this many tokens (hover beyond)
LEFT, RIGHT = 0.0, 1.0


def top_k(num_heads: int, num_tokens: int) -> int | None:
    """Keys kept per query and head: all of them (None) up to ALL_LINES_TOKENS, then what MAX_LINES allows."""
    if num_tokens <= ALL_LINES_TOKENS:
        return None
    return max(1, min(num_tokens, MAX_LINES // (num_heads * num_tokens)))


def kept_lines(weights: np.ndarray, k: int | None) -> np.ndarray:
    """(h, T, T) bool: the (head, query, key) lines drawn, weights of at least the first band (and in the top k)."""
    keep = weights >= BANDS[0][0]
    if k is not None and k < weights.shape[-1]:
        cut = -np.sort(-weights, axis=-1)[..., k - 1 : k]  # (h, T, 1): the k-th largest weight of each row
        keep &= weights >= cut
    return keep


def _segments(queries: np.ndarray, keys: np.ndarray, offset: float = 0.0) -> tuple[list, list]:
    """x and y of line segments query → key, separated by None (one trace draws them all); ``offset`` shifts a
    head's lines a little, so that heads drawing the same line stay side by side instead of on top."""
    xs, ys = [], []
    for i, j in zip(queries.tolist(), keys.tolist(), strict=True):
        xs += [LEFT, RIGHT, None]
        ys += [round(i + offset, 3), round(j + offset, 3), None]
    return xs, ys


def _band_line_traces(lines: np.ndarray, band: np.ndarray, head: int, color: str, offset: float, faint: bool) -> list:
    """One head's kept (T, T) lines, one trace per weight band; ``faint`` when a focused query is drawn over them."""
    traces = []
    for n, (_, opacity, width) in enumerate(BANDS):
        queries, keys = np.nonzero(lines & (band == n))
        if queries.size == 0:
            continue
        xs, ys = _segments(queries, keys, offset)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": xs,
                "y": ys,
                "name": f"head {head}",
                "legendgroup": f"head {head}",
                "showlegend": False,
                "hoverinfo": "skip",
                "line": {"color": color, "width": width},
                "opacity": opacity * (0.25 if faint else 1.0),
            }
        )
    return traces


def _focus_line_trace(keys: np.ndarray, focus: int, head: int, color: str, offset: float) -> dict:
    """The focused query's lines of one head, at full strength with markers."""
    xs, ys = _segments(np.full(keys.size, focus), keys, offset)
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "x": xs,
        "y": ys,
        "name": f"head {head}",
        "legendgroup": f"head {head}",
        "showlegend": False,
        "line": {"color": color, "width": 3},
        "marker": {"size": 6},
        "opacity": 0.9,
        "hoverinfo": "skip",
    }


def _legend_trace(head: int, color: str) -> dict:
    """The head's legend entry (click to hide a head): no points of its own."""
    return {
        "type": "scatter",
        "mode": "lines",
        "x": [None],
        "y": [None],
        "name": f"head {head}",
        "legendgroup": f"head {head}",
        "line": {"color": color, "width": 4},
    }


def _token_traces(weights: np.ndarray, labels: list[str], text: bool) -> list:
    """The queries' and keys' markers (labelled when ``text``); a query's hover names each head's strongest key."""
    h, t, _ = weights.shape
    escaped = [figures.escape_label(label) for label in labels]
    hover = []
    for i in range(t):
        best = [
            f"head {k}: {escaped[int(j)]} {weights[k, i, j]:.2f}"
            for k in range(h)
            for j in [int(np.argmax(weights[k, i]))]
        ]
        hover.append(f"<b>{escaped[i]}</b> ({i}) attends most to<br>" + "<br>".join(best[:16]))
    return [
        {
            "type": "scatter",
            "mode": "markers+text" if text else "markers",
            "x": [x] * t,
            "y": list(range(t)),
            "text": escaped if text else None,
            "textposition": position,
            "name": name,
            "showlegend": False,
            "marker": {"size": 7, "color": "#888888"},  # mid grey: reads on a light and a dark page
            "hovertext": hover if x == LEFT else escaped,
            "hoverinfo": "text",
        }
        for x, position, name in ((LEFT, "middle left", "queries"), (RIGHT, "middle right", "keys"))
    ]


def head_view_figure(
    weights: np.ndarray,
    labels: list[str],
    *,
    focus: int | None = None,
    presenter: bool = False,
    title: str = "attention, all heads",
) -> go.Figure:
    """weights (h, T, T) → the two-column line figure; ``focus`` draws one query's lines strong, the rest faint."""
    h, t, _ = weights.shape
    keep = kept_lines(weights, top_k(h, t))
    lows = np.array([band[0] for band in BANDS])
    band = np.searchsorted(lows, weights, side="right") - 1  # (h, T, T), -1 below the first band
    spread = [0.3 * (k - (h - 1) / 2) / max(h, 1) for k in range(h)]  # within ±0.15 of the token's row
    data = []
    for k, color in enumerate(figures.head_colors(h)):
        lines = keep[k].copy()  # (T, T)
        if focus is not None:
            lines[focus] = False  # drawn below, at full strength
        data += _band_line_traces(lines, band[k], k, color, spread[k], faint=focus is not None)
        if focus is not None:
            data.append(_focus_line_trace(np.nonzero(keep[k, focus])[0], focus, k, color, spread[k]))
        data.append(_legend_trace(k, color))
    text = t <= TEXT_TOKENS
    data += _token_traces(weights, labels, text)
    height = min(1600, max(320, 26 * t + 120)) if text else 900
    layout = {
        "xaxis": {"visible": False, "range": [-0.6, 1.6], "fixedrange": True},
        "yaxis": {"visible": False, "autorange": "reversed"},
        "legend": {"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},  # beside the plot: clear of the subtitle
        "hovermode": "closest",
    }
    k = top_k(h, t)
    subtitle = "line strength = attention weight" + (f" · each query's top {k} keys per head" if k else "")
    return figures.finish_figure(
        {"data": data, "layout": layout},
        title,
        presenter,
        subtitle=subtitle,
        height=height,
        above_plot_px=30,
        legend_entries=h,
    )


@dataclass(frozen=True)
class HeadView:
    panel: Panel
    lines: int  # segments drawn
    top_k: int | None


def build_head_view(run: ExplorerRun, *, batch_index: int, focus: int | None, presenter: bool) -> HeadView:
    """The head view of one batch element's weights (before dropout), from the trace."""
    weights = run.trace.numpy("attn_weights")[batch_index]  # (h, T, T)
    h, t, _ = weights.shape
    k = top_k(h, t)
    lines = int(kept_lines(weights, k).sum())
    where = f"batch element {batch_index}"
    focus_text = f" · query {run.labels[focus]!r} highlighted" if focus is not None else ""
    caption = (
        f"`attn_weights` · shape (b, h, T, T) = ({run.trace.info['attn_weights'].shape[0]}, {h}, {t}, {t}) · "
        f"{where} · left: queries, right: keys · weights below {BANDS[0][0]} are not drawn"
        + (f" · beyond {ALL_LINES_TOKENS} tokens only each query's top {k} keys per head" if k else "")
        + focus_text
        + " · click a head in the legend to hide it, hover a query for its strongest keys"
    )
    figure = head_view_figure(
        weights, run.labels, focus=focus, presenter=presenter, title=f"Head view · {h} heads · {where}"
    )
    return HeadView(Panel("head_view", "At a glance: every head's attention as lines", caption, figure), lines, k)
