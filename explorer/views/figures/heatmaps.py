"""Heatmaps: one panel per head sharing one colour scale (``heads_heatmap``), or one matrix (``matrix_heatmap``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from .downsample import _block_factor, _block_reduce, _color_range, _colorbar_ticks, _quantise, clipped_above
from .heatmap_layout import (
    FULL_FIGURE_PX,
    H_SPACE,
    PanelSize,
    below_plot_px,
    cell_text_fits,
    panel_size,
    row_gap_px,
    side_px,
    subplot_grid,
    x_tick_count,
    y_tick_count,
)
from .style import (
    _CODE_MAX,
    _KINDS,
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
    _short,
    _text_color_on,
    head_colors,
    text_px,
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


@dataclass(frozen=True)
class _Shown:
    """What a heatmap sends for its heads: the exact values, or block-reduced uint8-ready values."""

    values: np.ndarray  # (h, i', j'): z itself when exact, else one cell per block
    exact: bool
    place: dict  # where the cells sit: thin gaps between exact cells, or uniform bricks (x0, dx, y0, dy)
    clip_x: dict
    clip_y: dict
    subtitle: str | None


def _shown(z: np.ndarray, kind: str, hover_exact_limit: int) -> _Shown:
    """Exact up to hover_exact_limit cells; beyond, each head shrunk by the kind's block reduction."""
    h, i, j = z.shape
    if h * i * j <= hover_exact_limit:
        # Small matrices get a thin rule between cells (the page's background), like a printed table.
        return _Shown(z, True, {"xgap": 1, "ygap": 1} if max(i, j) <= 32 else {}, {}, {}, None)
    reduce = _KINDS[kind].reduce
    side = int(np.clip(math.sqrt(DISPLAY_CELL_BUDGET / h), MIN_BLOCKS_PER_AXIS, MAX_BLOCKS_PER_AXIS))
    fi, fj = _block_factor(i, side), _block_factor(j, side)
    shown = _block_reduce(z, fi, fj, reduce)  # (h, i / fi, j / fj)
    # Uniform bricks (x0, dx) rather than an array of edges: plotly.js then paints the image in one pass
    # instead of one rectangle per cell (4× faster in Chromium at 8 heads × 512²). A last, shorter block
    # overhangs the last position; the axes' autorange stops at the matrix's edge (autorangeoptions).
    place = {"x0": (fj - 1) / 2, "dx": fj, "y0": (fi - 1) / 2, "dy": fi}
    what = "fraction kept in" if kind == "keep" else f"{reduce} of"
    return _Shown(
        shown,
        False,
        place,
        {"autorangeoptions": {"minallowed": -0.5, "maxallowed": j - 0.5}},
        {"autorangeoptions": {"minallowed": -0.5, "maxallowed": i - 0.5}},
        f"{h * i * j:,} cells: each shown cell is the {what} a {fi}×{fj} block (hover gives positions only)",
    )


def _hover(kind: str, rows: list[str], cols: list[str], row_title: str, col_title: str, tokens: bool):
    """The exact cells' hover template, and the (i, j, 2) token pairs it reads when tokens is True."""
    value = "%{z:.0f} (1 = may attend, 0 = blocked)" if kind == "mask" else f"{_KINDS[kind].value_name} = %{{z:.4f}}"
    if not tokens:
        return f"{row_title} %{{y}}<br>{col_title} %{{x}}<br>{value}", None
    customdata = np.empty((len(rows), len(cols), 2), dtype=object)  # (i, j, [row token, column token])
    customdata[..., 0] = np.array(rows, dtype=object)[:, None]
    customdata[..., 1] = np.array(cols, dtype=object)[None, :]
    return f"{row_title} %{{y}} “%{{customdata[0]}}”<br>{col_title} %{{x}} “%{{customdata[1]}}”<br>{value}", customdata


def _widest_value(z: np.ndarray) -> str:
    """The longest of the values printed to 2 decimals: it sits at one end of the range."""
    finite = z[np.isfinite(z)]
    if not finite.size:
        return "NaN"
    return max((f"{float(finite.min()):.2f}", f"{float(finite.max()):.2f}"), key=len)


