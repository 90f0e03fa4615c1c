"""The reshape diagram: where each number of a (T, d_out) matrix goes when it is split into heads."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import plotly.graph_objects as go

from .heatmap_layout import DIGIT_WIDTH, FULL_FIGURE_PX
from .style import cell_font_size, finish_figure, font_size, head_colors, shorten, text_color_on, tick_labels, tint
from .text_width import text_px

RESHAPE_STAGES = ("flat", "view", "transpose")
_RESHAPE_MAX_TOKENS = 8
_RESHAPE_MAX_HEADS = 4
_RESHAPE_MAX_DIMS = 4
_RESHAPE_MIN_HEADS = 2
_RESHAPE_MIN_DIMS = 2
_RESHAPE_TEXT_LIMIT = 200


def _columns(stage: str, hs: int, ds: int) -> int:
    return ds if stage == "transpose" else hs * (ds + (1 if stage == "view" else 0)) - (1 if stage == "view" else 0)


def _placement(stage: str, Ts: int, hs: int, ds: int) -> tuple[int, int, Callable, list[tuple[int, int, int, int]]]:
    """Grid size, where cell (token t, head k, dim d) is drawn, and the header rows "head k" (row, cols, head)."""
    if stage == "transpose":

        def place(t: int, k: int, d: int) -> tuple[int, int]:
            return k * (Ts + 1) + 1 + t, d

        return hs * (Ts + 1), ds, place, [(k * (Ts + 1), 0, ds - 1, k) for k in range(hs)]
    gap = 1 if stage == "view" else 0

    def place(t: int, k: int, d: int) -> tuple[int, int]:  # noqa: F811 (the other stage's placement)
        return 1 + t, k * (ds + gap) + d

    headers = [(0, k * (ds + gap), k * (ds + gap) + ds - 1, k) for k in range(hs)]
    return Ts + 1, _columns(stage, hs, ds), place, headers


def _cell_width(values: np.ndarray | None, d_out: int, presenter: bool) -> float:
    """A cell wide enough for its widest text: a value to 2 decimals ("-0.57", "19.60") or a column index."""
    if values is not None and values.size:
        finite = values[np.isfinite(values)]
        widest = max((f"{float(v):.2f}" for v in (finite.min(), finite.max())), key=len) if finite.size else "nan"
    else:
        widest = str(d_out - 1)
    return max(len(widest), 3) * DIGIT_WIDTH * cell_font_size(presenter) + 10


def _drawn(stage: str, shape: tuple[int, int, int], values, presenter: bool, width_px: int):
    """(cell width, heads drawn, dims drawn, whether values are printed): values at the page's body type when the
    fewest columns drawn hold them, else each cell's flat column, which is narrower."""
    Ts, h, hd = shape
    cell_w = _cell_width(values, h * hd, presenter)
    hs, ds = _fit(stage, h, hd, cell_w, width_px)
    fits = _columns(stage, hs, ds) * cell_w <= width_px - 120
    if values is not None and not fits:
        cell_w = _cell_width(None, h * hd, presenter)
        hs, ds = _fit(stage, h, hd, cell_w, width_px)
    return cell_w, hs, ds, values is not None and fits and Ts * hs * ds <= _RESHAPE_TEXT_LIMIT


def _fit(stage: str, h: int, hd: int, cell_w: float, width_px: int) -> tuple[int, int]:
    """Heads and dims drawn: at most 4 of each, fewer (down to 2) until the diagram fits width_px."""
    hs, ds = min(h, _RESHAPE_MAX_HEADS), min(hd, _RESHAPE_MAX_DIMS)
    room = width_px - 120  # token labels on the left, margins
    while _columns(stage, hs, ds) * cell_w > room and (hs > _RESHAPE_MIN_HEADS or ds > _RESHAPE_MIN_DIMS):
        if hs > _RESHAPE_MIN_HEADS:
            hs -= 1
        else:
            ds -= 1
    return hs, ds


