"""Dark mode: a figure's colour scales redrawn for a dark page (``for_theme``), everything else left to the theme.

On a dark page RdBu's white midpoint made near-zero scores the brightest cells on the screen, and viridis's darkest
purple (#440154, 1.4:1 on #0b0d12) merged into the background. So on a dark page the diverging scale's midpoint is
the background itself and both signs grow lighter as they grow larger (the light scale's order of lightness, turned
over for a dark page); viridis starts at its third colour (2.3:1 on the background).
"""

from __future__ import annotations

import plotly.colors as pcolors
import plotly.graph_objects as go

from .style import DIVERGING, ROUNDING_COLOR, SEQUENTIAL, to_figure

DARK_BACKGROUND = "#0b0d12"  # .streamlit/config.toml [theme.dark] backgroundColor
LIGHT_BACKGROUND = "#ffffff"

# Blue below 0, red above, the background at 0; lightness grows with |value| on both sides (hue gives the sign).
DIVERGING_DARK = [
    [0.0, "#b3dcff"],
    [0.2, "#5aa7e6"],
    [0.4, "#1f5d99"],
    [0.5, DARK_BACKGROUND],
    [0.6, "#8f2f1f"],
    [0.8, "#e0663f"],
    [1.0, "#ffc4a3"],
]
# viridis from its third colour (#3e4989, 2.3:1 on the background): a weight of 0 is still the darkest cell
SEQUENTIAL_DARK = [[k / 7, c] for k, c in enumerate(pcolors.sequential.Viridis[2:])]

# "equal to rounding": a grey nearer the background than the masked grey (#7f7f7f), as #c8c8c8 is on white
ROUNDING_DARK = "#3b414d"
_SWAPS = {
    "diverging": (DIVERGING, DIVERGING_DARK),
    "sequential": (SEQUENTIAL, SEQUENTIAL_DARK),
    "rounding": ([[0.0, ROUNDING_COLOR], [1.0, ROUNDING_COLOR]], [[0.0, ROUNDING_DARK], [1.0, ROUNDING_DARK]]),
}


def _same_scale(a, b) -> bool:
    try:
        return len(a) == len(b) and all(float(p) == float(q) and c == d for (p, c), (q, d) in zip(a, b, strict=True))
    except (TypeError, ValueError):
        return False  # a named scale ("Viridis") or another shape: not one of ours


def _dark_scale(scale):
    """The dark page's version of one of the house scales, or None when ``scale`` is not one of them."""
    for light, dark in _SWAPS.values():
        if _same_scale(scale, light):
            return dark
    return None


def _coloraxes(layout: dict) -> list[str]:
    return [key for key in layout if key.startswith("coloraxis")]


def for_theme(figure: go.Figure, dark: bool) -> go.Figure:
    """``figure`` as a ``dark`` (or light) page should draw it: the same object when nothing changes (a light page,
    or no house colour scale), else a copy, since built figures are cached and shared between sessions."""
    if not dark:
        return figure
    layout = figure.layout
    axes = [key for key in _coloraxes(layout.to_plotly_json()) if _dark_scale(layout[key].colorscale) is not None]
    traces = [k for k, t in enumerate(figure.data) if _dark_scale(getattr(t, "colorscale", None)) is not None]
    if not axes and not traces:
        return figure
    spec = figure.to_dict()  # a deep copy: the cached figure stays as it is
    for key in axes:
        spec["layout"][key]["colorscale"] = _dark_scale(spec["layout"][key]["colorscale"])
    for k in traces:
        spec["data"][k]["colorscale"] = _dark_scale(spec["data"][k]["colorscale"])
    return to_figure(spec)