def _head_traces(z, shown: _Shown, k: int, lo: float, hi: float, name: str, look: dict) -> list[dict]:
    """Head k's values trace, then its grey (−∞) and magenta (NaN) overlays where it has any."""
    on_axes = {"xaxis": f"x{k + 1 if k else ''}", "yaxis": f"y{k + 1 if k else ''}"}
    masked, nan = np.isneginf(shown.values[k]), np.isnan(shown.values[k])
    where = f"{look['row_title']} %{{y}}<br>{look['col_title']} %{{x}}"
    if shown.exact:
        main = {
            "type": "heatmap",
            "z": np.where(masked | nan, np.nan, z[k]).astype(z.dtype, copy=False),
            "hovertemplate": f"{look['hover']}<extra>{name}</extra>",
            "hoverongaps": False,
        }
        if look["customdata"] is not None:
            main["customdata"] = look["customdata"]
        if look["show_text"]:
            main |= {"texttemplate": "%{z:.2f}", "textfont": look["text_font"]}
    else:
        main = {
            "type": "heatmap",
            "z": _quantise(shown.values[k], lo, hi),
            "hovertemplate": (
                f"{look['row_title']} ≈ %{{y:.0f}}<br>{look['col_title']} ≈ %{{x:.0f}}<br>(downsampled)"
                f"<extra>{name}</extra>"
            ),
        }
    data = [main | {"coloraxis": "coloraxis", "name": name, "meta": {"role": "values", "head": k}} | shown.place]
    for cells, color, role, label, cell_text in (
        (masked, MASKED_COLOR, "masked", look["masked_label"], "−∞"),
        (nan, NAN_COLOR, "nan", "NaN", "NaN"),
    ):
        if cells.any():
            hovertemplate = f"{where}<br>{label}<extra>{name}</extra>"
            text = cell_text if look["show_text"] else None
            layer = _overlay(cells, color, shown.exact, hovertemplate, text, shown.place)
            layer |= {
                "name": f"{name} {label}".strip(),
                "meta": {"role": role, "head": k},
                "textfont": look["text_font"],
            }
            data.append(layer)
    return [trace | on_axes for trace in data]


def _axes(layout: dict, h: int, n_rows: int, n_cols: int, ticks: tuple[dict, dict], titles: tuple[str, str], clip):
    """Every panel's axes: upright thinned tick labels, row 0 at the top, titles on the outer panels only."""
    axis = {"type": "linear", "showgrid": False, "zeroline": False, "ticks": "outside"}
    for k in range(h):
        r, c = divmod(k, n_cols)
        suffix = "" if k == 0 else str(k + 1)
        x_axis = layout[f"xaxis{suffix}"] | axis | ticks[0] | {"tickangle": 0} | clip[0]
        if r == n_rows - 1 or k + n_cols >= h:
            x_axis["title"] = {"text": titles[1]}
        # row 0 at the top (autorange reversed), as in a printed matrix
        y_axis = layout[f"yaxis{suffix}"] | axis | {"autorange": "reversed", "showticklabels": c == 0} | ticks[1]
        y_axis |= clip[1]
        if c == 0:  # standoff: room for the widest label even when the page's font is wider than plotly measured
            y_axis["title"] = {"text": titles[0], "standoff": 12}
        layout[f"xaxis{suffix}"], layout[f"yaxis{suffix}"] = x_axis, y_axis


def _square_cells(layout: dict, h: int, n_cols: int, size: PanelSize, row_labels: list[str], presenter: bool) -> None:
    """Square cells: each panel's y scale follows its x scale, and the panel shrinks to the left of its place.

    The figure's width is set to what the panels need (``layout.width``): a page that draws figures at their own
    width ("content") gets a matrix as big as its cells, not a page-wide slab; one that stretches them still gets
    square cells, packed to the left.
    """
    for k in range(h):
        suffix = "" if k == 0 else str(k + 1)
        layout[f"yaxis{suffix}"] |= {"scaleanchor": f"x{suffix}", "scaleratio": 1, "constrain": "domain"}
        layout[f"xaxis{suffix}"] |= {"constrain": "domain", "constraintoward": "left"}
    panels_px = n_cols * size.width / (1 - H_SPACE * (n_cols - 1)) if n_cols > 1 else size.width
    layout["width"] = round(panels_px + side_px(presenter, _labels_px(row_labels, presenter)))


def _labels_px(row_labels: list[str], presenter: bool) -> float:
    """The row labels' width and the rotated axis title's, left of the first panel."""
    return max((text_px(label, _font(presenter)) for label in row_labels), default=0.0) + 2 * _font(presenter)


COLORBAR_LEN = 0.75  # of the plot's height: the rest is for the masked/NaN legend below it