def _headers(headers, colors: list[str], presenter: bool, cell_w: float) -> tuple[list[dict], list[dict]]:
    """A coloured bar over each head's block, named "head k" (or "k" when the block is too narrow for it)."""
    shapes, annotations = [], []
    font = font_size(presenter, 0.85)
    for row, first, last, k in headers:
        shapes.append(
            {
                "fillcolor": colors[k],
                "line": {"width": 0},
                "type": "rect",
                "x0": first - 0.5,
                "x1": last + 0.5,
                "y0": row - 0.45,
                "y1": row + 0.45,
            }
        )
        fits = text_px(f"head {k}", font) + 6 <= (last - first + 1) * cell_w
        annotations.append(
            {
                "font": {"color": text_color_on(colors[k]), "size": font},
                "showarrow": False,
                "text": f"head {k}" if fits else str(k),
                "x": (first + last) / 2,
                "y": row,
            }
        )
    return shapes, annotations


def _cells(stage: str, drawn: tuple[int, int, int, int], tokens: list[str], values, place, grid):
    """Each drawn cell's head (its colour), text, hover, and the axes' labels. values None: flat column indices."""
    Ts, hs, ds, hd = drawn
    z = np.full(grid, np.nan)
    text = np.full(grid, "", dtype=object)
    hover = np.full(grid, "", dtype=object)
    y_ticks: dict[int, str] = {}
    x_ticks: dict[int, str] = {}
    for t in range(Ts):
        for k in range(hs):
            for d in range(ds):
                c = k * hd + d  # column in the flat (T, d_out) matrix
                row, col = place(t, k, d)
                z[row, col] = k
                text[row, col] = f"{values[t, c]:.2f}" if values is not None else str(c)
                hover[row, col] = f"token {t} “{tokens[t]}”, flat column {c}<br>→ head {k}, dim {d}"
                y_ticks[row] = shorten(tokens[t])
                x_ticks[col] = str(c) if stage == "flat" else str(d)
    return z, text, hover, x_ticks, y_ticks


def _cells_trace(z, text, hover, hs: int, colors: list[str], presenter: bool, show_text: bool) -> dict:
    """One heatmap of the drawn cells, each tinted by its head (band k of a stepped colour scale)."""
    colorscale = []
    for k, color in enumerate(colors):
        colorscale += [[k / hs, tint(color, 0.45)], [(k + 1) / hs, tint(color, 0.45)]]
    return {
        "type": "heatmap",
        "z": z,
        "text": text,
        "customdata": hover,
        "texttemplate": "%{text}" if show_text else "",
        "textfont": {"size": cell_font_size(presenter), "color": "black"},  # on light tints in either theme
        "hovertemplate": "%{customdata}<extra></extra>",
        "hoverongaps": False,
        "colorscale": colorscale,
        "zmin": -0.5,  # head k fills [k - 0.5, k + 0.5]: band k of the colour scale
        "zmax": hs - 0.5,
        "showscale": False,
        "xgap": 2,
        "ygap": 2,
    }


def _diagram_layout(stage: str, grid: tuple[int, int], x_ticks: dict, y_ticks: dict, scaleratio: float) -> dict:
    """Axes of the diagram: row 0 on top, a cell cell_w wide and cell_h tall (scaleratio) whatever the page's width."""
    n_rows, n_cols = grid
    plain = {"type": "linear", "tickmode": "array", "showgrid": False, "zeroline": False, "constrain": "domain"}
    return {
        "xaxis": plain
        | {
            "title": {"text": "flat column" if stage == "flat" else "dim within head"},
            "range": [-0.5, n_cols - 0.5],
            "tickvals": sorted(x_ticks),
            "ticktext": [x_ticks[c] for c in sorted(x_ticks)],
            "tickangle": 0,
            "constraintoward": "left",
        },
        "yaxis": plain
        | {
            "range": [n_rows - 0.5, -0.5],  # row 0 at the top
            "tickvals": sorted(y_ticks),
            "ticktext": [y_ticks[r] for r in sorted(y_ticks)],
            "scaleanchor": "x",
            "scaleratio": scaleratio,
        },
    }


