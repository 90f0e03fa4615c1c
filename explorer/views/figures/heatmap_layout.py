"""How big a heatmap is drawn, and how many labels fit: sizes from the content, ticks thinned to the pixels.

A matrix is sized by its cells (a 6 × 6 matrix is a small square, not a page-wide slab). Up to 32 tokens every
label is drawn: upright when it fits its cell, else turned −90°, and the panels wrap into more rows so that each
cell holds a line of label text. Beyond 32 the label count comes from an estimate of the pixels it gets, so that
labels never overlap; numbers are printed in cells only when they fit. Widths are estimated for the place the
figure is drawn: ``FULL_FIGURE_PX`` for a page-wide figure, ``style.NARROW_FIGURE_PX`` for a half-width column
(Step through's right column).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from .style import (
    ALL_LABELS_UP_TO,
    MAX_PANEL_COLUMNS,
    MAX_TICKS,
    PRESENTER_SCALE,
    axis_ticks,
    cell_font_size,
    decode_array,
    font_size,
    to_figure,
)
from .text_width import text_px, widest_px

FULL_FIGURE_PX = 900  # a page-wide figure on a 1280-px screen with the sidebar open
CELL_MAX_PX = 52  # a cell is at most this big: enough for "-0.35" at the cell font (body type)
PANEL_MAX_PX = 380  # a panel's longer side is at most this
PANEL_MIN_PX = 110
SQUARE_ASPECT = 4  # matrices at most this much wider than tall (or taller than wide) get square cells
COLORBAR_PX = 110  # colour bar, its labels and the y tick labels beside the panels
H_SPACE = 0.04  # between panel columns, as a fraction of the width
DIGIT_WIDTH = 0.56  # a digit's width as a fraction of the font size


@dataclass(frozen=True)
class PanelSize:
    """One panel's plot area in pixels, and its cells'."""

    width: float  # an estimate when not square: the panel then stretches with the page
    height: int
    cell_width: float
    cell_height: float
    square: bool  # cells forced square (yaxis.scaleanchor), so the drawn width follows the height


def side_px(presenter: bool, labels_px: float) -> float:
    """What a row of panels needs beside the panels: row labels and title on the left, the colour bar right."""
    return labels_px + COLORBAR_PX * (PRESENTER_SCALE if presenter else 1.0) + 30


def panel_size(i: int, j: int, n_cols: int, presenter: bool, width_px: int, labels_px: float = 0.0) -> PanelSize:
    """The size of one (i × j) panel in a row of n_cols, in a figure at most width_px wide (labels_px: row labels)."""
    scale = PRESENTER_SCALE if presenter else 1.0
    cell_max, panel_max = CELL_MAX_PX * scale, PANEL_MAX_PX * (1.25 if presenter else 1.0)
    avail = (width_px - side_px(presenter, labels_px)) * (1 - H_SPACE * (n_cols - 1)) / n_cols  # a panel at most
    square = max(i, j) <= SQUARE_ASPECT * min(i, j)
    if square:
        cell = min(cell_max, panel_max / max(i, j), avail / j)
        height = max(60, round(i * cell))
        return PanelSize(j * cell, height, cell, cell, True)
    height = round(min(panel_max, max(PANEL_MIN_PX, i * cell_max)))
    width = min(avail, j * cell_max)
    return PanelSize(width, height, width / j, height / i, False)


def label_room_px(presenter: bool) -> float:
    """A cell's least size when every label is drawn: a line of tick text across it (turned, on the x axis), with a
    fifth of a line between neighbours."""
    return 1.4 * font_size(presenter)


def labelled_grid(h: int, i: int, j: int, presenter: bool, width_px: int, labels_px: float):
    """(rows, columns, panel size): the most columns (up to four) whose cells hold one line of label text each.

    Up to ``ALL_LABELS_UP_TO`` tokens every label is drawn, so the panels wrap into more rows until each gets its
    room; in one column the cells grow to it (the figure then outgrows width_px: no label is dropped).
    """
    need = label_room_px(presenter)
    columns = min(h, MAX_PANEL_COLUMNS)
    while True:
        rows = math.ceil(h / columns)
        columns = math.ceil(h / rows)  # 5 heads: 3 + 2, not 4 + 1
        size = panel_size(i, j, columns, presenter, width_px, labels_px)
        short_x = j <= ALL_LABELS_UP_TO and size.cell_width < need
        short_y = i <= ALL_LABELS_UP_TO and size.cell_height < need
        if not (short_x or short_y):
            return rows, columns, size
        if columns == 1:
            return rows, columns, _grown(size, i, j, need)
        columns -= 1


def _grown(size: PanelSize, i: int, j: int, need: float) -> PanelSize:
    """The panel with cells at least ``need`` px on each labelled (≤ ALL_LABELS_UP_TO) axis."""
    cell_w = max(size.cell_width, need) if j <= ALL_LABELS_UP_TO else size.cell_width
    cell_h = max(size.cell_height, need) if i <= ALL_LABELS_UP_TO else size.cell_height
    if size.square:
        cell_w = cell_h = max(cell_w, cell_h)
    return PanelSize(j * cell_w, round(i * cell_h), cell_w, cell_h, size.square)


def x_labels_turned(size: PanelSize, labels: list[str], presenter: bool) -> bool:
    """Whether every one of ≤ 32 labels is drawn turned (−90°): upright, the widest would leave its cell."""
    widest = widest_px(labels, font_size(presenter))
    return len(labels) <= ALL_LABELS_UP_TO and size.cell_width < widest + 1.2 * font_size(presenter)


def x_ticks(size: PanelSize, labels: list[str], n_cols: int, presenter: bool) -> tuple[dict, bool]:
    """The x axis's ticks, and whether they are turned −90°: when a label would leave its cell, or when the last
    would run into the next panel's first (both are kept: the first and the last are always labelled)."""
    ticks = axis_ticks(labels, min(MAX_TICKS, x_tick_count(size, labels, presenter)))
    shown = ticks["ticktext"]
    widest = widest_px(shown, font_size(presenter))
    turned = x_labels_turned(size, labels, presenter) or len(shown) * (widest + 8) > size.width
    if not turned and len(clear_of_next_panel(ticks, n_cols, size, presenter)["tickvals"]) < len(ticks["tickvals"]):
        turned = True
    return ticks, turned


