"""Which kind of head is each? The scores read off attention weights, as layers × heads heatmaps, with the bar an
even spread sets for each. Pure: scores in, figures and text out.

Axis letters: L layers, h heads.
"""

from __future__ import annotations

import math

import numpy as np

from mha_core.gpt.head_scores import KINDS
from mha_core.gpt.model_heads import MIN_MATCH, TextScores

from .figures.heatmap_layout import cell_text_px
from .figures.panel import Panel
from .figures.style import SEQUENTIAL, cell_font_size, finish_figure, font_size

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


def readable_cell_px(presenter: bool) -> float:
    """A cell this wide holds its value printed ("0.76") at the page's body type (issue 42: no smaller numbers)."""
    return cell_text_px("0.00", presenter)[0]


def score_grid(names: list[str], shape: tuple[int, int], presenter: bool) -> dict:
    """Where each of ``names``' (rows, cols) panels goes: side by side when their cells can print their values and
    their titles fit over them, else one under another (GPT-2's 12 heads, or more kinds); sizes in px."""
    (num_rows, num_cols), count, font = shape, len(names), font_size(presenter)
    title_px = 0.62 * font * max(len(name) for name in names)
    cell = min(44.0, (MODEL_VIEW_PX - 200) / (count * num_cols + 2))
    # laid out as on a laptop; presenter mode's larger type hides the numbers, and hover and the table keep them
    side = cell >= readable_cell_px(False) and cell * num_cols >= title_px
    if not side:
        cell = min(44.0, (MODEL_VIEW_PX - 220) / (num_cols + 2))
    panel_w, panel_h, gap = cell * num_cols, cell * num_rows, font * (1.2 if side else 4.2)
    width = (count * (panel_w + cell * 1.2) if side else panel_w) + 140
    plot_px = panel_h if side else count * panel_h + (count - 1) * gap
    boxes = []
    for k in range(count):
        x0 = (80 + (k * (panel_w + cell * 1.2) if side else 0)) / width
        y1 = 1.0 if side else 1 - k * (panel_h + gap) / plot_px
        boxes.append(([x0, x0 + panel_w / width], [max(0.0, y1 - panel_h / plot_px), y1]))
    return {"cell": cell, "side": side, "boxes": boxes, "plot_px": max(plot_px, 150)}


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
    """Each named (rows, cols) score matrix as a heatmap on one 0–``cmax`` scale, side by side or one under another
    (``score_grid``); row 0 on top, values printed, NaN (a score with no queries to read) left blank. Rows and
    columns are named "L0" and "H1" (layer, head): "0.1" would read as a decimal."""
    names = list(scores)
    shape = np.asarray(scores[names[0]]).shape
    plan = score_grid(names, shape, presenter)
    data, layout, notes = [], {}, []
    for k, (name, (xs, ys)) in enumerate(zip(names, plan["boxes"], strict=True)):
        suffix = "" if k == 0 else str(k + 1)
        z = np.asarray(scores[name], dtype=np.float32)  # (rows, cols)
        text_px = cell_font_size(presenter) if plan["cell"] >= readable_cell_px(presenter) else None
        data.append(_score_trace(z, name, suffix, k, text_px=text_px, names=(row_name, col_name)))
        last = plan["side"] or k == len(names) - 1
        layout |= _grid_axes(suffix, xs, shape, (row_name, col_name), x_title if last else "")
        layout[f"yaxis{suffix}"]["domain"] = ys
        layout[f"yaxis{suffix}"]["showticklabels"] = k == 0 or not plan["side"]
        notes.append(note(f"{name}", (xs[0] + xs[1]) / 2, ys[1], "center"))
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
        plot_px=round(plan["plot_px"]),
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
            "title": {"text": x_title},  # "" on a panel with another under it
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


def _score_trace(z: np.ndarray, name: str, suffix: str, k: int, *, text_px: int | None, names: tuple[str, str]) -> dict:
    """One panel's heatmap; with ``text_px`` its values printed at that size."""
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
    if text_px:
        values = [["" if np.isnan(v) else f"{v:.2f}" for v in row] for row in z]
        trace |= {"text": values, "texttemplate": "%{text}", "textfont": {"size": text_px}}
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


KIND_BAR, KIND_TIMES = 0.3, 3  # a head counts when it scores at least 0.3 and 3× what an even spread scores


def kind_bar(baseline: float) -> float:
    return max(KIND_BAR, KIND_TIMES * baseline)


def is_kind(score: float, baseline: float) -> bool:
    """A head counts as a kind when its score is at least 0.3 and three times what an even spread scores."""
    return bool(score >= kind_bar(baseline))


def printed_against(value: float, bar: float) -> str:
    """``value`` with two decimals, or as many more as it takes for the printed number to fall on the same side of
    ``bar`` as the value itself (0.2998 against 0.3 prints "0.2998", never "0.30")."""
    for digits in range(2, 9):
        text = f"{value:.{digits}f}"
        if (float(text) >= bar) == (value >= bar):
            return text
    return repr(value)


def kind_headline(kind: str, layer: int, head: int, score: float, baseline: float) -> str:
    """The strongest head of a kind, or that there is none, with its score printed against the bar."""
    bar = kind_bar(baseline)
    shown = printed_against(score, bar)
    if is_kind(score, baseline):
        return f"**{kind.capitalize()} head: L{layer} H{head}** (score {shown}, at least {bar:.2f})"
    return f"**No {kind} head** (the best, L{layer} H{head}, scores {shown}, under {bar:.2f})"


def bar_text(baseline: float) -> str:
    """How the bar is set, with its value here."""
    return (
        f"On random tokens repeated an even spread scores {printed_against(baseline, baseline)}; a head counts when "
        f"it scores at least {KIND_BAR} and {KIND_TIMES}× that: here at least {kind_bar(baseline):.2f}."
    )


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
