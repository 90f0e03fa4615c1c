"""Line and bar charts: training curves, cost against sequence length, per-head bars."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from .style import _escape, _finish, head_colors


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