def tick_text_px(labels: list[str], turned: bool, presenter: bool) -> float:
    """How tall the x tick labels stand: one line, or the widest label when turned."""
    if not turned:
        return 1.6 * font_size(presenter)
    return widest_px(labels, font_size(presenter)) + 0.6 * font_size(presenter)


def tick_count(pixels: float, label_px: float) -> int:
    """How many labels of label_px fit side by side in pixels, with a gap of a few pixels each."""
    return max(1, math.floor(pixels / (label_px + 8)))


def x_tick_count(size: PanelSize, labels: list[str], presenter: bool) -> int:
    """Labels under a panel: as many as fit across it upright, so none overlaps or is rotated."""
    widest = widest_px(labels, font_size(presenter))
    return tick_count(size.width, widest)


def clear_of_next_panel(ticks: dict, n_cols: int, size: PanelSize, presenter: bool) -> dict:
    """Drop the last labels that would run into the next panel's first label (seen: "stepYour").

    A label is centred on its cell and overhangs it by half its extra width. The gap between panels is not
    counted on: a page may draw the figure narrower than planned (presenter mode stretches it to the screen's
    height), which squeezes the gap with the cells, while the labels keep their size.
    """
    positions, texts = list(ticks["tickvals"]), list(ticks["ticktext"])
    if n_cols < 2 or len(positions) < 2 or size.cell_width <= 0:
        return ticks
    font = font_size(presenter)
    n = round(size.width / size.cell_width)  # cells across the panel
    first_half = text_px(texts[0], font) / 2  # the next panel's first label, left of its first cell's centre
    while len(positions) > 1:
        room = (n - positions[-1] - 0.5) * size.cell_width  # from the last label's centre to the panel's edge
        if room >= text_px(texts[-1], font) / 2 + first_half - size.cell_width / 2 + 0.6 * font:
            break
        positions, texts = positions[:-1], texts[:-1]
    return ticks | {"tickvals": positions, "ticktext": texts}


