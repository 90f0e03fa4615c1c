"""Which kind of head is each? The scores read off attention weights, as layers × heads heatmaps, with the bar an
even spread sets for each. Pure: scores in, figures and text out.

Axis letters: L layers, h heads.
"""

from __future__ import annotations

import math

import numpy as np

from mha_core.gpt.head_scores import KINDS
from mha_core.gpt.model_heads import MIN_MATCH, TextScores

from .figures.panel import Panel
from .figures.style import SEQUENTIAL, finish_figure, font_size

MODEL_VIEW_PX = 840  # the main column at 1280 px with the sidebar open


def note(text: str, x: float, y: float, anchor: str) -> dict:
    return {
        "text": text,
        "x": x,
        "y": y,
        "xref": "paper",
        "yref": "paper",
        "xanchor": anchor,
        "yanchor": "bottom" if anchor == "center" else "middle",
        "showarrow": False,
    }


def scores_figure(
    scores: dict[str, np.ndarray],
    *,
    title: str = "Each head's score, by kind",
    presenter: bool = False,
    row_name: str = "L{}",
    col_name: str = "H{}",
    x_title: str = "head",
    cmax: float = 1.0,
):
    """Each named (rows, cols) score matrix as a heatmap, side by side on one 0–``cmax`` scale; row 0 on top, values
    printed when the cells have room, NaN (a score with no queries to read) left blank. Rows and columns are named
    "L0" and "H1" (layer, head): "0.1" would read as a decimal."""
    names = list(scores)
    num_rows, num_cols = np.asarray(scores[names[0]]).shape
    cell = min(44.0, (MODEL_VIEW_PX - 200) / (len(names) * num_cols + 2))
    panel_w, gap = cell * num_cols, cell * 1.2
    width, plot_px = len(names) * (panel_w + gap) + 140, cell * num_rows
    data, layout, notes = [], {}, []
    for k, name in enumerate(names):
        suffix = "" if k == 0 else str(k + 1)
        x0 = (80 + k * (panel_w + gap)) / width
        z = np.asarray(scores[name], dtype=np.float32)  # (rows, cols)
        data.append(_score_trace(z, name, suffix, k, show_text=cell >= 34, names=(row_name, col_name)))
        layout |= _grid_axes(suffix, [x0, x0 + panel_w / width], (num_rows, num_cols), (row_name, col_name), x_title)
        layout[f"yaxis{suffix}"]["showticklabels"] = k == 0
        notes.append(note(f"{name}", x0 + panel_w / width / 2, 1, "center"))
    layout |= {
        "annotations": notes,
        "coloraxis": {
            "colorscale": SEQUENTIAL,
            "cmin": 0.0,
            "cmax": cmax,
            "colorbar": {"title": {"text": "score"}, "thickness": 14, "lenmode": "pixels", "len": 140},
        },
    }
    return finish_figure(
        {"data": data, "layout": layout},
        title,
        presenter,
        plot_px=round(max(plot_px, 150)),
        above_plot_px=font_size(presenter, 1.6),
        below_px=font_size(presenter, 3),
    )


def _grid_axes(suffix: str, domain: list[float], shape: tuple[int, int], names: tuple[str, str], x_title: str):
    """One panel's axes: named columns, named rows with row 0 at the top, square cells."""
    (num_rows, num_cols), (row_name, col_name) = shape, names
    return {
        f"xaxis{suffix}": {
            "domain": domain,
            "anchor": f"y{suffix}",
            "tickmode": "array",
            "tickvals": list(range(num_cols)),
            "ticktext": [col_name.format(h) for h in range(num_cols)],
            "title": {"text": x_title},
            "constrain": "domain",
        },
        f"yaxis{suffix}": {
            "anchor": f"x{suffix}",
            "range": [num_rows - 0.5, -0.5],
            "tickmode": "array",
            "tickvals": list(range(num_rows)),
            "ticktext": [row_name.format(r) for r in range(num_rows)],
            "ticks": "",
            "scaleanchor": f"x{suffix}",
            "constrain": "domain",
        },
    }


def _score_trace(z: np.ndarray, name: str, suffix: str, k: int, *, show_text: bool, names: tuple[str, str]) -> dict:
    rows, cols = (n.format("%{y}") for n in names)
    trace = {
        "type": "heatmap",
        "z": z,
        "coloraxis": "coloraxis",
        "xaxis": f"x{suffix}",
        "yaxis": f"y{suffix}",
        "hovertemplate": f"{rows} {cols.replace('%{y}', '%{x}')}<br>{name} score %{{z:.3f}}<extra></extra>",
        "meta": {"role": "values", "head": k, "kind": name},
    }
    if show_text:
        trace |= {"text": [["" if np.isnan(v) else f"{v:.2f}" for v in row] for row in z], "texttemplate": "%{text}"}
    return trace


def even_spread(rows) -> float:
    """What a head that spreads each query's weight evenly over the keys it may see scores, averaged over the
    queries ``rows`` a score reads (query i sees i + 1 keys)."""
    rows = np.asarray(rows, dtype=np.float64)
    return float(np.mean(1.0 / (rows + 1.0))) if rows.size else float("nan")


def probe_baselines(period: int) -> dict[str, float]:
    """Each kind's even-spread score on the probe (2P tokens): previous and first token read queries 1..2P−1, the
    induction score only the second copy's, P..2P−1."""
    later = even_spread(np.arange(1, 2 * period))
    return {"previous token": later, "first token": later, "induction": even_spread(np.arange(period, 2 * period))}


def is_kind(score: float, baseline: float) -> bool:
    """A head counts as a kind when its score is at least 0.3 and three times what an even spread scores."""
    return bool(score >= max(0.3, 3 * baseline))


def baseline_text(baselines: dict[str, float]) -> str:
    return "; ".join(f"{kind} {value:.2f}" for kind, value in baselines.items() if not math.isnan(value))


def text_scores_panel(scores: TextScores, presenter: bool, *, key: str = "text_scores", who: str = "") -> Panel | None:
    """The three scores read on the typed text itself, each with its own even-spread bar; ``who`` names heads
    knocked out (their own weights are unchanged: what changes is every later layer's)."""
    shown = {kind: v for kind, v in scores.scores.items() if np.isfinite(v).any()}  # a kind with queries to read
    if not shown:  # one token: no query has an earlier key
        return None
    num_layers, num_heads = scores.scores[KINDS[0]].shape
    repeats = (
        f"the induction score reads the {scores.repeat_queries} queries whose last {MIN_MATCH} tokens appeared earlier"
        if scores.repeat_queries
        else f"your sentence repeats no stretch of {MIN_MATCH} tokens, so there is no induction score to read: press "
        "“Repeat my sentence”"
    )
    return Panel(
        key,
        f"On your sentence, without {who}" if who else "On your sentence",
        f"Mean weight on the expected key, per head · shape (L, h) = ({num_layers}, {num_heads}) each · read on "
        f"the sentence above; {repeats}. An even spread scores {baseline_text(scores.even)}.",
        scores_figure(
            shown,
            title=f"Each head's score without {who}" if who else "Each head's score on your sentence",
            presenter=presenter,
        ),
    )
