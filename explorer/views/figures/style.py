"""House style shared by every builder: fonts, colour scales per kind of tensor, labels, ticks, and ``_finish``."""

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

BASE_FONT_SIZE = 15
PRESENTER_SCALE = 1.6

MASKED_COLOR = "#7f7f7f"  # mid grey: darker than the white ends of Blues and RdBu, lighter than their dark ends
NAN_COLOR = "#ff00ff"  # magenta: on none of the colour scales used here
ALLOWED_COLOR = "#2166ac"  # the blue end of RdBu

HOVER_EXACT_LIMIT = 150_000  # h * i * j cells; above it, heatmaps are downsampled and hover has no values
HOVER_TOKENS_LIMIT = 8_192  # h * i * j cells; above it, hover names positions but not their tokens
DISPLAY_CELL_BUDGET = 160_000  # cells sent for all heads together once downsampled
MAX_BLOCKS_PER_AXIS = 200  # a downsampled head is at most 200 × 200 cells
MIN_BLOCKS_PER_AXIS = 48
MAX_TICKS = 16  # labelled positions per axis; a panel in a row of several gets fewer once thinned
CELL_TEXT_LIMIT = 144  # print each value inside its cell when a panel has at most this many cells...
CELL_TEXT_COLUMNS = 24  # ...and the panels of a row have at most this many columns together
MAX_PANEL_COLUMNS = 4

_CODE_MAX = 255  # uint8 codes 0..255 span [zmin, zmax] linearly


@dataclass(frozen=True)
class _Kind:
    colorscale: list
    value_name: str  # in hover text and as the colour-bar title
    reduce: str  # "max" or "mean": how a block of cells becomes one displayed cell
    diverging: bool  # symmetric colour range about 0


_KINDS = {
    "weights": _Kind([[k / 8, c] for k, c in enumerate(pcolors.sequential.Blues)], "weight", "max", False),
    "scores": _Kind([[k / 10, c] for k, c in enumerate(pcolors.diverging.RdBu[::-1])], "score", "mean", True),
    "values": _Kind([[k / 10, c] for k, c in enumerate(pcolors.diverging.RdBu[::-1])], "value", "mean", True),
    "mask": _Kind(
        [[0.0, MASKED_COLOR], [0.5, MASKED_COLOR], [0.5, ALLOWED_COLOR], [1.0, ALLOWED_COLOR]], "mask", "max", False
    ),
}
KINDS = tuple(_KINDS)


def head_colors(n: int) -> list[str]:
    """n head colours from plotly's colour-blind-safe "Safe" palette, cycling after 10.

    The palette's last colour (grey) is left out, because grey means "masked" in these figures.
    """
    palette = [c for c in pcolors.qualitative.Safe if c != "rgb(136, 136, 136)"]
    return [palette[k % len(palette)] for k in range(n)]


def png_config(filename: str) -> dict:
    """The ``config`` for ``st.plotly_chart``: the toolbar's camera button saves ``filename``.png at 2× scale."""
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
    text = re.sub(r"<[^>]*>", " ", title)  # drop <b>, <br> and the like
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "figure"


def _escape(label: object) -> str:
    """Token text is shown as plotly pseudo-HTML; a token such as "<|endoftext|>" must not be read as a tag."""
    return html.escape(str(label), quote=False)


def _labels(labels: Sequence[object] | None, n: int, what: str) -> list[str]:
    if labels is None:
        return [str(k) for k in range(n)]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} {what} labels for {n} {what}s")
    return [_escape(label) for label in labels]


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k that is at least raw."""
    if raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))


def _tick_positions(n: int, max_ticks: int = MAX_TICKS) -> list[int]:
    """Every position when there are at most MAX_TICKS, else every 2nd, 5th, 10th, 20th, ... up to max_ticks."""
    if n <= MAX_TICKS:
        return list(range(n))
    raw = n / max_ticks
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)  # integers: no 2.5
    return list(range(0, n, max(1, int(step))))


def _axis_ticks(labels: list[str], max_ticks: int = MAX_TICKS) -> dict:
    positions = _tick_positions(len(labels), max_ticks)
    return {"tickmode": "array", "tickvals": positions, "ticktext": [labels[k] for k in positions]}


def _font(presenter: bool, factor: float = 1.0) -> int:
    return round(BASE_FONT_SIZE * factor * (PRESENTER_SCALE if presenter else 1.0))


def _finish(
    spec: dict,
    title: str,
    presenter: bool,
    *,
    subtitle: str | None = None,
    height: int | None = None,
    above_plot_px: int = 0,
) -> go.Figure:
    """The house template on a plain figure dict, then the one conversion to a figure object.

    Large fonts, white background, tight margins, a PNG filename. The title (and subtitle) sit at the top of the
    figure; above_plot_px is room for what sits between them and the plot area (subplot titles, head bands).
    Figures are built as dicts because plotly validates every property set on a figure object, which made a
    figure cost 20× its JSON; the dict is checked against plotly's schema in the tests instead
    (``tests/test_figures.py``), so it is wrapped here without validating it again.
    """
    title_px, subtitle_px = _font(presenter, 1.3), _font(presenter, 0.85)
    title_layout = {
        "text": title,
        "font": {"size": title_px},
        "x": 0.01,
        "xanchor": "left",
        "yref": "container",
        "y": 1,
        "yanchor": "top",
        "pad": {"t": 10},
    }
    top = 10 + round(1.5 * title_px) + 8 + above_plot_px
    if subtitle:
        title_layout["subtitle"] = {"text": subtitle, "font": {"size": subtitle_px, "color": "#555"}}
        top += round(1.5 * subtitle_px)
    layout = spec.setdefault("layout", {})
    layout.update(
        template=_NO_TEMPLATE,
        title=title_layout,
        font={"size": _font(presenter), "color": "#222"},
        hoverlabel={"font": {"size": _font(presenter)}},
        paper_bgcolor="white",
        plot_bgcolor="white",
        margin={"l": 10, "r": 10, "t": top, "b": 10},
        meta={"filename": _slug(title)},
    )
    for letter in "xy":
        axes = [key for key in layout if re.fullmatch(f"{letter}axis[0-9]*", key)] or [f"{letter}axis"]
        for key in axes:
            layout.setdefault(key, {})["automargin"] = True
    if height is not None:
        layout["height"] = height
    return to_figure(spec)


# plotly's "none" template as it appears in figure JSON: no styling beyond plotly.js's own defaults.
_NO_TEMPLATE = {"data": {"scatter": [{"type": "scatter"}]}}


def to_figure(spec: dict) -> go.Figure:
    """A figure object around a figure dict, without plotly's per-property validation (see ``_finish``)."""
    return go.Figure(spec, _validate=False)


def _rgb(color: str) -> tuple[int, int, int]:
    if color.startswith("#"):
        return tuple(int(color[k : k + 2], 16) for k in (1, 3, 5))
    return tuple(int(float(v)) for v in re.findall(r"[\d.]+", color)[:3])


def _tint(color: str, amount: float) -> str:
    """``color`` mixed with white; amount 1 is the colour itself."""
    r, g, b = (round(255 - (255 - v) * amount) for v in _rgb(color))
    return f"rgb({r}, {g}, {b})"


def _text_color_on(color: str) -> str:
    r, g, b = _rgb(color)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "white"