def y_tick_count(size: PanelSize, presenter: bool) -> int:
    """Labels beside a panel: one per line height of the tick font."""
    return tick_count(size.height, 1.2 * font_size(presenter) - 8)


def cell_text_px(widest: str, presenter: bool) -> tuple[float, float]:
    """(width, height): the least cell that holds a value printed as ``widest`` (its longest text)."""
    font = cell_font_size(presenter)
    return len(widest) * DIGIT_WIDTH * font + 6, 1.3 * font


def cell_text_fits(size: PanelSize, widest: str, presenter: bool) -> bool:
    """Whether a value printed as ``widest`` (its longest text) fits inside one cell."""
    width, height = cell_text_px(widest, presenter)
    return size.cell_width >= width and size.cell_height >= height


# Presenter mode's stage on the smallest projector screen (1280 × 720): the figure column's width, and the viewport's
# height less 230 px (the heading and the step buttons above it). A stage stretches its figure to this box.
STAGE_LEAST_PX = (780, 490)


def least_stage_cell_px(size: PanelSize, figure, labels_px: float, presenter: bool) -> float:
    """A cell's width as the smallest stage draws it (presenter mode), else as planned: text inside a cell must
    fit there. Step 11's 2-column matrix was planned at 74 px cells and drawn at 46 on a 720p stage, which cut its
    "head 0" band labels. Square cells follow the stage's height (less the figure's margins and a tick line that
    plotly's automargin adds under the x labels) and its width; stretched ones its width."""
    if not presenter:
        return size.cell_width
    margin = figure.layout.margin
    plot_h = STAGE_LEAST_PX[1] - margin.t - margin.b - 1.5 * font_size(presenter)
    planned_w = figure.layout.width or FULL_FIGURE_PX
    room = side_px(presenter, labels_px)
    scale = max(0.0, STAGE_LEAST_PX[0] - room) / max(1.0, planned_w - room)
    if size.square:
        scale = min(scale, max(0.0, plot_h) / size.height)
    return size.cell_width * min(1.0, scale)


def bar_follows_stage(figure):
    """A copy whose colour bar is a fraction of the plot's height, not pixels: a stage resizes the plot, and the
    masked/NaN legend under the bar is placed as a fraction of it, so the bar must follow (on presenter mode's step 6
    the pixel bar kept its length while the legend moved up onto its last label). Figures without one come back."""
    bar = figure.layout.coloraxis.colorbar if figure.layout.coloraxis else None
    legend = any(trace.showlegend for trace in figure.data)  # the masked/NaN swatches
    if not legend or bar is None or bar.lenmode != "pixels" or not bar.len or not figure.layout.height:
        return figure
    margin = figure.layout.margin
    plot_px = figure.layout.height - (margin.t or 0) - (margin.b or 0)
    spec = figure.to_dict()  # a deep copy: the figure given may be a cached one every session shares
    spec["layout"]["coloraxis"]["colorbar"] |= {"lenmode": "fraction", "len": bar.len / plot_px}
    return to_figure(spec)


