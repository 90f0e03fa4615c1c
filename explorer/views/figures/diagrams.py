"""The reshape diagram: where each number of a (T, d_out) matrix goes when it is split into heads."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .style import PRESENTER_SCALE, _finish, _font, _labels, _text_color_on, _tint, head_colors

RESHAPE_STAGES = ("flat", "view", "transpose")
_RESHAPE_MAX_TOKENS = 8
_RESHAPE_MAX_HEADS = 4
_RESHAPE_MAX_DIMS = 4
_RESHAPE_TEXT_LIMIT = 200


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
) -> go.Figure:
    """A diagram of the head split: where each number of a (T, d_out) matrix goes.

    stage "flat": (T, d_out), one row per token, columns tinted by the head they will belong to.
    stage "view": (T, h, head_dim), the same rows cut into h blocks of head_dim columns (no number moves).
    stage "transpose": (h, T, head_dim), h separate (T, head_dim) matrices stacked top to bottom, the way
    numpy prints a 3-D array.

    Each cell shows its value (``values``, (T, d_out), to 2 decimals) when at most 200 cells are drawn, and
    otherwise its column index in the flat matrix, so a student can follow column c into head c // head_dim.
    At most 8 tokens, 4 heads and 4 dimensions per head are drawn; the subtitle says when that cuts.
    """
    if stage not in RESHAPE_STAGES:
        raise ValueError(f"stage must be one of {RESHAPE_STAGES}, got {stage!r}")
    T, h, hd = n_tokens, num_heads, head_dim
    d_out = h * hd
    tokens = _labels(token_labels, T, "token")
    if values is not None:
        values = np.asarray(values)
        if values.shape != (T, d_out):
            raise ValueError(f"values must be (T, d_out) = ({T}, {d_out}), got {values.shape}")
    Ts, hs, ds = min(T, _RESHAPE_MAX_TOKENS), min(h, _RESHAPE_MAX_HEADS), min(hd, _RESHAPE_MAX_DIMS)
    show_values = values is not None and Ts * hs * ds <= _RESHAPE_TEXT_LIMIT

    # Where cell (token t, head k, dim d) is drawn, as (grid row, grid column). Header rows hold "head k".
    if stage == "transpose":
        n_rows, n_cols = hs * (Ts + 1), ds

        def place(t: int, k: int, d: int) -> tuple[int, int]:
            return k * (Ts + 1) + 1 + t, d

        headers = [(k * (Ts + 1), 0, ds - 1, k) for k in range(hs)]  # (row, first col, last col, head)
    else:
        gap = 1 if stage == "view" else 0
        n_rows, n_cols = Ts + 1, hs * (ds + gap) - gap

        def place(t: int, k: int, d: int) -> tuple[int, int]:
            return 1 + t, k * (ds + gap) + d

        headers = [(0, k * (ds + gap), k * (ds + gap) + ds - 1, k) for k in range(hs)]

    z = np.full((n_rows, n_cols), np.nan)
    text = np.full((n_rows, n_cols), "", dtype=object)
    hover = np.full((n_rows, n_cols), "", dtype=object)
    y_ticks: dict[int, str] = {}
    x_ticks: dict[int, str] = {}
    for t in range(Ts):
        for k in range(hs):
            for d in range(ds):
                c = k * hd + d  # column in the flat (T, d_out) matrix
                row, col = place(t, k, d)
                z[row, col] = k
                text[row, col] = f"{values[t, c]:.2f}" if show_values else str(c)
                hover[row, col] = f"token {t} “{tokens[t]}”, flat column {c}<br>→ head {k}, dim {d}"
                y_ticks[row] = tokens[t]
                x_ticks[col] = str(c) if stage == "flat" else str(d)

    colors = head_colors(hs)
    colorscale = []
    for k, color in enumerate(colors):
        colorscale += [[k / hs, _tint(color, 0.45)], [(k + 1) / hs, _tint(color, 0.45)]]
    colors = head_colors(hs)
    colorscale = []
    for k, color in enumerate(colors):
        colorscale += [[k / hs, _tint(color, 0.45)], [(k + 1) / hs, _tint(color, 0.45)]]
    cells = {
        "type": "heatmap",
        "z": z,
        "text": text,
        "customdata": hover,
        "texttemplate": "%{text}" if values is None or show_values else "",
        "textfont": {"size": _font(presenter, 0.9 if n_rows <= 20 else 0.75), "color": "black"},
        "hovertemplate": "%{customdata}<extra></extra>",
        "hoverongaps": False,
        "colorscale": colorscale,
        "zmin": -0.5,  # head k fills [k - 0.5, k + 0.5]: band k of the colour scale
        "zmax": hs - 0.5,
        "showscale": False,
        "xgap": 2,
        "ygap": 2,
    }
    shapes, annotations = [], []
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
        annotations.append(
            {
                "font": {"color": _text_color_on(colors[k]), "size": _font(presenter, 0.85)},
                "showarrow": False,
                "text": f"head {k}",
                "x": (first + last) / 2,
                "y": row,
            }
        )
    cell_px = round(np.clip(900 / n_rows, 28, 44) * (PRESENTER_SCALE if presenter else 1.0))
    layout = {
        "shapes": shapes,
        "annotations": annotations,
        "xaxis": {
            "title": {"text": "flat column" if stage == "flat" else "dim within head"},
            "type": "linear",
            "range": [-0.5, n_cols - 0.5],
            "tickmode": "array",
            "tickvals": sorted(x_ticks),
            "ticktext": [x_ticks[c] for c in sorted(x_ticks)],
            "showgrid": False,
            "zeroline": False,
            "scaleanchor": "y",
            "constrain": "domain",
        },
        "yaxis": {
            "type": "linear",
            "range": [n_rows - 0.5, -0.5],  # row 0 at the top
            "tickmode": "array",
            "tickvals": sorted(y_ticks),
            "ticktext": [y_ticks[r] for r in sorted(y_ticks)],
            "showgrid": False,
            "zeroline": False,
        },
    }
    default_titles = {
        "flat": f"flat: (T, d_out) = ({T}, {d_out})",
        "view": f"view: (T, h, head_dim) = ({T}, {h}, {hd})",
        "transpose": f"transpose: (h, T, head_dim) = ({h}, {T}, {hd})",
    }
    notes = {
        "flat": f"each token's {d_out} numbers, tinted by the head they will go to",
        "view": f"the same numbers in the same order, each row cut into {h} blocks of {hd}",
        "transpose": f"each head now owns its own ({T}, {hd}) matrix",
    }
    sizes = ((Ts, T, "tokens"), (hs, h, "heads"), (ds, hd, "dims per head"))
    cut = [f"{shown} of {total} {what}" for shown, total, what in sizes if shown < total]
    subtitle = notes[stage] + (f" (showing {', '.join(cut)})" if cut else "")
    return _finish(
        {"data": [cells], "layout": layout},
        title or default_titles[stage],
        presenter,
        subtitle=subtitle,
        height=n_rows * cell_px + _font(presenter, 10),
    )