def reshape_figure(
    n_tokens: int,
    num_heads: int,
    head_dim: int,
    *,
    token_labels: Sequence[object] | None,
    stage: str,
    values: np.ndarray | None = None,
    title: str | None = None,
    presenter: bool = False,
    width_px: int = FULL_FIGURE_PX,
) -> go.Figure:
    """A diagram of the head split: where each number of a (T, d_out) matrix goes.

    stage "flat": (T, d_out), one row per token, columns tinted by the head they will belong to.
    stage "view": (T, h, head_dim), the same rows cut into h blocks of head_dim columns (no number moves).
    stage "transpose": (h, T, head_dim), h separate (T, head_dim) matrices stacked top to bottom, the way
    numpy prints a 3-D array.

    Each cell shows its value (``values``, (T, d_out), to 2 decimals) when at most 200 cells are drawn, and
    otherwise its column index in the flat matrix, so a student can follow column c into head c // head_dim.
    Cells are as wide as their widest text, so numbers never run together. At most 8 tokens, 4 heads and 4
    dimensions per head are drawn, fewer heads and dims when the figure (about width_px wide) would not hold
    them; the subtitle says when that cuts.
    """
    if stage not in RESHAPE_STAGES:
        raise ValueError(f"stage must be one of {RESHAPE_STAGES}, got {stage!r}")
    T, h, hd = n_tokens, num_heads, head_dim
    d_out = h * hd
    tokens = tick_labels(token_labels, T, "token")
    if values is not None:
        values = np.asarray(values)
        if values.shape != (T, d_out):
            raise ValueError(f"values must be (T, d_out) = ({T}, {d_out}), got {values.shape}")
    Ts = min(T, _RESHAPE_MAX_TOKENS)
    cell_w, hs, ds, show_values = _drawn(stage, (Ts, h, hd), values, presenter, width_px)
    n_rows, n_cols, place, headers = _placement(stage, Ts, hs, ds)

    z, text, hover, x_ticks, y_ticks = _cells(
        stage, (Ts, hs, ds, hd), tokens, values if show_values else None, place, (n_rows, n_cols)
    )

    colors = head_colors(hs)
    cells = _cells_trace(z, text, hover, hs, colors, presenter, values is None or show_values)
    shapes, annotations = _headers(headers, colors, presenter, cell_w)
    cell_h = round(1.9 * cell_font_size(presenter))
    layout = _diagram_layout(stage, (n_rows, n_cols), x_ticks, y_ticks, cell_h / cell_w) | {
        "shapes": shapes,
        "annotations": annotations,
    }
    return finish_figure(
        {"data": [cells], "layout": layout},
        title or _default_title(stage, T, h, hd),
        presenter,
        subtitle=_subtitle(stage, (Ts, T), (hs, h), (ds, hd)),
        plot_px=n_rows * cell_h,
        below_px=round(3.2 * font_size(presenter)),
    )


def _default_title(stage: str, T: int, h: int, hd: int) -> str:
    return {
        "flat": f"flat: (T, d_out) = ({T}, {h * hd})",
        "view": f"view: (T, h, head_dim) = ({T}, {h}, {hd})",
        "transpose": f"transpose: (h, T, head_dim) = ({h}, {T}, {hd})",
    }[stage]


def _subtitle(stage: str, tokens: tuple[int, int], heads: tuple[int, int], dims: tuple[int, int]) -> str:
    """What the stage shows, and what was cut to fit ("showing 8 of 1024 tokens, ...")."""
    T, h, hd = tokens[1], heads[1], dims[1]
    notes = {
        "flat": f"each token's {h * hd} numbers, tinted by the head they will go to",
        "view": f"the same numbers in the same order, each row cut into {h} blocks of {hd}",
        "transpose": f"each head now owns its own ({T}, {hd}) matrix",
    }
    sizes = ((*tokens, "tokens"), (*heads, "heads"), (*dims, "dims per head"))
    cut = [f"{shown} of {total} {what}" for shown, total, what in sizes if shown < total]
    return notes[stage] + (f" (showing {', '.join(cut)})" if cut else "")
