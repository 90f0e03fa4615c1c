"""A heatmap's traces, head by head: what is sent (exact values or shrunk blocks), hover, the −∞ and NaN overlays."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .downsample import block_factor, block_reduce, quantise
from .style import (
    COLOR_KINDS,
    DISPLAY_CELL_BUDGET,
    MASKED_COLOR,
    MAX_BLOCKS_PER_AXIS,
    MAX_PANEL_COLUMNS,
    MIN_BLOCKS_PER_AXIS,
    NAN_COLOR,
    font_size,
)


def as_heads(matrices: np.ndarray) -> np.ndarray:
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


def legend_swatch(name: str, color: str, presenter: bool) -> dict:
    return {
        "type": "scatter",
        "x": [None],
        "y": [None],
        "mode": "markers",
        "name": name,
        "marker": {
            "symbol": "square",
            "size": font_size(presenter),
            "color": color,
            "line": {"width": 1, "color": "#444"},
        },
        "hoverinfo": "skip",
        "showlegend": True,
        "meta": {"role": "legend"},
        "xaxis": "x",
        "yaxis": "y",
    }


@dataclass(frozen=True)
class ShownMatrix:
    """What a heatmap sends for its heads: the exact values, or block-reduced uint8-ready values."""

    values: np.ndarray  # (h, i', j'): z itself when exact, else one cell per block
    exact: bool
    place: dict  # where the cells sit: thin gaps between exact cells, or uniform bricks (x0, dx, y0, dy)
    clip_x: dict
    clip_y: dict
    subtitle: str | None


def shown_matrix(z: np.ndarray, kind: str, hover_exact_limit: int) -> ShownMatrix:
    """Exact up to hover_exact_limit cells; beyond, each head shrunk by the kind's block reduction."""
    h, i, j = z.shape
    if h * i * j <= hover_exact_limit:
        # Small matrices get a thin rule between cells (the page's background), like a printed table.
        return ShownMatrix(z, True, {"xgap": 1, "ygap": 1} if max(i, j) <= 32 else {}, {}, {}, None)
    reduce = COLOR_KINDS[kind].reduce
    side = int(np.clip(math.sqrt(DISPLAY_CELL_BUDGET / h), MIN_BLOCKS_PER_AXIS, MAX_BLOCKS_PER_AXIS))
    fi, fj = block_factor(i, side), block_factor(j, side)
    shown = block_reduce(z, fi, fj, reduce)  # (h, i / fi, j / fj)
    # Uniform bricks (x0, dx) rather than an array of edges: plotly.js then paints the image in one pass
    # instead of one rectangle per cell (4× faster in Chromium at 8 heads × 512²). A last, shorter block
    # overhangs the last position; the axes' autorange stops at the matrix's edge (autorangeoptions).
    place = {"x0": (fj - 1) / 2, "dx": fj, "y0": (fi - 1) / 2, "dy": fi}
    what = "fraction kept in" if kind == "keep" else f"{reduce} of"
    return ShownMatrix(
        shown,
        False,
        place,
        {"autorangeoptions": {"minallowed": -0.5, "maxallowed": j - 0.5}},
        {"autorangeoptions": {"minallowed": -0.5, "maxallowed": i - 0.5}},
        f"{h * i * j:,} cells: each shown cell is the {what} a {fi}×{fj} block (hover gives positions only)",
    )


def hover_text(kind: str, rows: list[str], cols: list[str], row_title: str, col_title: str, tokens: bool):
    """The exact cells' hover template, and the (i, j, 2) token pairs it reads when tokens is True."""
    value = (
        "%{z:.0f} (1 = may attend, 0 = blocked)" if kind == "mask" else f"{COLOR_KINDS[kind].value_name} = %{{z:.4f}}"
    )
    if not tokens:
        return f"{row_title} %{{y}}<br>{col_title} %{{x}}<br>{value}", None
    customdata = np.empty((len(rows), len(cols), 2), dtype=object)  # (i, j, [row token, column token])
    customdata[..., 0] = np.array(rows, dtype=object)[:, None]
    customdata[..., 1] = np.array(cols, dtype=object)[None, :]
    return f"{row_title} %{{y}} “%{{customdata[0]}}”<br>{col_title} %{{x}} “%{{customdata[1]}}”<br>{value}", customdata


def widest_value(z: np.ndarray) -> str:
    """The longest of the values printed to 2 decimals: it sits at one end of the range."""
    finite = z[np.isfinite(z)]
    if not finite.size:
        return "NaN"
    return max((f"{float(finite.min()):.2f}", f"{float(finite.max()):.2f}"), key=len)


def head_traces(z, shown: ShownMatrix, k: int, lo: float, hi: float, name: str, look: dict) -> list[dict]:
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
            main |= {"texttemplate": look.get("text_template", "%{z:.2f}"), "textfont": look["text_font"]}
    else:
        main = {
            "type": "heatmap",
            "z": quantise(shown.values[k], lo, hi),
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