def stage_cell_text(figure) -> tuple[object, int, int] | None:
    """(a copy printing its cell values, least stage width, least stage height): the stage's drawn cells hold them.

    Presenter mode's main figure is stretched to its stage (the viewport less 230 px), so its cells are drawn larger
    than planned: 73 px at 1920 × 1080 stayed blank because the plan gave 50. Square cells are drawn as large as the
    stage's plot area allows on both axes, so the text fits from a stage of l + r + need × j / x-domain wide and
    t + b + need × i / y-domain tall (margins in px). None when the figure left no cell text for the stage.
    """
    meta = figure.layout.meta if isinstance(figure.layout.meta, dict) else {}
    text = meta.get("stage_text")
    if not text:
        return None
    spec = figure.to_dict()  # a deep copy: the figure given may be a cached one shared by every session
    layout, (need_w, need_h) = spec["layout"], text["need_px"]
    margin = layout.get("margin", {})
    x_domain, y_domain = layout["xaxis"]["domain"], layout["yaxis"]["domain"]
    if "scaleanchor" in layout["yaxis"]:  # square cells: each side is the smaller of the two the stage allows
        need_w = need_h = max(need_w, need_h)
    min_w = margin.get("l", 80) + margin.get("r", 80) + need_w * text["cols"] / (x_domain[1] - x_domain[0])
    min_h = margin.get("t", 100) + margin.get("b", 80) + need_h * text["rows"] / (y_domain[1] - y_domain[0])
    for trace in spec["data"]:
        role = (trace.get("meta") or {}).get("role")
        if role == "values":
            trace |= {"texttemplate": text["template"], "textfont": {"size": text["font"]}}
        elif role == "masked":  # "−∞" in the grey cells, as a page prints them: shorter than any value, so it fits
            cells = decode_array(trace["z"]) == 1  # 1 where masked, NaN elsewhere (exact cells)
            trace |= {"text": np.where(cells, "−∞", ""), "texttemplate": "%{text}", "textfont": {"size": text["font"]}}
    return to_figure(spec), math.ceil(min_w), math.ceil(min_h)


def subplot_grid(
    n_rows: int, n_cols: int, titles: list[str] | None, title_px: int, v_space: float | None = None, left: bool = False
) -> dict:
    """The layout of an n_rows × n_cols grid of subplots, as ``plotly.subplots.make_subplots`` lays it out.

    Spacing 0.04 between columns and v_space (default 0.25 / n_rows) between rows; subplot k (row-major from the
    top left) owns axes ``xaxis{k+1}``/``yaxis{k+1}``; titles sit centred above their subplot (left: at its left
    edge, for panels packed to the left of their place). Written out because
    make_subplots validates every axis it creates (a test checks that the two agree).
    """
    h_space = H_SPACE if n_cols > 1 else 0
    v_space = 0.25 / n_rows if v_space is None else v_space
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
                    "x": x_domain[0] if left else (x_domain[0] + x_domain[1]) / 2,
                    "xanchor": "left" if left else "center",
                    "xref": "paper",
                    "y": y_domain[1],
                    "yanchor": "bottom",
                    "yref": "paper",
                }
            )
    if annotations:
        layout["annotations"] = annotations
    return layout


def row_gap_px(presenter: bool, titled: bool, ticks_px: float | None = None) -> int:
    """Pixels between panel rows: the upper row's tick labels (``ticks_px`` tall), then the lower row's titles."""
    ticks_px = 1.6 * font_size(presenter) if ticks_px is None else ticks_px
    return round(ticks_px) + (round(1.6 * font_size(presenter, 1.05)) if titled else 0) + 10


def below_plot_px(presenter: bool, ticks_px: float | None = None) -> int:
    """Pixels under the last row: its tick labels (``ticks_px`` tall) and the axis title."""
    ticks_px = 1.6 * font_size(presenter) if ticks_px is None else ticks_px
    return round(ticks_px) + round(1.5 * font_size(presenter)) + 6


PHONE_FIGURE_PX = 358  # a 390-px phone's page, less Streamlit's padding
PHONE_MIN_PANEL_PX = 150  # a head narrower than this prints its labels into each other (65 px on a phone before)


def _panels(layout: dict) -> list[str]:
    """The subplot suffixes ("", "2", …) of a heatmap grid, in order."""
    keys = sorted((k for k in layout if re.fullmatch(r"xaxis[0-9]*", k)), key=lambda k: int(k[5:] or 1))
    return [k[5:] for k in keys if f"yaxis{k[5:]}" in layout]


def _stack_gap_px(x_axis: dict, font: float, titled: bool) -> float:
    """Between stacked panels: the upper one's x tick labels (turned: the longest label) and axis title, then the
    lower one's title."""
    ticks = [str(t) for t in x_axis.get("ticktext") or []]
    turned = x_axis.get("tickangle") == -90
    ticks_px = widest_px(ticks, font) + 0.6 * font if turned else 1.6 * font
    return ticks_px + 1.5 * font + (1.7 * font if titled else 0) + 10