def _coloraxis(kind: str, lo: float, hi: float, exact: bool, clipped_top: bool, bar_ticks: int) -> dict:
    """The one colour axis of a figure, with its bar's ends labelled (the top says "≥" when values go above).

    bar_ticks: how many labels fit along the bar, one a line of text.
    """
    spec = _KINDS[kind]
    colorbar: dict = {
        "title": {"text": spec.value_name},
        "thickness": 18,
        "len": COLORBAR_LEN,
        "y": 1,
        "yanchor": "top",
    }
    if kind == "mask":
        tickvals, ticktext = [0.25, 0.75], ["blocked", "may attend"]
        colorbar["title"] = {"text": ""}
    else:
        tickvals, ticktext = _colorbar_ticks(lo, hi, clipped_top, bar_ticks)
        if kind == "keep" and not exact:
            colorbar["title"] = {"text": "fraction<br>kept"}
    cmin, cmax = lo, hi
    if not exact:  # the traces hold uint8 codes: the colour bar maps codes back to real values
        tickvals = [(t - lo) / (hi - lo) * _CODE_MAX for t in tickvals]
        cmin, cmax = 0, _CODE_MAX
    colorbar |= {"tickmode": "array", "tickvals": tickvals, "ticktext": ticktext}
    return {"colorscale": spec.colorscale, "cmin": cmin, "cmax": cmax, "colorbar": colorbar}


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
    width_px: int,
    column_bands: tuple[int, Sequence[str] | None] | None = None,
) -> go.Figure:
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    z = _as_heads(matrices)  # (h, i, j)
    h, i, j = z.shape
    rows, cols = _labels(row_labels, i, row_title), _labels(col_labels, j, col_title)
    lo, hi = _color_range(z, _KINDS[kind], kind, zmin, zmax)
    shown = _shown(z, kind, hover_exact_limit)
    n_rows, n_cols = _grid(h)
    short_cols, short_rows = [_short(c) for c in cols], [_short(r) for r in rows]
    size = panel_size(i, j, n_cols, presenter, width_px, _labels_px(short_rows, presenter))
    hover, customdata = _hover(kind, rows, cols, row_title, col_title, shown.exact and h * i * j <= hover_tokens_limit)
    look = {
        "row_title": row_title,
        "col_title": col_title,
        "hover": hover,
        "customdata": customdata,
        "show_text": shown.exact and kind not in ("mask", "keep") and cell_text_fits(size, _widest_value(z), presenter),
        "text_font": {"size": _font(presenter, 0.85)},
        "masked_label": "causally masked" if kind == "keep" else "masked (−∞)",
    }
    gap = row_gap_px(presenter, bool(panel_names))
    plot_px = n_rows * size.height + (n_rows - 1) * gap
    v_space = gap / plot_px if n_rows > 1 else None
    layout = subplot_grid(n_rows, n_cols, panel_names, _font(presenter, 1.05), v_space, left=size.square)
    data = []
    for k in range(h):
        data += _head_traces(z, shown, k, lo, hi, panel_names[k] if panel_names else "", look)
    x_ticks = min(MAX_TICKS, x_tick_count(size, short_cols, presenter))
    y_ticks = min(MAX_TICKS, y_tick_count(size, presenter))
    ticks = (_axis_ticks(short_cols, x_ticks), _axis_ticks(short_rows, y_ticks))
    _axes(layout, h, n_rows, n_cols, ticks, (row_title, col_title), (shown.clip_x, shown.clip_y))
    if size.square:
        _square_cells(layout, h, n_cols, size, short_rows, presenter)
    clipped_top = kind == "weights" and clipped_above(z, hi)
    bar_ticks = min(7, int(COLORBAR_LEN * plot_px // (1.5 * _font(presenter))))
    layout["coloraxis"] = _coloraxis(kind, lo, hi, shown.exact, clipped_top, bar_ticks)
    for role, label, color in (("masked", look["masked_label"], MASKED_COLOR), ("nan", "NaN", NAN_COLOR)):
        if any((t.get("meta") or {}).get("role") == role for t in data):
            data.append(_legend_swatch(label, color, presenter))
    layout["legend"] = {"x": 1.0, "xanchor": "left", "y": 0.0, "yanchor": "bottom"}
    above_plot_px = round(1.6 * _font(presenter, 1.05)) if panel_names else 0
    if column_bands is not None:
        above_plot_px += _band_columns(layout, j, *column_bands, presenter, size.cell_width)
    return _finish(
        {"data": data, "layout": layout},
        title,
        presenter,
        subtitle=shown.subtitle,
        plot_px=plot_px,
        below_px=below_plot_px(presenter),
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
    width_px: int = FULL_FIGURE_PX,
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
        width_px=width_px,
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
    width_px: int = FULL_FIGURE_PX,
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
        width_px=width_px,
        column_bands=(column_groups, group_names) if column_groups else None,
    )


def _band_columns(
    layout: dict, n_cols: int, groups: int, names: Sequence[str] | None, presenter: bool, cell_px: float
) -> int:
    """Add a coloured band per head above the matrix's columns to ``layout``; return the pixels it needs.

    A band's label is "head k" when that fits its width (cell_px per column), else "k", else none: labels never
    run into their neighbours'.
    """
    if n_cols % groups:
        raise ValueError(f"{n_cols} columns do not split into {groups} equal head blocks")
    names = list(names) if names is not None else [f"head {k}" for k in range(groups)]
    if len(names) != groups:
        raise ValueError(f"{len(names)} group names for {groups} column groups")
    width = n_cols // groups
    band_px = _font(presenter, 1.6)
    label_font = _font(presenter, 0.85)
    band_width_px = width * cell_px
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
        label = next(
            (text for text in (_escape(names[k]), str(k)) if text_px(text, label_font) + 4 <= band_width_px), None
        )
        if label is not None:
            annotations.append(
                dict(
                    text=label,
                    xref="x",
                    yref="y domain",
                    x=(x0 + x1) / 2,
                    y=1,
                    yanchor="bottom",
                    yshift=3 + (band_px - _font(presenter, 1.2)) / 2,
                    showarrow=False,
                    font={"size": label_font, "color": _text_color_on(color)},
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
