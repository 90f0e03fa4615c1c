"""Heatmaps: one panel per head sharing one colour scale (``heads_heatmap``), or one matrix (``matrix_heatmap``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .downsample import _block_factor, _block_reduce, _color_range, _colorbar_ticks, _quantise
from .style import (
    _CODE_MAX,
    _KINDS,
    CELL_TEXT_COLUMNS,
    CELL_TEXT_LIMIT,
    DISPLAY_CELL_BUDGET,
    HOVER_EXACT_LIMIT,
    HOVER_TOKENS_LIMIT,
    KINDS,
    MASKED_COLOR,
    MAX_BLOCKS_PER_AXIS,
    MAX_PANEL_COLUMNS,
    MAX_TICKS,
    MIN_BLOCKS_PER_AXIS,
    NAN_COLOR,
    _axis_ticks,
    _escape,
    _finish,
    _font,
    _labels,
    _text_color_on,
    head_colors,
)


def _as_heads(matrices: np.ndarray) -> np.ndarray:
    z = np.asarray(matrices)
    if z.ndim == 2:
        z = z[None]
    if z.ndim != 3:
        raise ValueError(f"expected an (h, i, j) array, got shape {z.shape}")
    if z.dtype not in (np.float32, np.float64):
        z = z.astype(np.float32)  # bool masks, integers, float16
    return z


def _grid(h: int) -> tuple[int, int]:
    rows = math.ceil(h / MAX_PANEL_COLUMNS)
    return rows, math.ceil(h / rows)


def _overlay(cells: np.ndarray, color: str, exact: bool, hovertemplate: str, text: str | None, place: dict) -> dict:
    """A fixed-colour layer over the cells where ``cells`` is True (masked or NaN cells)."""
    if exact:
        z = np.where(cells, np.float32(1), np.float32(np.nan))  # gaps elsewhere: no colour, no hover
        extra = {"hovertemplate": hovertemplate, "hoverongaps": False}
        if text is not None:  # a text array: a plain texttemplate would also print on the gaps
            extra |= {"text": np.where(cells, text, ""), "texttemplate": "%{text}"}
        colorscale = [[0, color], [1, color]]
    else:
        z = cells.astype(np.uint8)  # 0 is transparent
        extra = {"hoverinfo": "skip"}
        colorscale = [[0, "rgba(0,0,0,0)"], [1, color]]
    return (
        {"type": "heatmap", "z": z, "zmin": 0, "zmax": 1, "colorscale": colorscale, "showscale": False} | place | extra
    )


def _legend_swatch(name: str, color: str, presenter: bool) -> dict:
    return {
        "type": "scatter",
        "x": [None],
        "y": [None],
        "mode": "markers",
        "name": name,
        "marker": {"symbol": "square", "size": _font(presenter), "color": color, "line": {"width": 1, "color": "#444"}},
        "hoverinfo": "skip",
        "showlegend": True,
        "meta": {"role": "legend"},
        "xaxis": "x",
        "yaxis": "y",
    }


def _subplot_grid(n_rows: int, n_cols: int, titles: list[str] | None, title_px: int) -> dict:
    """The layout of an n_rows × n_cols grid of subplots, as ``plotly.subplots.make_subplots`` lays it out.

    Spacing 0.04 between columns and 0.25 / n_rows between rows; subplot k (row-major from the top left) owns
    axes ``xaxis{k+1}``/``yaxis{k+1}``; titles sit centred above their subplot. Written out because
    make_subplots validates every axis it creates (a test checks that the two agree).
    """
    h_space = 0.04 if n_cols > 1 else 0
    v_space = 0.25 / n_rows
    width = (1 - h_space * (n_cols - 1)) / n_cols
    height = (1 - v_space * (n_rows - 1)) / n_rows
    layout: dict = {}
    annotations = []
    for k in range(n_rows * n_cols):
        r, c = divmod(k, n_cols)
        x0 = c * (width + h_space)
        y1 = 1 - r * (height + v_space)
        x_domain = [x0, min(x0 + width, 1.0)]
        y_domain = [max(y1 - height, 0.0), y1]
        suffix = "" if k == 0 else str(k + 1)
        layout[f"xaxis{suffix}"] = {"anchor": f"y{suffix}", "domain": x_domain}
        layout[f"yaxis{suffix}"] = {"anchor": f"x{suffix}", "domain": y_domain}
        if titles is not None and k < len(titles):
            annotations.append(
                {
                    "font": {"size": title_px},
                    "showarrow": False,
                    "text": titles[k],
                    "x": (x_domain[0] + x_domain[1]) / 2,
                    "xanchor": "center",
                    "xref": "paper",
                    "y": y_domain[1],
                    "yanchor": "bottom",
                    "yref": "paper",
                }
            )
    if annotations:
        layout["annotations"] = annotations
    return layout


def _heatmap_figure(
    matrices: np.ndarray,
    row_labels: Sequence[object] | None,
    col_labels: Sequence[object] | None,
    *,
    title: str,
    kind: str,
    panel_names: list[str] | None,
    zmin: float | None,
    zmax: float | None,
    hover_exact_limit: int,
    hover_tokens_limit: int,
    presenter: bool,
    row_title: str,
    col_title: str,
    panel_height: int,
    column_bands: tuple[int, Sequence[str] | None] | None = None,
) -> go.Figure:
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    spec = _KINDS[kind]
    z = _as_heads(matrices)  # (h, i, j)
    h, i, j = z.shape
    rows = _labels(row_labels, i, row_title)
    cols = _labels(col_labels, j, col_title)
    lo, hi = _color_range(z, spec, kind, zmin, zmax)
    exact = h * i * j <= hover_exact_limit
    subtitle = None
    hover_value = f"{spec.value_name} = %{{z:.4f}}" if kind != "mask" else "%{z:.0f} (1 = may attend, 0 = blocked)"
    clip_x = clip_y = {}
    if exact:
        shown = z
        # Small matrices get a thin white rule between cells, like a printed table.
        place: dict = {"xgap": 1, "ygap": 1} if max(i, j) <= 32 else {}
        hover = f"{row_title} %{{y}}<br>{col_title} %{{x}}<br>{hover_value}"
        customdata = None
        if h * i * j <= hover_tokens_limit:
            customdata = np.empty((i, j, 2), dtype=object)  # (i, j, [query token, key token])
            customdata[..., 0] = np.array(rows, dtype=object)[:, None]
            customdata[..., 1] = np.array(cols, dtype=object)[None, :]
            hover = (
                f"{row_title} %{{y}} “%{{customdata[0]}}”<br>{col_title} %{{x}} “%{{customdata[1]}}”<br>{hover_value}"
            )
    else:
        side = int(np.clip(math.sqrt(DISPLAY_CELL_BUDGET / h), MIN_BLOCKS_PER_AXIS, MAX_BLOCKS_PER_AXIS))
        fi, fj = _block_factor(i, side), _block_factor(j, side)
        shown = _block_reduce(z, fi, fj, spec.reduce)  # (h, i / fi, j / fj)
        # Uniform bricks (x0, dx) rather than an array of edges: plotly.js then paints the image in one pass
        # instead of one rectangle per cell (4× faster in Chromium at 8 heads × 512²). A last, shorter block
        # overhangs the last position; the axes' autorange stops at the matrix's edge (autorangeoptions).
        place = {"x0": (fj - 1) / 2, "dx": fj, "y0": (fi - 1) / 2, "dy": fi}
        clip_x = {"autorangeoptions": {"minallowed": -0.5, "maxallowed": j - 0.5}}
        clip_y = {"autorangeoptions": {"minallowed": -0.5, "maxallowed": i - 0.5}}
        subtitle = (
            f"{h * i * j:,} cells: each shown cell is the {spec.reduce} of a {fi}×{fj} block "
            f"(hover gives positions only)"
        )
    masked, nan = np.isneginf(shown), np.isnan(shown)
    any_masked, any_nan = bool(masked.any()), bool(nan.any())
    n_rows, n_cols = _grid(h)
    text_columns = CELL_TEXT_COLUMNS // 2 if presenter else CELL_TEXT_COLUMNS  # presenter fonts are larger
    show_text = exact and kind != "mask" and i * j <= CELL_TEXT_LIMIT and j * n_cols <= text_columns
    text_font = {"size": _font(presenter, 0.85)}
    x_ticks = max(4, MAX_TICKS // n_cols)
    y_ticks = 10 if presenter else MAX_TICKS
    layout = _subplot_grid(n_rows, n_cols, panel_names, _font(presenter, 1.05))
    x_axis_ticks, y_axis_ticks = _axis_ticks(cols, x_ticks), _axis_ticks(rows, y_ticks)
    data = []
    for k in range(h):
        r, c = divmod(k, n_cols)
        suffix = "" if k == 0 else str(k + 1)
        on_axes = {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
        name = panel_names[k] if panel_names else ""
        where = f"{row_title} %{{y}}"
        if exact:
            main = {
                "type": "heatmap",
                "z": np.where(masked[k] | nan[k], np.nan, z[k]).astype(z.dtype, copy=False),
                "customdata": customdata,
                "hovertemplate": f"{hover}<extra>{name}</extra>",
                "hoverongaps": False,
            }
            if customdata is None:
                del main["customdata"]
            if show_text:
                main |= {"texttemplate": "%{z:.2f}", "textfont": text_font}
        else:
            main = {
                "type": "heatmap",
                "z": _quantise(shown[k], lo, hi),
                "hovertemplate": (
                    f"{row_title} ≈ %{{y:.0f}}<br>{col_title} ≈ %{{x:.0f}}<br>(downsampled)<extra>{name}</extra>"
                ),
            }
        main |= {"coloraxis": "coloraxis", "name": name, "meta": {"role": "values", "head": k}} | place | on_axes
        data.append(main)
        for cells, any_cells, color, role, label, cell_text in (
            (masked[k], any_masked, MASKED_COLOR, "masked", "masked (−∞)", "−∞"),
            (nan[k], any_nan, NAN_COLOR, "nan", "NaN", "NaN"),
        ):
            if any_cells:
                layer = _overlay(
                    cells,
                    color,
                    exact,
                    f"{where}<br>{col_title} %{{x}}<br>{label}<extra>{name}</extra>",
                    cell_text if show_text else None,
                    place,
                )
                layer |= {"name": f"{name} {label}".strip(), "meta": {"role": role, "head": k}, "textfont": text_font}
                data.append(layer | on_axes)

        axis = {"type": "linear", "showgrid": False, "zeroline": False, "ticks": "outside"}
        x_axis = layout[f"xaxis{suffix}"] | axis | x_axis_ticks | clip_x
        if r == n_rows - 1 or k + n_cols >= h:
            x_axis["title"] = {"text": col_title}
        y_axis = layout[f"yaxis{suffix}"] | axis | {"autorange": "reversed", "showticklabels": c == 0}
        y_axis |= y_axis_ticks | clip_y
        if c == 0:  # row 0 at the top (autorange reversed), as in a printed matrix
            y_axis["title"] = {"text": row_title}
        layout[f"xaxis{suffix}"], layout[f"yaxis{suffix}"] = x_axis, y_axis

    colorbar: dict = {"title": {"text": spec.value_name}, "thickness": 18, "len": 0.8, "y": 1, "yanchor": "top"}
    if kind == "mask":
        colorbar |= {"tickvals": [0.25, 0.75], "ticktext": ["blocked", "may attend"], "title": {"text": ""}}
        cmin, cmax = 0.0, 1.0
    else:
        cmin, cmax = lo, hi
    if not exact:  # the traces hold uint8 codes: the colour bar maps codes back to real values
        tickvals, ticktext = ([0.25, 0.75], colorbar["ticktext"]) if kind == "mask" else _colorbar_ticks(lo, hi)
        codes = [(t - cmin) / (cmax - cmin) * _CODE_MAX for t in tickvals]
        colorbar |= {"tickvals": codes, "ticktext": ticktext}
        cmin, cmax = 0, _CODE_MAX
    layout["coloraxis"] = {"colorscale": spec.colorscale, "cmin": cmin, "cmax": cmax, "colorbar": colorbar}

    for present, label, color in ((any_masked, "masked (−∞)", MASKED_COLOR), (any_nan, "NaN", NAN_COLOR)):
        if present:
            data.append(_legend_swatch(label, color, presenter))
    layout["legend"] = {"x": 1.0, "xanchor": "left", "y": 0.0, "yanchor": "bottom"}

    above_plot_px = round(1.6 * _font(presenter, 1.05)) if panel_names else 0
    if column_bands is not None:
        above_plot_px += _band_columns(layout, j, *column_bands, presenter)

    # Cells are not forced square: the width is the page's, so square cells would leave white bands.
    panel_height = panel_height if n_cols > 2 else panel_height + 60 * (3 - n_cols)
    height = n_rows * round(panel_height * (1.25 if presenter else 1.0)) + _font(presenter, 7)
    return _finish(
        {"data": data, "layout": layout},
        title,
        presenter,
        subtitle=subtitle,
        height=height,
        above_plot_px=above_plot_px,
    )


def heads_heatmap(
    matrices: np.ndarray,
    row_labels: Sequence[object] | None,
    col_labels: Sequence[object] | None,
    *,
    title: str,
    kind: str,
    head_names: Sequence[str] | None = None,
    zmin: float | None = None,
    zmax: float | None = None,
    hover_exact_limit: int = HOVER_EXACT_LIMIT,
    hover_tokens_limit: int = HOVER_TOKENS_LIMIT,
    presenter: bool = False,
    row_title: str = "query",
    col_title: str = "key",
) -> go.Figure:
    """One heatmap per head, side by side (four to a row), sharing one colour scale and one colour bar.

    matrices: (h, i, j), one (query × key) matrix per head; rows are labelled by query tokens, columns by key
    tokens. kind: "weights" (0..1, Blues), "scores" (RdBu, symmetric about 0), "values" (RdBu, symmetric)
    or "mask" (True = may attend; two colours). zmin/zmax override the shared range, which otherwise comes
    from the finite values of all heads (0..1 for weights). −∞ cells are drawn grey and NaN cells magenta.

    Up to ``hover_tokens_limit`` cells in all, hover gives each cell's two tokens; up to ``hover_exact_limit``
    it gives the value to 4 decimals (the trace's z is the input itself, −∞ and NaN set to NaN), and small
    panels print their values in the cells. Beyond it, each head is downsampled (see ``_block_reduce``),
    quantised to uint8, and no exact value is sent.
    """
    z = _as_heads(matrices)
    names = list(head_names) if head_names is not None else [f"head {k}" for k in range(z.shape[0])]
    if len(names) != z.shape[0]:
        raise ValueError(f"{len(names)} head names for {z.shape[0]} heads")
    return _heatmap_figure(
        z,
        row_labels,
        col_labels,
        title=title,
        kind=kind,
        panel_names=[_escape(n) for n in names],
        zmin=zmin,
        zmax=zmax,
        hover_exact_limit=hover_exact_limit,
        hover_tokens_limit=hover_tokens_limit,
        presenter=presenter,
        row_title=row_title,
        col_title=col_title,
        panel_height=320,
    )


def matrix_heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[object] | None,
    col_labels: Sequence[object] | None,
    *,
    title: str,
    kind: str = "values",
    column_groups: int | None = None,
    group_names: Sequence[str] | None = None,
    zmin: float | None = None,
    zmax: float | None = None,
    hover_exact_limit: int = HOVER_EXACT_LIMIT,
    hover_tokens_limit: int = HOVER_TOKENS_LIMIT,
    presenter: bool = False,
    row_title: str = "token",
    col_title: str = "feature",
) -> go.Figure:
    """One 2-D matrix (Q, a weight matrix, the output) with row 0 at the top and exact values on hover.

    column_groups=h splits the columns into h equal blocks, one per head: each block gets a band in its
    head's colour above the matrix, labelled with ``group_names`` (default "head 0", ...), and a dark line
    separates neighbouring blocks. The bands are shapes named "head band k".
    """
    m = np.asarray(matrix)
    if m.ndim != 2:
        raise ValueError(f"expected an (i, j) matrix, got shape {m.shape}")
    return _heatmap_figure(
        m[None],
        row_labels,
        col_labels,
        title=title,
        kind=kind,
        panel_names=None,
        zmin=zmin,
        zmax=zmax,
        hover_exact_limit=hover_exact_limit,
        hover_tokens_limit=hover_tokens_limit,
        presenter=presenter,
        row_title=row_title,
        col_title=col_title,
        panel_height=360,
        column_bands=(column_groups, group_names) if column_groups else None,
    )


def _band_columns(layout: dict, n_cols: int, groups: int, names: Sequence[str] | None, presenter: bool) -> int:
    """Add a coloured band per head above the matrix's columns to ``layout``; return the pixels it needs."""
    if n_cols % groups:
        raise ValueError(f"{n_cols} columns do not split into {groups} equal head blocks")
    names = list(names) if names is not None else [f"head {k}" for k in range(groups)]
    if len(names) != groups:
        raise ValueError(f"{len(names)} group names for {groups} column groups")
    width = n_cols // groups
    band_px = _font(presenter, 1.6)
    shapes, annotations = layout.setdefault("shapes", []), layout.setdefault("annotations", [])
    for k, color in enumerate(head_colors(groups)):
        x0, x1 = k * width - 0.5, (k + 1) * width - 0.5
        shapes.append(
            dict(
                type="rect",
                name=f"head band {k}",
                xref="x",
                yref="y domain",
                x0=x0,
                x1=x1,
                ysizemode="pixel",
                yanchor=1,
                y0=3,
                y1=3 + band_px,
                fillcolor=color,
                line={"width": 1, "color": "white"},
            )
        )
        annotations.append(
            dict(
                text=_escape(names[k]),
                xref="x",
                yref="y domain",
                x=(x0 + x1) / 2,
                y=1,
                yanchor="bottom",
                yshift=3 + (band_px - _font(presenter, 1.2)) / 2,
                showarrow=False,
                font={"size": _font(presenter, 0.85), "color": _text_color_on(color)},
            )
        )
        if k:
            shapes.append(
                dict(
                    type="line",
                    name="head separator",
                    xref="x",
                    yref="y domain",
                    x0=x0,
                    x1=x0,
                    y0=0,
                    y1=1,
                    line={"width": 2, "color": "#222"},
                )
            )
    return band_px + 6
