"""Heatmaps: one panel per head sharing one colour scale (``heads_heatmap``), or one matrix (``matrix_heatmap``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .downsample import clipped_above, color_range, colorbar_ticks, rounding_noise
from .heatmap_bands import band_columns, label_bands
from .heatmap_layout import (
    FULL_FIGURE_PX,
    H_SPACE,
    PanelSize,
    below_plot_px,
    cell_text_fits,
    cell_text_px,
    labelled_grid,
    row_gap_px,
    row_labels_px,
    side_px,
    subplot_grid,
    tick_text_px,
    x_ticks,
    y_tick_count,
)
from .heatmap_traces import as_heads, head_traces, hover_text, legend_swatch, shown_matrix, widest_value
from .style import (
    ALL_LABELS_UP_TO,
    CODE_MAX,
    COLOR_KINDS,
    HOVER_EXACT_LIMIT,
    HOVER_TOKENS_LIMIT,
    KINDS,
    MASKED_COLOR,
    MAX_TICKS,
    NAN_COLOR,
    ROUNDING_COLOR,
    axis_ticks,
    cell_font_size,
    escape_label,
    finish_figure,
    font_size,
    legend_px,
    shorten,
    tick_labels,
)


def _axes(layout: dict, grid: tuple[int, int, int], ticks: tuple[dict, dict], titles: tuple[str, str], clip, angle):
    """Every panel's axes: tick labels (every one up to 32, turned by ``angle``), row 0 at the top, titles on the
    outer panels only. ``grid``: heads, rows, columns."""
    h, n_rows, n_cols = grid
    axis = {"type": "linear", "showgrid": False, "zeroline": False, "ticks": "outside"}
    for k in range(h):
        r, c = divmod(k, n_cols)
        suffix = "" if k == 0 else str(k + 1)
        x_axis = layout[f"xaxis{suffix}"] | axis | ticks[0] | {"tickangle": angle} | clip[0]
        if r == n_rows - 1 or k + n_cols >= h:
            x_axis["title"] = {"text": titles[1]}
        # row 0 at the top (autorange reversed), as in a printed matrix
        y_axis = layout[f"yaxis{suffix}"] | axis | {"autorange": "reversed", "showticklabels": c == 0} | ticks[1]
        if c:  # no tick marks without their labels: they sat inside the left neighbour's grid
            y_axis["ticks"] = ""
        y_axis |= clip[1]
        if c == 0:  # standoff: room for the widest label even when the page's font is wider than plotly measured
            y_axis["title"] = {"text": titles[0], "standoff": 12}
        layout[f"xaxis{suffix}"], layout[f"yaxis{suffix}"] = x_axis, y_axis


def _square_cells(layout: dict, h: int, n_cols: int, size: PanelSize, row_labels: list[str], presenter: bool) -> None:
    """Square cells: each panel's y scale follows its x scale, and the panel shrinks to the left of its place.

    The figure's width is set to what the panels need (``layout.width``): a page that draws figures at their own
    width ("content") gets a matrix as big as its cells, not a page-wide slab; one that stretches them (a presenter
    stage) still gets square cells, packed to the left. One matrix without a panel title is packed to the right,
    against its colour bar: on step 11's stage a 2-column matrix sat 376 px from its bar.
    """
    alone = h == 1 and not any(a.get("xref") == "paper" for a in layout.get("annotations", []))
    for k in range(h):
        suffix = "" if k == 0 else str(k + 1)
        layout[f"yaxis{suffix}"] |= {  # a figure taller than its cells (a stage) keeps them under their titles
            "scaleanchor": f"x{suffix}",
            "scaleratio": 1,
            "constrain": "domain",
            "constraintoward": "top",
        }
        layout[f"xaxis{suffix}"] |= {"constrain": "domain", "constraintoward": "right" if alone else "left"}
    panels_px = n_cols * size.width / (1 - H_SPACE * (n_cols - 1)) if n_cols > 1 else size.width
    layout["width"] = round(panels_px + side_px(presenter, row_labels_px(row_labels, presenter)))


def _fixed_ranges(layout: dict, h: int, shown) -> None:
    """Each panel's axes span exactly its matrix (the shrunk bricks' clip), row 0 at the top: a last, shorter brick
    overhangs no further."""
    x_end, y_end = (clip["autorangeoptions"]["maxallowed"] for clip in (shown.clip_x, shown.clip_y))
    for k in range(h):
        suffix = "" if k == 0 else str(k + 1)
        layout[f"xaxis{suffix}"] |= {"range": [-0.5, x_end], "autorange": False}
        layout[f"yaxis{suffix}"] |= {"range": [y_end, -0.5], "autorange": False}


COLORBAR_LEN = 0.75  # of the plot's height: the rest is for the masked/NaN legend below it
MIN_BAR_LINES = 5  # a bar holds at least this many lines of tick text (a short plot's bar reaches below it):
# step 7's 6-token panels had a 65 px bar (3 lines) with its bottom label under the legend
LEGEND_GAP_PX = 12  # between the colour bar's end and the masked/NaN legend under it


def _coloraxis(kind: str, lo: float, hi: float, exact: bool, clipped_top: bool, bar: tuple[float, int]) -> dict:
    """The one colour axis of a figure, with its bar's ends labelled (the top says "≥" when values go above).

    bar: its length in px and how many labels fit along it, one a line of text.
    """
    spec = COLOR_KINDS[kind]
    bar_px, bar_ticks = bar
    colorbar: dict = {
        "title": {"text": spec.value_name},
        "thickness": 18,
        "lenmode": "pixels",
        "len": bar_px,
        "y": 1,
        "yanchor": "top",
    }
    if kind == "mask":
        tickvals, ticktext = [0.25, 0.75], ["blocked", "may attend"]
        colorbar["title"] = {"text": ""}
    else:
        tickvals, ticktext = colorbar_ticks(lo, hi, clipped_top, bar_ticks)
        if kind == "keep" and not exact:
            colorbar["title"] = {"text": "fraction<br>kept"}
    cmin, cmax = lo, hi
    if not exact:  # the traces hold uint8 codes: the colour bar maps codes back to real values
        tickvals = [(t - lo) / (hi - lo) * CODE_MAX for t in tickvals]
        cmin, cmax = 0, CODE_MAX
    colorbar |= {"tickmode": "array", "tickvals": tickvals, "ticktext": ticktext}
    return {"colorscale": spec.colorscale, "cmin": cmin, "cmax": cmax, "colorbar": colorbar}


def _colour_bar(layout: dict, z, kind: str, scale, exact: bool, plot_px: float, presenter: bool, noise) -> float:
    """Set the figure's colour axis (``scale`` = lo, hi) with a bar that holds its labels; return its length in px."""
    clipped_top = kind == "weights" and clipped_above(z, scale[1])
    line_px = 1.5 * font_size(presenter)
    # plotly's colour bar length holds its title and 2 × 10 px of padding too: a 2-row matrix's bar still reads
    bar_px = max(COLORBAR_LEN * plot_px, (MIN_BAR_LINES + 1) * line_px + 20)
    ticks = max(2, min(7, int((bar_px - line_px - 20) // line_px)))
    layout["coloraxis"] = _coloraxis(kind, *scale, exact, clipped_top, (bar_px, ticks))
    if noise is not None:  # float rounding: one grey, its size on the bar, not red–blue saturation
        layout["coloraxis"]["colorscale"] = [[0.0, ROUNDING_COLOR], [1.0, ROUNDING_COLOR]]
        layout["coloraxis"]["colorbar"]["title"] = {"text": f"equal to<br>rounding<br>(|d| ≤ {noise:.1g})"}
    return bar_px


def _look(kind: str, titles: tuple[str, str], hover, customdata, text: tuple[bool, bool], presenter: bool, noise):
    """What every head's traces share: axis titles, hover template and data, cell text, the masked cells' name.

    text: (the values may be printed, they fit the planned cells); a presenter figure whose planned cells are too
    small leaves them to its stage. Float noise prints "6e-08", not "0.00"."""
    printable, fits = text
    return {
        "stage_text": presenter and printable and not fits,
        "text_template": "%{z:.2f}" if noise is None else "%{z:.0e}",
        "row_title": titles[0],
        "col_title": titles[1],
        "hover": hover,
        "customdata": customdata,
        "show_text": printable and fits,
        "presenter": presenter,
        "text_font": {"size": cell_font_size(presenter)},
        "masked_label": "causally masked" if kind == "keep" else "masked (−∞)",
    }


def _noise_note(noise: float | None, subtitle: str | None) -> str | None:
    """The subtitle, saying so when every difference is float rounding."""
    if noise is None:
        return subtitle
    note = f"every |difference| ≤ {noise:.2g}: equal to rounding (grey)"
    return note if subtitle is None else f"{note}; {subtitle}"


def _name(panel_names: list[str] | None, k: int) -> str:
    return panel_names[k] if panel_names else ""


def _grid_layout(grid: tuple[int, int, int], size: PanelSize, names, ticks_px: float, presenter: bool):
    """(the subplot grid, its plot area's height in px, bare) for ``grid`` = rows, columns, keys. Bare: only the
    bottom row labels the keys, which every head shares (a presenter grid beyond 32 keys: at 16 heads × 256 each
    row's turned labels ran into the next row's head titles, on a stage that drew the rows closer than planned)."""
    n_rows, n_cols, j = grid
    bare = presenter and j > ALL_LABELS_UP_TO and n_rows > 1
    gap = row_gap_px(presenter, bool(names), 0 if bare else ticks_px)
    plot_px = n_rows * size.height + (n_rows - 1) * gap
    v_space = gap / plot_px if n_rows > 1 else None
    return subplot_grid(n_rows, n_cols, names, font_size(presenter, 1.05), v_space, left=size.square), plot_px, bare


def _grid_axes(layout: dict, grid: tuple[int, int, int], size: PanelSize, labels, look, shown, bare: bool) -> None:
    """Ticks and titles on every panel's axes (``grid`` = heads, rows, columns; ``labels`` = rows' labels, and the
    x ticks with whether they are turned; ``look``: the axis titles, presenter). ``bare``: see ``_grid_layout``."""
    h, n_rows, n_cols = grid
    presenter, titles = look["presenter"], (look["row_title"], look["col_title"])
    short_rows, (x_axis_ticks, turned) = labels
    y_ticks = min(MAX_TICKS, y_tick_count(size, presenter))
    ticks = (x_axis_ticks, axis_ticks(short_rows, y_ticks))
    _axes(layout, grid, ticks, titles, (shown.clip_x, shown.clip_y), -90 if turned else 0)
    for k in range(h - n_cols if bare else 0):  # every row above the last (the last may be short: 5 = 3 + 2)
        layout[f"xaxis{k + 1 if k else ''}"] |= {"showticklabels": False, "ticks": ""}
    if size.square:  # shrunk bricks are clipped to the matrix by a fixed range: autorange's clip is lost to a scale
        _square_cells(layout, h, n_cols, size, short_rows, presenter)  # anchor (16 × 256 was drawn 201 × 79 px)
        if not shown.exact:
            _fixed_ranges(layout, h, shown)


def _swatches(data: list[dict], masked_label: str, presenter: bool) -> list[dict]:
    """A legend entry for masked and for NaN cells, each only when some trace draws them."""
    return [
        legend_swatch(label, color, presenter)
        for role, label, color in (("masked", masked_label, MASKED_COLOR), ("nan", "NaN", NAN_COLOR))
        if any((t.get("meta") or {}).get("role") == role for t in data)
    ]


def _legend_under_bar(layout: dict, data: list[dict], masked_label: str, bar_px, plot_px, presenter) -> float:
    """The masked/NaN legend under the colour bar and its last label; returns how far down both reach (px)."""
    swatches = _swatches(data, masked_label, presenter)
    data += swatches
    end_px = bar_px + 0.75 * font_size(presenter)  # half a line of the last label hangs below the bar (issue 42)
    layout["legend"] = {"x": 1.0, "xanchor": "left", "y": 1 - (end_px + LEGEND_GAP_PX) / plot_px, "yanchor": "top"}
    return end_px + (LEGEND_GAP_PX + legend_px(len(swatches), presenter) if swatches else 0)


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
    if kind not in COLOR_KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    z = as_heads(matrices)  # (h, i, j)
    h, i, j = z.shape
    rows, cols = tick_labels(row_labels, i, row_title), tick_labels(col_labels, j, col_title)
    lo, hi = color_range(z, COLOR_KINDS[kind], kind, zmin, zmax)
    shown = shown_matrix(z, kind, hover_exact_limit)
    short_cols, short_rows = [shorten(c) for c in cols], [shorten(r) for r in rows]
    n_rows, n_cols, size = labelled_grid(h, i, j, presenter, width_px, row_labels_px(short_rows, presenter))
    x_axis, turned = x_ticks(size, short_cols, n_cols, presenter)
    ticks_px = tick_text_px(x_axis["ticktext"], turned, presenter)
    hover, customdata = hover_text(
        kind, rows, cols, row_title, col_title, shown.exact and h * i * j <= hover_tokens_limit
    )
    noise = rounding_noise(z, kind, zmin, zmax)
    widest = widest_value(z) if noise is None else "-0e-00"
    text = (shown.exact and kind not in ("mask", "keep"), cell_text_fits(size, widest, presenter))
    look = _look(kind, (row_title, col_title), hover, customdata, text, presenter, noise)
    layout, plot_px, bare = _grid_layout((n_rows, n_cols, j), size, panel_names, ticks_px, presenter)
    data = [trace for k in range(h) for trace in head_traces(z, shown, k, lo, hi, _name(panel_names, k), look)]
    _grid_axes(layout, (h, n_rows, n_cols), size, (short_rows, (x_axis, turned)), look, shown, bare)
    bar_px = _colour_bar(layout, z, kind, (lo, hi), shown.exact, plot_px, presenter, noise)
    beside_px = _legend_under_bar(layout, data, look["masked_label"], bar_px, plot_px, presenter)
    above_plot_px = round(1.6 * font_size(presenter, 1.05)) if panel_names else 0
    if column_bands is not None:
        above_plot_px += band_columns(layout, j, column_bands[0], presenter)
    figure = finish_figure(
        {"data": data, "layout": layout},
        title,
        presenter,
        subtitle=_noise_note(noise, shown.subtitle),
        plot_px=plot_px,
        below_px=max(below_plot_px(presenter, ticks_px), round(beside_px - plot_px)),
        above_plot_px=above_plot_px,
    )
    label_bands(figure, size, row_labels_px(short_rows, presenter), (j, column_bands), presenter)
    return _leave_stage_text(figure, look, widest, (i, j))


def _leave_stage_text(figure: go.Figure, look: dict, widest: str, cells: tuple[int, int]) -> go.Figure:
    """What a presenter stage needs to print the cell values the planned size left out (layout.meta.stage_text,
    read by heatmap_layout.stage_cell_text): a stage draws the cells larger than planned."""
    if not look["stage_text"]:
        return figure
    need_px = list(cell_text_px(widest, look["presenter"]))
    text = {"template": look["text_template"], "font": look["text_font"]["size"], "need_px": need_px}
    figure.layout.meta = dict(figure.layout.meta) | {"stage_text": text | {"rows": cells[0], "cols": cells[1]}}
    return figure


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
    tokens. kind: "weights" (viridis, 0 up to the 99th percentile of the positive weights), "scores" and
    "values" (RdBu, symmetric about 0), or "mask" (True = may attend; two colours); see style.py for every kind.
    zmin/zmax override the shared range, which otherwise comes from the finite values of all heads. −∞ cells
    are drawn grey and NaN cells magenta.

    Up to ``hover_tokens_limit`` cells in all, hover gives each cell's two tokens; up to ``hover_exact_limit``
    it gives the value to 4 decimals (the trace's z is the input itself, −∞ and NaN set to NaN), and small
    panels print their values in the cells. Beyond it, each head is downsampled (see ``block_reduce``),
    quantised to uint8, and no exact value is sent.
    """
    z = as_heads(matrices)
    names = list(head_names) if head_names is not None else [f"head {k}" for k in range(z.shape[0])]
    if len(names) != z.shape[0]:
        raise ValueError(f"{len(names)} head names for {z.shape[0]} heads")
    figure = _heatmap_figure(
        z,
        row_labels,
        col_labels,
        title=title,
        kind=kind,
        panel_names=[escape_label(n) for n in names],
        zmin=zmin,
        zmax=zmax,
        hover_exact_limit=hover_exact_limit,
        hover_tokens_limit=hover_tokens_limit,
        presenter=presenter,
        row_title=row_title,
        col_title=col_title,
        width_px=width_px,
    )
    figure.layout.meta = dict(figure.layout.meta) | {"heads_grid": True}  # a phone lays it out again (one_column)
    return figure


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
