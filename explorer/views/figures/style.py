"""House style shared by every builder: fonts, colour scales per kind of tensor, labels, ticks, and ``finish_figure``.

Colour scales, chosen to read for colour-blind viewers and on a light or a dark page:

* magnitudes (attention weights, a dropout keep mask's fraction kept): viridis. It is perceptually uniform and
  ordered by lightness, so it reads in greyscale and under every common colour-vision deficiency, and its dark
  end (a weight of 0) does not glare on a dark page or a projector, where Blues' white end did.
* signed values (scores, Q/K/V, context, differences): RdBu reversed, blue below 0 and red above, white at 0.
  ColorBrewer rates it colour-blind safe (blue against red survives protanopia and deuteranopia), and the sign
  of a score is what a student reads first.
* masks: two colours, blue "may attend" and grey "blocked" (grey is on none of the scales above).
* heads: ``HEAD_COLORS``, sixteen colours that stay apart in light and dark mode and for colour-blind viewers.

Figures set no background and no font colour: the page's theme (light or dark) gives both.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.colors as pcolors
import plotly.graph_objects as go

from explorer.views.figures.margins import hold_margins
from explorer.views.figures.text_width import MARKUP
from explorer.views.markdown_text import escape_markdown  # noqa: F401  (figures re-exports it; one helper)

BASE_FONT_SIZE = 15
PRESENTER_SCALE = 1.6
# The page's body type in px, which numbers printed in cells must not be smaller than (issue 42): Streamlit's 1rem,
# and in presenter mode sidebar.py's 22 px root × 1.2rem paragraphs (26.4 px, rounded up).
BODY_TYPE_PX = {False: 16, True: 27}

MASKED_COLOR = "#7f7f7f"  # mid grey: no grey on viridis, and darker than RdBu's white middle
NAN_COLOR = "#ff00ff"  # magenta: on none of the colour scales used here
ALLOWED_COLOR = "#2166ac"  # the blue end of RdBu
ROUNDING_COLOR = "#c8c8c8"  # light grey: a difference that is float rounding, "equal" (lighter than MASKED_COLOR)

HOVER_EXACT_LIMIT = 150_000  # h * i * j cells; above it, heatmaps are downsampled and hover has no values
HOVER_TOKENS_LIMIT = 8_192  # h * i * j cells; above it, hover names positions but not their tokens
DISPLAY_CELL_BUDGET = 160_000  # cells sent for all heads together once downsampled
MAX_BLOCKS_PER_AXIS = 200  # a downsampled head is at most 200 × 200 cells
MIN_BLOCKS_PER_AXIS = 48
MAX_TICKS = 16  # labelled positions per axis at most beyond ALL_LABELS_UP_TO; fewer when fewer fit (heatmap_layout)
ALL_LABELS_UP_TO = 32  # up to this many tokens every one is labelled (labels turn, panels wrap to make room)
TICK_LABEL_CHARS = 14  # a longer token is cut to this many characters (with "…") on an axis; hover has it whole
MAX_PANEL_COLUMNS = 4

CODE_MAX = 255  # uint8 codes 0..255 span [zmin, zmax] linearly

TRANSPARENT = "rgba(0,0,0,0)"
GRID_COLOR = "rgba(128,128,128,0.3)"  # reads on a light and on a dark page
# Titles wrap at this many characters: a half-width column of a wide page is about 560 px, and a character of the
# title font about 0.55 of its size (20 px normal, 31 px presenter).
TITLE_CHARS = 50
TITLE_CHARS_PRESENTER = 32
NARROW_FIGURE_PX = 500  # half a wide page on a 1280-px screen with the sidebar open (Step through's right column)
# Half the main column on a 1280-px screen with the sidebar open (two figures to a row, st.columns(2)): 820 px less
# the gap, 402. Planned for 500, their square cells shrank to fit and left blank under them, and titles were cut.
HALF_FIGURE_PX = 400


def half_figure_px(presenter: bool) -> int:
    """The width a figure two to a row is planned for: presenter mode stacks them in a wider column."""
    return NARROW_FIGURE_PX if presenter else HALF_FIGURE_PX


@dataclass(frozen=True)
class ColorKind:
    colorscale: list
    value_name: str  # in hover text and as the colour-bar title
    reduce: str  # "max" or "mean": how a block of cells becomes one displayed cell
    diverging: bool  # symmetric colour range about 0


SEQUENTIAL = [[k / 9, c] for k, c in enumerate(pcolors.sequential.Viridis)]
DIVERGING = [[k / 10, c] for k, c in enumerate(pcolors.diverging.RdBu[::-1])]

# reduce: a weight is sparse (one key can take it all), so a block shows its max; signed values show their mean;
# a keep mask shows its mean, the fraction kept, which is what the page's metric says.
COLOR_KINDS = {
    "weights": ColorKind(SEQUENTIAL, "weight", "max", False),
    "keep": ColorKind(SEQUENTIAL, "kept", "mean", False),
    "scores": ColorKind(DIVERGING, "score", "mean", True),
    "values": ColorKind(DIVERGING, "value", "mean", True),
    "difference": ColorKind(DIVERGING, "difference", "mean", True),
    "mask": ColorKind(
        [[0.0, MASKED_COLOR], [0.5, MASKED_COLOR], [0.5, ALLOWED_COLOR], [1.0, ALLOWED_COLOR]], "mask", "max", False
    ),
}
KINDS = tuple(COLOR_KINDS)


# The one source of head colours: head k is HEAD_COLORS[k] in every figure and legend (heatmap bands, head view,
# bar and line charts). Okabe–Ito's seven (no black) first, then nine chosen against them: no grey (masked), no
# magenta (NaN). Every colour has a contrast of at least 1.7:1 on white and 2.7:1 on Streamlit's dark background
# (#0e1117); the closest pair is ΔE 14 apart for normal vision and at least 5.6 under simulated protanopia,
# deuteranopia and tritanopia (Machado 2009), where plotly's Safe palette ran out at ten and head 10 was head 0.
HEAD_COLORS = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#D55E00",  # vermillion
    "#56B4E9",  # sky blue
    "#CDBA2C",  # yellow
    "#7766DD",  # violet
    "#117733",  # dark green
    "#88CCEE",  # pale cyan
    "#B8336A",  # raspberry
    "#999933",  # olive
    "#AA4499",  # purple
    "#8C564B",  # brown
    "#F4A6A6",  # pink
    "#3A5A8C",  # slate blue
)


def head_colors(n: int) -> list[str]:
    """The colours of heads 0 … n − 1: one each up to 16 heads, then the palette again."""
    return [HEAD_COLORS[k % len(HEAD_COLORS)] for k in range(n)]


def legend_px(entries: int, presenter: bool) -> int:
    """The plot height a legend of ``entries`` lines needs beside it: a figure at least this tall cuts none (at 16
    heads the bar charts' legend stopped at head 10)."""
    return round(entries * (1.3 * font_size(presenter) + 15)) + 30  # a line entry: 32.5 px at 15 px type (Chromium)


def png_config(filename: str) -> dict:
    """The plotly ``config`` a chart is drawn with: the toolbar's camera button saves ``filename``.png at 2× scale."""
    return {
        "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2},
        "displaylogo": False,
    }


def png_config_for(fig: go.Figure) -> dict:
    """``png_config`` with the filename a builder stored in ``fig.layout.meta``."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, Mapping) else {}
    return png_config(meta.get("filename", "figure"))


def decode_array(array) -> np.ndarray:
    """The inverse of plotly's array encoding in figure JSON: a plain list, or {dtype, bdata, shape} base64.

    Tests and the load test read figures back with it, to compare what was sent with the module's numbers.
    """
    if isinstance(array, dict) and "bdata" in array:
        data = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
        shape = array.get("shape")
        if isinstance(shape, str):
            shape = [int(n) for n in shape.split(",")]
        return data.reshape(shape) if shape else data
    return np.asarray(array, dtype=float)


def figure_nbytes(fig: go.Figure) -> int:
    """Size of the figure's JSON, which is roughly what the browser receives."""
    return len(fig.to_json())


def _slug(title: str) -> str:
    text = MARKUP.sub(" ", title)  # drop <b>, <br> and the like
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "figure"


def escape_label(label: object) -> str:
    """Token text is shown as plotly pseudo-HTML; a token such as "<|endoftext|>" must not be read as a tag."""
    return html.escape(str(label), quote=False)


def tick_labels(labels: Sequence[object] | None, n: int, what: str) -> list[str]:
    if labels is None:
        return [str(k) for k in range(n)]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} {what} labels for {n} {what}s")
    return [escape_label(label) for label in labels]


def nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k that is at least raw."""
    if raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))


def shorten(label: str, limit: int = TICK_LABEL_CHARS) -> str:
    """An escaped label cut to limit characters for an axis (cut before escaping, so no entity is split)."""
    plain = html.unescape(label)
    return label if len(plain) <= limit else escape_label(plain[: limit - 1] + "…")


def _tick_positions(n: int, max_ticks: int = MAX_TICKS) -> list[int]:
    """Every position up to ``ALL_LABELS_UP_TO``; beyond, every 2nd, 5th, 10th, 20th, … and always the last.

    At most max(2, max_ticks) positions; the first and the last are always labelled (a 64-token axis ended at 60).
    """
    if n <= ALL_LABELS_UP_TO:
        return list(range(n))
    most = max(2, max_ticks)
    power = 10 ** math.floor(math.log10(max(1.0, (n - 1) / most)))
    for step in (m * power * 10**e for e in range(3) for m in (1, 2, 5)):  # integers: no 2.5
        positions = list(range(0, n, int(step)))
        if n - 1 - positions[-1] < step / 2 and len(positions) > 1:
            positions[-1] = n - 1  # the last label would crowd the one before: it takes that one's place
        elif positions[-1] != n - 1:
            positions.append(n - 1)
        if len(positions) <= most:
            return positions
    return [0, n - 1]


def axis_ticks(labels: list[str], max_ticks: int = MAX_TICKS) -> dict:
    positions = _tick_positions(len(labels), max_ticks)
    return {"tickmode": "array", "tickvals": positions, "ticktext": [labels[k] for k in positions]}


def wrap(text: str, max_chars: int) -> str:
    """Break a title at spaces into lines of at most max_chars characters (plotly cuts a long title instead)."""
    if "<br>" in text or len(text) <= max_chars:
        return text
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= max_chars:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def font_size(presenter: bool, factor: float = 1.0) -> int:
    return round(BASE_FONT_SIZE * factor * (PRESENTER_SCALE if presenter else 1.0))


def cell_font_size(presenter: bool) -> int:
    """Numbers printed inside cells: the page's body type, so a projector's back row reads them as it reads the text
    (a cell too small for them leaves them out; hover and "Show as table" hold every value)."""
    return BODY_TYPE_PX[presenter]


def finish_figure(
    spec: dict,
    title: str,
    presenter: bool,
    *,
    subtitle: str | None = None,
    height: int | None = None,
    above_plot_px: int = 0,
    plot_px: int | None = None,
    below_px: int = 10,
    legend_entries: int = 0,
) -> go.Figure:
    """The house template on a plain figure dict, then the one conversion to a figure object.

    Large fonts, no background and no font colour (the page's light or dark theme gives them), tight margins, a
    PNG filename. The title (and subtitle) sit at the top of the figure, wrapped so that they are never cut;
    above_plot_px is room for what sits between them and the plot area (subplot titles, head bands);
    legend_entries, the legend's length, makes the figure tall enough to show all of it.
    Figures are built as dicts because plotly validates every property set on a figure object, which made a
    figure cost 20× its JSON; the dict is checked against plotly's schema in the tests instead
    (``tests/views/test_figure_builders.py``), so it is wrapped here without validating it again.
    """
    title_px, subtitle_px = font_size(presenter, 1.3), font_size(presenter, 0.85)
    wrapped = wrap(title, TITLE_CHARS_PRESENTER if presenter else TITLE_CHARS)
    title_layout = {
        "text": wrapped,
        "font": {"size": title_px},
        "x": 0.01,
        "xanchor": "left",
        "yref": "container",
        "y": 1,
        "yanchor": "top",
        # plotly.js centres a title of n lines on its anchor line, lifting it (n − 1) / 2 lines: pushed down by as
        # much, it starts at the top instead of being cut (checked in Chromium).
        "pad": {"t": 10 + round(1.3 * title_px * wrapped.count("<br>") / 2)},
    }
    top = 10 + round(1.3 * title_px) * (wrapped.count("<br>") + 1) + 8 + above_plot_px
    if subtitle:
        subtitle = wrap(subtitle, round(TITLE_CHARS * 1.3 if not presenter else TITLE_CHARS_PRESENTER * 1.3))
        title_layout["subtitle"] = {"text": subtitle, "font": {"size": subtitle_px}}
        top += round(1.4 * subtitle_px) * (subtitle.count("<br>") + 1)
    layout = _no_tick_marks_without_labels(spec.setdefault("layout", {}))
    layout.update(
        template=_NO_TEMPLATE,
        title=title_layout,
        font={"size": font_size(presenter)},
        hoverlabel={"font": {"size": font_size(presenter)}},
        paper_bgcolor=TRANSPARENT,
        plot_bgcolor=TRANSPARENT,
        margin={"l": 10, "r": 10, "t": top, "b": below_px},
        meta={"filename": _slug(title)},
    )
    below_px = hold_margins(_set_text_sizes(layout, presenter), spec.get("data", []))["b"]  # sizes, then margins
    if plot_px is not None:  # the plot area's height is given: the figure is that plus its margins
        height = top + plot_px + below_px
    if legend_entries:  # tall enough for every legend entry beside the plot: none cut
        height = max(height or 0, top + legend_px(legend_entries, presenter) + below_px)
    if height is not None:
        layout["height"] = height
    return to_figure(spec)


# plotly.js's default on a numeric axis and a colour bar, "hide past div", measures every tick label's box after each
# label is placed: n labels, n² forced layouts of the page (0.5 s of a 6-token slider move in the app, issue 20).
# The figures are sized so that every label fits (tests/views/test_figure_rules.py), so nothing is hidden either way.
NO_OVERFLOW_CHECK = "allow"


def _no_tick_marks_without_labels(layout: dict) -> dict:
    """An axis that hides its tick labels draws no tick marks either. The page's template colours every axis's ticks
    (explorer/glue/frame/chart.js), and plotly.js draws coloured ticks "outside" unless a figure says otherwise: a
    stray dash beside an unnamed axis (seen on Attention variants' K/V strip)."""
    for key, axis in layout.items():
        if re.fullmatch("[xy]axis[0-9]*", key) and axis.get("showticklabels") is False:
            axis.setdefault("ticks", "")
    return layout


def _set_text_sizes(layout: dict, presenter: bool) -> dict:
    """Every axis's tick labels and title, the colour bar's and the legend's text at the figure's font size.

    Set on each, not only as layout.font: a page theme's template (Streamlit's) sets these sizes itself, smaller,
    and a template's axis font outranks layout.font.
    """
    size = font_size(presenter)
    for letter in "xy":
        axes = [key for key in layout if re.fullmatch(f"{letter}axis[0-9]*", key)] or [f"{letter}axis"]
        for key in axes:
            axis = layout.setdefault(key, {})
            axis["automargin"] = True
            axis["ticklabeloverflow"] = NO_OVERFLOW_CHECK
            axis["tickfont"] = {"size": size} | axis.get("tickfont", {})
            if "title" in axis:
                axis["title"] = {"font": {"size": size}} | axis["title"]
    colorbar = layout.get("coloraxis", {}).get("colorbar")
    if colorbar is not None:
        colorbar["tickfont"] = {"size": size}
        colorbar["ticklabeloverflow"] = NO_OVERFLOW_CHECK
        colorbar["title"] = {"font": {"size": size}} | colorbar.get("title", {})
    layout["legend"] = {"font": {"size": size}} | layout.get("legend", {})
    return layout


# plotly's "none" template as it appears in figure JSON: no styling beyond plotly.js's own defaults.
_NO_TEMPLATE = {"data": {"scatter": [{"type": "scatter"}]}}


def to_figure(spec: dict) -> go.Figure:
    """A figure object around a figure dict, without plotly's per-property validation (see ``finish_figure``)."""
    return go.Figure(spec, _validate=False)


def _rgb(color: str) -> tuple[int, int, int]:
    if color.startswith("#"):
        return tuple(int(color[k : k + 2], 16) for k in (1, 3, 5))
    return tuple(int(float(v)) for v in re.findall(r"[\d.]+", color)[:3])


def tint(color: str, amount: float) -> str:
    """``color`` mixed with white; amount 1 is the colour itself."""
    r, g, b = (round(255 - (255 - v) * amount) for v in _rgb(color))
    return f"rgb({r}, {g}, {b})"


def text_color_on(color: str) -> str:
    r, g, b = _rgb(color)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "white"