def one_column(figure, width_px: int = PHONE_FIGURE_PX):
    """A heads heatmap laid out again as one column, for a phone: each head the page's width (less its labels), the
    colour bar under the grid. Side by side on a 358-px page each of two heads got 65-90 px and their labels ran
    together. Figures with one column of panels come back as they are; the figure given is never changed (it may be
    a cached one shared by every session)."""
    meta = figure.layout.meta if isinstance(figure.layout.meta, dict) else {}
    if not meta.get("heads_grid"):  # heads_heatmap marks its figures: line charts, the Real heads page's L × h
        return figure  # thumbnails keep their own layout
    layout = figure.layout.to_plotly_json()
    suffixes = _panels(layout)
    if len({tuple(layout[f"xaxis{s}"]["domain"]) for s in suffixes}) < 2:
        return figure  # one column already
    spec = figure.to_dict()  # a deep copy
    layout, font = spec["layout"], float(layout.get("font", {}).get("size", 15))
    plot_px = layout.get("height", 450) - layout["margin"]["t"] - layout["margin"]["b"]
    titles = [a for a in layout.get("annotations", []) if a.get("yref") == "paper" and a.get("yanchor") == "bottom"]
    gap = _stack_gap_px(layout["xaxis"], font, bool(titles))
    sides = []  # each panel's height, px
    for s in suffixes:
        y_axis = layout[f"yaxis{s}"]
        own = (y_axis["domain"][1] - y_axis["domain"][0]) * plot_px
        sides.append(max(PHONE_MIN_PANEL_PX, width_px - 130) if "scaleanchor" in y_axis else own)
    bar_px = 14 + 3.4 * font + 20  # the colour bar under the grid: its title, the bar, its labels
    total = sum(sides) + gap * len(sides) + bar_px  # the last gap holds the last panel's labels
    top = 1.0
    for k, (s, side) in enumerate(zip(suffixes, sides, strict=True)):
        layout[f"xaxis{s}"] |= {"domain": [0.0, 1.0], "title": layout["xaxis"].get("title", {})}
        y_axis = layout[f"yaxis{s}"]
        old_top = y_axis["domain"][1]
        y_axis |= {"domain": [max(0.0, top - side / total), top], "showticklabels": True}
        y_axis["title"] = layout["yaxis"].get("title", {})
        for title in titles:  # the panel's title moves with it (the k-th title is the k-th panel's)
            if title is titles[min(k, len(titles) - 1)] and abs(title["y"] - old_top) < 1e-9:
                title |= {"x": 0.0, "xanchor": "left", "y": top}
        top -= (side + gap) / total
    _bar_below(layout, bar_px / total)
    layout["margin"]["r"] = 10  # nothing beside the grid now (finish_figure held room for the bar there)
    layout.pop("width", None)
    layout["margin"]["b"] = round(2 * font + 20) if "legend" in layout else 10
    layout["height"] = round(layout["margin"]["t"] + total + layout["margin"]["b"])
    return to_figure(spec)


def _bar_below(layout: dict, bar_top: float) -> None:
    """The colour bar lies under the grid, across it (its top at ``bar_top`` of the plot), so that the heads keep
    the page's width; the masked/NaN legend goes under it."""
    bar = layout.get("coloraxis", {}).get("colorbar")
    if bar is not None:
        bar |= {"orientation": "h", "x": 0.0, "xanchor": "left", "y": bar_top, "yanchor": "top", "thickness": 14}
        bar |= {"lenmode": "fraction", "len": 1.0}
        bar["title"] = bar.get("title", {}) | {"side": "top"}
    if "legend" in layout:
        layout["legend"] |= {"orientation": "h", "x": 0.0, "xanchor": "left", "y": 0.0, "yanchor": "top"}


def row_labels_px(row_labels: list[str], presenter: bool) -> float:
    """The row labels' width and the rotated axis title's, left of the first panel."""
    return widest_px(row_labels, font_size(presenter)) + 2 * font_size(presenter)
