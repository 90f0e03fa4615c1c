"""The at-a-glance head view (after BertViz's): tokens on two sides, a line from each query to each key it attends
to, its strength the weight, one colour per head.

Lines are grouped by head and by a few weight bands, so a figure has at most h × len(BANDS) line traces. Beyond
``WINDOW_TOKENS`` tokens (``PRESENTER_WINDOW`` in presenter mode) a window of that many is drawn, around the followed
token: every label and every line inside it, so 256 tokens read like 32 instead of a hairball pressed into a strip.
Weights come from the trace. No streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from mha_core.runs.forward import ExplorerRun

from . import figures
from .figures.lines import DASHES
from .figures.panel import Panel

# (lowest weight, opacity, line width): a weight falls in the last band whose lowest weight it reaches
BANDS = ((0.02, 0.15, 1.0), (0.1, 0.3, 1.5), (0.25, 0.5, 2.5), (0.5, 0.75, 3.5), (0.75, 1.0, 5.0))
WINDOW_TOKENS = 32  # tokens drawn at most: a row of 26 px each, labelled, in a figure under 1,000 px
PRESENTER_WINDOW = 10  # a 1280 × 720 stage holds 10 rows of 19 px labels under the title and a 16-head legend
OTHERS_TOP = 3  # with a token followed, each other query's heaviest keys per head (all of them: a grey hairball)
ROW_PX = 26  # a token's row in normal mode
LEFT, RIGHT = 0.0, 1.0


def token_window(num_tokens: int, focus: int | None, presenter: bool) -> range:
    """The tokens drawn: all of them up to the window's size; beyond, a window that holds the followed token three
    quarters of the way down (a causal query's keys come before it), or the first tokens when none is followed."""
    size = PRESENTER_WINDOW if presenter else WINDOW_TOKENS
    if num_tokens <= size:
        return range(num_tokens)
    start = 0 if focus is None else min(max(0, focus - (3 * size) // 4), num_tokens - size)
    return range(start, start + size)


def kept_lines(weights: np.ndarray, focus: int | None = None) -> np.ndarray:
    """(h, n, n) bool: the (head, query, key) lines drawn, weights of at least the first band; with a ``focus`` row,
    the other rows keep their OTHERS_TOP heaviest keys per head."""
    keep = weights >= BANDS[0][0]
    if focus is not None and weights.shape[-1] > OTHERS_TOP:
        cut = -np.sort(-weights, axis=-1)[..., OTHERS_TOP - 1 : OTHERS_TOP]  # (h, n, 1): each row's 3rd largest
        others = weights >= cut
        others[:, focus] = True  # the followed query keeps every line
        keep &= others
    return keep


def window_text(window: range, num_tokens: int, labels: list[str], focus: int | None) -> str:
    """Which tokens are drawn, e.g. "tokens 40–71 of 256, around 't64'" (empty when all are)."""
    if len(window) == num_tokens:
        return ""
    around = f", around {labels[focus]!r}" if focus is not None else ""
    return f"tokens {window.start}–{window.stop - 1} of {num_tokens}{around}"


def head_dash(head: int) -> str:
    """Each head's dash pattern beside its colour: heads drawn in one panel are told apart without colour too."""
    return DASHES[head % len(DASHES)]


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
                "line": {"color": color, "width": width, "dash": head_dash(head)},
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
        "line": {"color": color, "width": 3, "dash": head_dash(head)},
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
        "line": {"color": color, "width": 4, "dash": head_dash(head)},
    }


def _token_traces(rows: np.ndarray, labels: list[str], window: range, text_px: int) -> list:
    """The window's queries and keys, labelled (with their positions when a window is cut out); a query's hover
    names each head's strongest key in the whole row. ``rows``: (h, n, T), the window's queries' weights."""
    h, n, _ = rows.shape
    escaped = [figures.escape_label(label) for label in labels]
    cut = len(window) < len(labels)
    shown = [f"{escaped[p]} ({p})" if cut else escaped[p] for p in window]
    hover = []
    for i, p in enumerate(window):
        best = [
            f"head {k}: {escaped[j]} ({j}) {rows[k, i, j]:.2f}" for k in range(h) for j in [int(rows[k, i].argmax())]
        ]
        hover.append(f"<b>{escaped[p]}</b> ({p}) attends most to<br>" + "<br>".join(best[:16]))
    return [
        {
            "type": "scatter",
            "mode": "markers+text",
            "x": [x] * n,
            "y": list(range(n)),
            "text": shown,
            "textposition": position,
            "textfont": {"size": text_px},
            "name": name,
            "showlegend": False,
            "marker": {"size": 7, "color": "#888888"},  # mid grey: reads on a light and a dark page
            "hovertext": hover if x == LEFT else shown,
            "hoverinfo": "text",
        }
        for x, position, name in ((LEFT, "middle left", "queries"), (RIGHT, "middle right", "keys"))
    ]


def _line_traces(weights: np.ndarray, focus: int | None) -> list:
    """Every head's lines in the window (weights (h, n, n)); ``focus``, a row of the window, drawn strong."""
    h = weights.shape[0]
    keep = kept_lines(weights, focus)
    lows = np.array([band[0] for band in BANDS])
    band = np.searchsorted(lows, weights, side="right") - 1  # (h, n, n), -1 below the first band
    spread = [0.3 * (k - (h - 1) / 2) / max(h, 1) for k in range(h)]  # within ±0.15 of the token's row
    data = []
    for k, color in enumerate(figures.head_colors(h)):
        lines = keep[k].copy()  # (n, n)
        if focus is not None:
            lines[focus] = False  # drawn below, at full strength
        data += _band_line_traces(lines, band[k], k, color, spread[k], faint=focus is not None)
        if focus is not None:
            data.append(_focus_line_trace(np.nonzero(keep[k, focus])[0], focus, k, color, spread[k]))
        data.append(_legend_trace(k, color))
    return data


def _legend(h: int, presenter: bool) -> tuple[dict, int]:
    """The legend, and the entries the figure's height must hold beside the plot: a column right of the plot, or in
    presenter mode beyond six heads a few rows under it (a stage 490 px tall holds seven entries at 24 px type)."""
    if presenter and h > 6:
        return {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.02, "yanchor": "top"}, 0
    return {"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"}, h  # beside the plot: clear of the subtitle


def head_view_figure(
    weights: np.ndarray,
    labels: list[str],
    *,
    focus: int | None = None,
    presenter: bool = False,
    title: str = "attention, all heads",
    note: str = "",
) -> go.Figure:
    """weights (h, T, T) → the two-column line figure of ``token_window``'s tokens; ``focus`` draws one query's lines
    strong, the rest faint. The rows span the plot's height (fixed range), so a taller frame spreads them."""
    h, t, _ = weights.shape
    window = token_window(t, focus, presenter)
    inside = weights[:, window.start : window.stop, window.start : window.stop]  # (h, n, n)
    local = focus - window.start if focus is not None else None
    data = _line_traces(inside, local)
    text_px = round(figures.BASE_FONT_SIZE * (0.8 * figures.PRESENTER_SCALE if presenter else 1.0))  # 19 px
    data += _token_traces(weights[:, window.start : window.stop, :], labels, window, text_px)  # (h, n, T) rows
    n = len(window)
    legend, entries = _legend(h, presenter)
    layout = {
        "xaxis": {"visible": False, "range": [-0.6, 1.6], "fixedrange": True},
        "yaxis": {"visible": False, "range": [n - 0.5, -0.5], "fixedrange": True},  # token 0 at the top
        "legend": legend,
        "hovermode": "closest",
    }
    where = window_text(window, t, labels, focus)
    subtitle = " · ".join(part for part in (note, where, "line strength = attention weight") if part)
    row_px = ROW_PX * (figures.PRESENTER_SCALE if presenter else 1.0)
    figure = figures.finish_figure(
        {"data": data, "layout": layout},
        title,
        presenter,
        subtitle=subtitle,
        plot_px=max(200, round(row_px * n)),
        above_plot_px=30,
        below_px=10 if entries else 20 + 40 * -(-h // 9),  # rows of nine entries (ten fit 1,214 px)
        legend_entries=entries,
    )
    figure.layout.meta = dict(figure.layout.meta or {}) | {"description": head_view_words(inside, labels, window)}
    return figure


def head_view_words(inside: np.ndarray, labels: list[str], window: range) -> str:
    """The figure for a screen reader (figures.describe reads it): what the lines are, and each head's strongest
    line. ``inside``: (h, n, n) the drawn window's weights."""
    h = inside.shape[0]
    words = [
        f"Lines from each query (left) to the keys it attends to (right) for {h} heads, tokens {window.start} to "
        f"{window.stop - 1}; a thicker, darker line is a larger weight; each head has its own colour and dash."
    ]
    for k in range(min(h, 16)):
        i, j = np.unravel_index(int(np.argmax(inside[k])), inside[k].shape)
        query, key = labels[window.start + int(i)], labels[window.start + int(j)]
        words.append(f"Head {k}'s strongest line: {query} to {key}, weight {inside[k, i, j]:.2f}.")
    return " ".join(words)


@dataclass(frozen=True)
class HeadView:
    panel: Panel
    lines: int  # segments drawn
    window: range  # the tokens drawn


def build_head_view(run: ExplorerRun, *, batch_index: int, focus: int | None, presenter: bool) -> HeadView:
    """The head view of one batch element's weights (before dropout), from the trace."""
    weights = run.trace.numpy("attn_weights")[batch_index]  # (h, T, T)
    h, t, _ = weights.shape
    window = token_window(t, focus, presenter)
    local = focus - window.start if focus is not None else None
    lines = int(kept_lines(weights[:, window.start : window.stop, window.start : window.stop], local).sum())
    where = f"batch element {batch_index}"
    focus_text = f" · query “{figures.escape_markdown(run.labels[focus])}” highlighted" if focus is not None else ""
    marked = [figures.escape_markdown(label) for label in run.labels] if focus is not None else run.labels
    shown = window_text(window, t, marked, focus)  # for the caption: markdown
    caption = (
        f"`attn_weights` · shape (b, h, T, T) = ({run.trace.info['attn_weights'].shape[0]}, {h}, {t}, {t}) · "
        f"{where} · "
        + (f"{shown} (the other keys' lines are not drawn) · " if shown else "")
        + f"left: queries, right: keys · weights below {BANDS[0][0]} are not drawn"
        + (f"; the other queries' top {OTHERS_TOP} keys per head" if focus is not None else "")
        + focus_text
        + " · click a head in the legend to hide it, hover a query for its strongest keys"
    )
    title = f"Head view · {h} heads" + ("" if presenter else f" · {where}")  # presenter: one line of title
    figure = head_view_figure(
        weights, run.labels, focus=focus, presenter=presenter, title=title, note=where if presenter else ""
    )
    return HeadView(Panel("head_view", "At a glance: every head's attention as lines", caption, figure), lines, window)
