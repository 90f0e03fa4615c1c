"""Pure plotly figure builders: numpy arrays and labels in, ``go.Figure`` out.

No streamlit and no torch here, so every builder can be tested on small arrays and used from a notebook.

Axis letters: h heads, i query position (matrix rows), j key position (matrix columns).

Conventions shared by every builder:

* Matrices read like printed matrices: row 0 at the top, and numeric axes whose ticks carry the token
  text (``tickvals``/``ticktext``). Categorical axes would merge duplicate tokens such as two "the".
* One colour scale per figure, shared by every head, with one colour bar.
* Masked scores (−∞) and NaN are not colours on the scale. They are drawn by overlay traces in fixed
  colours (``MASKED_COLOR``, ``NAN_COLOR``) and named in the legend.
* Heads, tokens and columns are numbered from 0, as in the tensors.
* JSON size sets three regimes, by the number of cells h * i * j. Up to ``HOVER_TOKENS_LIMIT`` (8,192),
  hover gives both tokens and the exact value; the token text costs about 20 bytes a cell, as plotly needs
  it per cell and per head. Up to ``HOVER_EXACT_LIMIT`` (150,000), hover gives positions and the exact
  value (float32, about 5.3 bytes a cell). Beyond it, heatmaps are downsampled for display and sent as
  uint8 codes, so a 16 × 1024 × 1024 figure stays a few hundred KB of JSON.
* ``presenter=True`` makes every font about 1.6× larger, for a projector.
* ``fig.layout.meta["filename"]`` names the PNG that plotly's toolbar downloads. In Streamlit::

      st.plotly_chart(fig, theme=None, config=png_config_for(fig))

Every trace a heatmap builder adds carries ``meta={"role": ..., "head": ...}``, with role one of
"values", "masked", "nan" or "legend", so that tests and pages can find traces without relying on order.
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


# ---------------------------------------------------------------------------------------------------------------
# Small helpers shared by the builders
# ---------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------
# Colour range, downsampling, quantising
# ---------------------------------------------------------------------------------------------------------------


def _color_range(z: np.ndarray, kind: _Kind, name: str, zmin: float | None, zmax: float | None) -> tuple[float, float]:
    """The one colour range shared by every head, from the finite values of all heads unless given."""
    if name == "mask":
        return 0.0, 1.0
    if name == "weights":
        lo, hi = 0.0 if zmin is None else zmin, 1.0 if zmax is None else zmax
    elif zmin is not None and zmax is not None:
        lo, hi = zmin, zmax
    else:
        lo, hi = math.inf, -math.inf
        for head in z.reshape(-1, *z.shape[-2:]):  # one head at a time: a 16 × 1024² stack is not copied whole
            finite = head[np.isfinite(head)]
            if finite.size:
                lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
        if lo > hi:  # no finite value at all
            lo, hi = (-1.0, 1.0) if kind.diverging else (0.0, 1.0)
        elif kind.diverging:
            m = max(abs(lo), abs(hi))
            lo, hi = -m, m
        lo, hi = (lo if zmin is None else zmin), (hi if zmax is None else zmax)
    if not hi > lo:  # a constant matrix: give the scale some width around the value
        lo, hi = lo - 0.5, hi + 0.5
    return float(lo), float(hi)


def _block_factor(n: int, blocks: int) -> int:
    return max(1, math.ceil(n / blocks))


def _block_reduce(z: np.ndarray, fi: int, fj: int, how: str) -> np.ndarray:
    """(h, i, j) -> (h, ceil(i / fi), ceil(j / fj)), one head at a time, so temporaries stay one head big."""
    return np.concatenate([_block_reduce_stack(z[k : k + 1], fi, fj, how) for k in range(z.shape[0])])


def _block_reduce_stack(z: np.ndarray, fi: int, fj: int, how: str) -> np.ndarray:
    """(h, i, j) -> (h, ceil(i / fi), ceil(j / fj)): each fi × fj block becomes one cell.

    how="max" for attention weights and masks. Weights are sparse: a head that attends to one key puts
    a single 1 in each row, and a block mean would divide it by fi * fj, painting the stripe nearly white,
    while the block max keeps it at full strength. For a mask, max means "some query in the block may attend".
    how="mean" for scores and values. They are dense and signed, and a max would hide every negative
    value; the mean shows the block's typical level.

    −∞ cells are skipped, so a block is −∞ only when all of its cells are. A block holding any NaN is NaN,
    so that a NaN (a fully masked row's softmax, say) never disappears from view.
    """
    h, i, j = z.shape
    padded = z
    if i % fi or j % fj:  # padding counts as masked
        padded = np.pad(z, ((0, 0), (0, -i % fi), (0, -j % fj)), constant_values=-np.inf)
    blocks = padded.reshape(h, padded.shape[1] // fi, fi, padded.shape[2] // fj, fj)
    nan = np.isnan(blocks)
    any_nan = bool(nan.any())
    if how == "max":
        out = (np.where(nan, -np.inf, blocks) if any_nan else blocks).max(axis=(2, 4))
    else:
        usable = ~nan & (blocks != -np.inf)
        if usable.all():  # every cell is a number (scores before masking, values): a plain block mean
            out = blocks.sum(axis=(2, 4), dtype=np.float64) / (fi * fj)
        else:
            total = np.where(usable, blocks, 0.0).sum(axis=(2, 4), dtype=np.float64)
            count = usable.sum(axis=(2, 4))
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(count > 0, total / np.maximum(count, 1), -np.inf)
    out = out.astype(np.float32)
    if any_nan:
        out[nan.any(axis=(2, 4))] = np.nan
    return out


def _quantise(z: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Finite values to uint8 codes 0..255 spanning [lo, hi]; −∞ and NaN become 0 (an overlay covers them)."""
    scaled = (np.nan_to_num(z, nan=lo, neginf=lo, posinf=hi) - lo) / (hi - lo) * _CODE_MAX
    return np.clip(np.rint(scaled), 0, _CODE_MAX).astype(np.uint8)


def _colorbar_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    step = _nice_step((hi - lo) / 5)
    ticks = np.arange(math.ceil(lo / step) * step, hi + step * 1e-6, step)
    return [float(t) for t in ticks], [f"{t:.3g}" for t in ticks]


# ---------------------------------------------------------------------------------------------------------------
# Heatmaps
# ---------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------
# The reshape diagram
# ---------------------------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------------------------
# Line and bar charts
# ---------------------------------------------------------------------------------------------------------------


def _log_axis(values: Sequence[float], label_all: bool = False) -> dict:
    """A log axis labelled in full numbers: the values themselves when few (label_all), else 1-2-5 steps.

    Left alone, plotly labels a short log range with bare digits (20 is drawn as "2").
    """
    positive = sorted({float(v) for v in values if v is not None and np.isfinite(v) and v > 0})
    if not positive:
        return {"type": "log"}
    if label_all and len(positive) <= 12:
        ticks = positive
    else:
        lo, hi = math.floor(math.log10(positive[0])), math.ceil(math.log10(positive[-1]))
        steps = (1, 2, 5) if hi - lo <= 3 else (1,)
        ticks = [
            m * 10.0**e
            for e in range(lo, hi + 1)
            for m in steps
            if positive[0] / 1.5 <= m * 10.0**e <= positive[-1] * 1.5
        ]
    return {"type": "log", "tickmode": "array", "tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def line_chart(
    xs: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    x_title: str,
    y_title: str,
    log_x: bool = False,
    log_y: bool = False,
    presenter: bool = False,
) -> go.Figure:
    """One line per named series over shared xs: loss and accuracy curves, cost against sequence length."""
    colors = head_colors(len(series))
    mode = "lines+markers" if len(xs) <= 50 else "lines"
    data = []
    for color, (name, ys) in zip(colors, series.items(), strict=True):
        if len(ys) != len(xs):
            raise ValueError(f"series {name!r} has {len(ys)} values for {len(xs)} xs")
        data.append(
            {
                "type": "scatter",
                "x": list(xs),
                "y": list(ys),
                "name": _escape(name),
                "mode": mode,
                "line": {"color": color, "width": 3},
                "marker": {"size": 8},
                "hovertemplate": f"{_escape(name)}<br>{x_title} = %{{x}}<br>{y_title} = %{{y:.4g}}<extra></extra>",
            }
        )
    grid = {"showgrid": True, "gridcolor": "#e5e5e5", "zeroline": False}
    all_ys = [y for ys in series.values() for y in ys]
    layout = {
        "xaxis": {"title": {"text": x_title}} | (_log_axis(xs, label_all=True) if log_x else {"type": "linear"}) | grid,
        "yaxis": {"title": {"text": y_title}} | (_log_axis(all_ys) if log_y else {"type": "linear"}) | grid,
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
        "hovermode": "x unified",
    }
    return _finish({"data": data, "layout": layout}, title, presenter, height=round(420 * (1.25 if presenter else 1.0)))


def bar_chart(
    labels: Sequence[object],
    values: Sequence[float],
    *,
    title: str,
    y_title: str,
    colors: Sequence[str] | None = None,
    presenter: bool = False,
) -> go.Figure:
    """One bar per label, its value printed above it. Bars sit at numeric positions, so duplicate labels stay apart."""
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} labels for {len(values)} values")
    texts = [_escape(label) for label in labels]
    bars = {
        "type": "bar",
        "x": list(range(len(values))),
        "y": list(values),
        "customdata": texts,
        "text": [f"{v:.3g}" for v in values],
        "textposition": "outside",
        "cliponaxis": False,
        "marker": {"color": list(colors) if colors is not None else head_colors(1)[0]},
        "hovertemplate": f"%{{customdata}}<br>{y_title} = %{{y:.4g}}<extra></extra>",
    }
    layout = {
        "xaxis": {"tickmode": "array", "tickvals": list(range(len(values))), "ticktext": texts, "showgrid": False},
        "yaxis": {"title": {"text": y_title}, "showgrid": True, "gridcolor": "#e5e5e5", "rangemode": "tozero"},
    }
    return _finish(
        {"data": [bars], "layout": layout}, title, presenter, height=round(400 * (1.25 if presenter else 1.0))
    )
