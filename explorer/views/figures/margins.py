"""Margins that already hold what plotly.js's automargin would push, so that a figure is laid out and drawn once.

plotly.js lays a figure out, measures its tick labels, colour bar and legend, and where they need more margin than
the layout gives (automargin) lays it out and draws it all again, more than once when one push moves another (issue
20: the defaults' five figures, newPlot in a bare page, 2.16 s → 0.85 s given the margins plotly ends with). Margins
that already hold them are drawn once. automargin stays on: a label wider than estimated still gets its room (at the
cost of the second draw, as before). Label widths are ``text_width``'s estimate, the one every figure uses; the
constants below are plotly's pushes measured at fonts 15 and 24 (ticks outside, title standoff 12, colour bar
thickness 18) less the labels' widths.
Measured against plotly's own margins at the Explorer's defaults and at 8 heads × 512 tokens: every side held, 0–9
px over, and 18 px under one figure whose square cells held its turned labels (tests/views/test_margins.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from explorer.views.figures.text_width import widest_px

MARGIN_SLACK_PX = 1  # plotly redraws on a change of more than 1 px
WIDE_PAGE_PX = 1200  # a figure without its own width: the page's main column on a 1600-px screen is 1140 px


def _edge_axes(layout: dict, letter: str) -> list[dict]:
    """The axes of ``letter`` with tick text that sit on the figure's left (y) or bottom (x) edge."""
    other = "x" if letter == "y" else "y"
    found = []
    for key, axis in layout.items():
        if not re.fullmatch(f"{letter}axis[0-9]*", key) or not axis.get("ticktext"):
            continue
        if axis.get("showticklabels") is False or axis.get("visible") is False or axis.get("side") in ("right", "top"):
            continue
        anchor = layout.get(f"{other}axis{str(axis.get('anchor', ''))[1:]}", {})
        if anchor.get("domain", [0.0, 1.0])[0] <= 1e-9:
            found.append(axis)
    return found


def _square(layout: dict, x_axis: dict) -> bool:
    """Whether the panel on this x axis has square cells (its y axis anchored to it): it may not fill its plot."""
    y_axis = layout.get(f"yaxis{str(x_axis.get('anchor', ''))[1:]}", {})
    return bool(y_axis.get("scaleanchor"))


def _colorbar_px(bar: dict, font: float) -> float | None:
    """The width a vertical colour bar at its default place needs right of the plot, or None (not estimated)."""
    if bar.get("orientation", "v") != "v" or "x" in bar or not bar.get("ticktext"):
        return None
    title = str(bar.get("title", {}).get("text", ""))
    need = widest_px(bar["ticktext"], font) + bar.get("thickness", 30) + 36 + 2 * font
    return max(need, widest_px([title], font) + 20 + font)


def hold_margins(layout: dict, data: Sequence[Mapping]) -> dict:
    """Margins that hold what plotly.js's automargin would push (see above): left for the edge y axes' tick labels
    and title, bottom for the x labels and title (upright ones only under a plot that its panels fill), right for
    the colour bar and a legend beside it. Each margin only grows; a side this cannot estimate is left as it is
    (plotly pushes it, as before). Returns the layout's margin."""
    font = float(layout.get("font", {}).get("size", 15))
    margin = layout["margin"]
    for axis in _edge_axes(layout, "y"):
        titled = bool(axis.get("title", {}).get("text"))
        need = widest_px(axis["ticktext"], font) + (31 + 1.26 * font if titled else 1.35 * font)
        margin["l"] = max(margin["l"], math.ceil(need) + MARGIN_SLACK_PX)
    for axis in _edge_axes(layout, "x"):
        if not axis.get("title", {}).get("text"):
            continue
        if abs(axis.get("tickangle", 0) or 0) == 90:
            need = widest_px(axis["ticktext"], font) + 4.07 * font
        elif not _square(layout, axis):  # square cells leave upright labels room inside the plot: not estimated
            need = 34 + 3.11 * font
        else:
            continue
        margin["b"] = max(margin["b"], math.ceil(need) + MARGIN_SLACK_PX)
    bar = layout.get("coloraxis", {}).get("colorbar")
    beside = _colorbar_px(bar, font) if bar is not None else None
    if beside is not None:  # the bar starts at 1.02 of the plot's width (no width of its own: WIDE_PAGE_PX)
        need = (0.02 * ((layout.get("width") or WIDE_PAGE_PX) - margin["l"]) + beside) / 1.02
        legend = layout.get("legend", {})
        if legend.get("x") == 1.0 and legend.get("xanchor") == "left":
            names = [t.get("name", "") for t in data if t.get("showlegend")]
            need = max(need, widest_px(names, font) + 3.7 * font)
        margin["r"] = max(margin["r"], math.ceil(need) + MARGIN_SLACK_PX)
    return margin
