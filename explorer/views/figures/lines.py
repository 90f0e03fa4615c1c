"""Line and bar charts: training curves, cost against sequence length, per-head bars."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from .style import GRID_COLOR, HEAD_COLORS, escape_label, finish_figure, font_size, head_colors


def _log_axis(values: Sequence[float], label_all: bool = False) -> dict:
    """A log axis labelled in full numbers: the values themselves when few (label_all), else 1-2-5 steps.

    Left alone, plotly labels a short log range with bare digits (20 is drawn as "2").
    """
    positive = sorted({float(v) for v in values if v is not None and np.isfinite(v) and v > 0})
    if not positive:
        return {"type": "log"}
    if label_all and len(positive) <= 8:  # Knobs' 12 scales (0.01 … 128) were crammed: decades then
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


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "pentagon")
REFERENCE_COLOR = "rgb(136, 136, 136)"  # grey, which no head colour uses
# Series that are not heads ("traced", "Listing 3.5", "mean"): colours outside HEAD_COLORS, so none reads as a head
OTHER_COLORS = ("#E0442C", "#1F9FD0", "#5AAE3C", "#9C6ADE", "#D98E2F", "#2BB3A3")
_HEAD_SERIES = re.compile(r"head (\d+)")


def series_colors(names: Sequence[str]) -> list[str]:
    """One colour per series, meaning the same thing in every chart: "head k" is head k's colour everywhere.

    Other series ("mean", "traced", "Listing 3.5") take ``OTHER_COLORS``, none of them a head's colour, so that
    they are not mistaken for a head.
    """
    palette = head_colors(len(HEAD_COLORS))
    colors, others = [], 0
    for name in names:
        head = _HEAD_SERIES.fullmatch(name)
        if head:
            colors.append(palette[int(head.group(1)) % len(palette)])
        else:
            colors.append(OTHER_COLORS[others % len(OTHER_COLORS)])
            others += 1
    return colors


def _line(name: str, xs, ys, k: int, look: tuple[str, bool, bool, bool], mode: str, hover: str) -> dict:
    """Series k: a solid first line, then dashes and other markers, so that a line drawn over another still lets
    it show through; a reference (uniform, before) is a grey dotted line without markers. ``look``: colour,
    reference, presenter (lines 1.6× as thick, for a projector), and whether the series lies on an earlier one
    (open rings round its points, so it is seen: Cost's Listing 3.5 hid the traced line)."""
    color, reference, presenter, on_earlier = look
    thick = 1.6 if presenter else 1.0
    if reference:
        return {
            "type": "scatter",
            "x": list(xs),
            "y": list(ys),
            "name": escape_label(name),
            "hovertemplate": hover,
            "mode": "lines",
            "line": {"color": REFERENCE_COLOR, "width": 3 * thick, "dash": "dot"},
        }
    marker = {"size": 8 * thick, "symbol": SYMBOLS[k % len(SYMBOLS)]}
    if on_earlier:
        marker = {"size": 15 * thick, "symbol": "circle-open", "line": {"width": 2.5 * thick}}
    style = {
        "mode": "lines+markers" if on_earlier else mode,
        "line": {"color": color, "width": (4 if k == 0 else 3) * thick, "dash": DASHES[k % len(DASHES)]},
        "marker": marker,
    }
    return {"type": "scatter", "x": list(xs), "y": list(ys), "name": escape_label(name), "hovertemplate": hover} | style


def _on_earlier(ys, earlier: list) -> bool:
    """Whether a series lies on one drawn before it (within 1% of the plot's range at every point; a gap, None, lies
    only on a gap)."""
    span = max((abs(y) for e in [ys, *earlier] for y in e if y is not None), default=0.0) or 1.0

    def close(a, b) -> bool:
        return a is None and b is None or a is not None and b is not None and abs(a - b) <= 0.01 * span

    return any(all(close(a, b) for a, b in zip(ys, e, strict=True)) for e in earlier)


def line_chart(
    xs: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    x_title: str,
    y_title: str,
    log_x: bool = False,
    log_y: bool = False,
    references: Sequence[str] = (),
    presenter: bool = False,
) -> go.Figure:
    """One line per named series over shared xs: loss and accuracy curves, cost against sequence length.

    Each series has its own colour (``series_colors``), dash and marker; the names in ``references`` are drawn
    as grey dotted lines. The legend sits right of the plot, never over the title.
    """
    mode = "lines+markers" if len(xs) <= 50 else "lines"
    colors = series_colors(list(series))
    data, k, drawn = [], 0, []
    for color, (name, ys) in zip(colors, series.items(), strict=True):
        if len(ys) != len(xs):
            raise ValueError(f"series {name!r} has {len(ys)} values for {len(xs)} xs")
        hover = f"{escape_label(name)}<br>{x_title} = %{{x}}<br>{y_title} = %{{y:.4g}}<extra></extra>"
        reference = name in references
        on_earlier = not reference and _on_earlier(ys, drawn)
        data.append(_line(name, xs, ys, k, (color, reference, presenter, on_earlier), mode, hover))
        k += not reference
        drawn += [] if reference else [list(ys)]
    grid = {"showgrid": True, "gridcolor": GRID_COLOR, "zeroline": False}
    all_ys = [y for ys in series.values() for y in ys]
    layout = {
        "xaxis": {"title": {"text": x_title}} | (_log_axis(xs, label_all=True) if log_x else {"type": "linear"}) | grid,
        "yaxis": {"title": {"text": y_title}} | (_log_axis(all_ys) if log_y else {"type": "linear"}) | grid,
        "legend": {"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},
        "hovermode": "x unified",
    }
    return finish_figure(
        {"data": data, "layout": layout},
        title,
        presenter,
        plot_px=round(340 * (1.25 if presenter else 1.0)),
        legend_entries=len(series),
        below_px=font_size(presenter, 4),
    )


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
    texts = [escape_label(label) for label in labels]
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
        "yaxis": {"title": {"text": y_title}, "showgrid": True, "gridcolor": GRID_COLOR, "rangemode": "tozero"},
    }
    return finish_figure(
        {"data": [bars], "layout": layout},
        title,
        presenter,
        plot_px=round(320 * (1.25 if presenter else 1.0)),
        below_px=font_size(presenter, 3),
    )
