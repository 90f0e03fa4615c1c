"""Attention variants, section 4: the shipped GPT converted to GQA, MQA and sliding windows with no retraining.

Scores in (``mha_core.variants.trained_variants.TrainedVariants``), a table, a scatter of quality against cache bytes
and the sentences that say what to look at out, every number in them read from the scores. No streamlit, no model.
"""

from __future__ import annotations

import math

from mha_core.variants.trained_variants import DTYPE, TrainedVariants, VariantScore

from .attention_variants import human_bytes
from .figures import GRID_COLOR, escape_label, finish_figure
from .figures.lines import OTHER_COLORS, SYMBOLS
from .figures.panel import Panel
from .figures.style import font_size

HELDOUT = "held-out loss"
COPY = "copy loss (second copy)"


def short_label(score: VariantScore) -> str:
    """A point's label on the scatter: "MHA", "GQA 2", "MQA", "SWA 32"."""
    conversion = score.conversion
    if conversion.kind == "GQA":
        return f"GQA {conversion.kv_heads}"
    return f"SWA {conversion.window}" if conversion.kind == "SWA" else conversion.kind


def window_text(score: VariantScore) -> str:
    window = score.conversion.window
    return "every token" if window is None else f"last {window}"


def trained_table(result: TrainedVariants) -> list[dict]:
    """One row per conversion: its K/V heads and window, its cache, and what it keeps of the model."""
    tokens = result.context_length
    return [
        {
            "variant": score.conversion.label,
            "K/V heads per layer": score.conversion.kv_heads,
            "window": window_text(score),
            "cache per token": human_bytes(score.cache_bytes_per_token),
            f"cache at {tokens} tokens": human_bytes(score.cache_bytes_full),
            "held-out loss": round(score.heldout_loss, 3),
            "copy loss": round(score.second_copy_loss, 3),
            "best induction": round(score.best_induction, 3),
        }
        for score in result.scores
    ]


def _points(result: TrainedVariants, name: str, k: int, presenter: bool) -> dict:
    """One series of the scatter: a point per conversion, labelled with the variant."""
    ys = [s.heldout_loss if name == HELDOUT else s.second_copy_loss for s in result.scores]
    labels = [short_label(s) for s in result.scores]
    size = 12 * (1.6 if presenter else 1.0)
    return {
        "type": "scatter",
        "mode": "markers+text",
        "name": name,
        "x": [s.cache_bytes_full for s in result.scores],
        "y": ys,
        "text": [escape_label(label) for label in labels],
        "textposition": "middle right",
        "customdata": [[escape_label(s.conversion.label), human_bytes(s.cache_bytes_full)] for s in result.scores],
        "hovertemplate": f"%{{customdata[0]}}<br>cache %{{customdata[1]}}<br>{name} = %{{y:.3f}} nats<extra></extra>",
        "marker": {"size": size, "symbol": SYMBOLS[k * 2], "color": OTHER_COLORS[k]},
        "cliponaxis": False,
    }


def quality_figure(result: TrainedVariants, presenter: bool) -> Panel:
    """Held-out loss and copy loss (nats) against the KV cache at the full context (bytes, log axis)."""
    tokens = result.context_length
    xs = sorted({s.cache_bytes_full for s in result.scores})
    x_title = f"KV cache at {tokens} tokens ({DTYPE}, batch 1; log axis)"
    layout = {
        "xaxis": {
            "title": {"text": x_title},
            "type": "log",
            "tickmode": "array",
            "tickvals": xs,
            "ticktext": [human_bytes(x) for x in xs],
            "range": [math.log10(xs[0]) - 0.15, math.log10(xs[-1]) + 0.35],  # room for the labels right of the points
            "showgrid": True,
            "gridcolor": GRID_COLOR,
        },
        "yaxis": {
            "title": {"text": "loss (nats per token)"},
            "rangemode": "tozero",
            "showgrid": True,
            "gridcolor": GRID_COLOR,
            "zeroline": False,
        },
        "legend": {"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},
    }
    figure = finish_figure(
        {"data": [_points(result, HELDOUT, 0, presenter), _points(result, COPY, 1, presenter)], "layout": layout},
        f"Quality against KV-cache bytes: {len(result.scores)} conversions of the shipped GPT, no retraining",
        presenter,
        plot_px=round(380 * (1.25 if presenter else 1.0)),
        legend_entries=2,
        below_px=font_size(presenter, 4),
    )
    figure.layout.meta = dict(figure.layout.meta) | {"description": describe_points(result)}  # the words, not x, y
    caption = (
        f"One point per conversion and measure: x is the cache of all {result.n_layers} layers at the model's full "
        f"context ({tokens} tokens, {DTYPE}: 4 bytes a number), y the loss in nats per token. Held-out loss: "
        f"{result.heldout_windows} windows of {tokens} tokens ({result.heldout_tokens:,} predictions) spread through "
        f"the held-out text. Copy loss: the second copy of {result.sentences} English sentences typed twice, which "
        "the model never saw. Lower is better on both; left is a smaller cache."
    )
    return Panel("trained_quality", "Quality against KV-cache bytes", caption, figure)


def describe_points(result: TrainedVariants) -> str:
    """The scatter in words, for a screen reader: each point's cache and both losses."""
    points = "; ".join(
        f"{s.conversion.label}: {human_bytes(s.cache_bytes_full)}, held-out {s.heldout_loss:.3f}, "
        f"copy {s.second_copy_loss:.3f}"
        for s in result.scores
    )
    return (
        f"Scatter of held-out loss and copy loss (nats per token) against the KV cache at {result.context_length} "
        f"tokens, {len(result.scores)} conversions. {points}."
    )


KEEPS_COPY = 0.5  # a conversion keeps the copy when its second copy costs at most half its first


def keeps_copy(score: VariantScore) -> bool:
    """Whether the converted model still copies: the second copy at most ``KEEPS_COPY`` of the first's loss."""
    return score.second_copy_loss <= KEEPS_COPY * score.first_copy_loss


def trained_look(result: TrainedVariants) -> str:
    """What to look at (markdown), every number read from the scores: the smallest cache that keeps the copy, the
    widest window that loses it, what averaging K/V heads costs; then that nothing was retrained."""
    original = next(s for s in result.scores if s.conversion.kind == "MHA")
    keeps = [s for s in result.scores if s is not original and keeps_copy(s)]
    loses = [s for s in result.scores if s.conversion.kind == "SWA" and not keeps_copy(s)]
    grouped = [s for s in result.scores if s.conversion.kind in ("GQA", "MQA")]
    words = [
        f"**What to look at:** the original (MHA) caches {human_bytes(original.cache_bytes_full)} at "
        f"{result.context_length} tokens, with held-out loss {original.heldout_loss:.2f} and copy loss "
        f"{original.second_copy_loss:.2f} nats."
    ]
    if keeps:
        best = min(keeps, key=lambda s: (s.cache_bytes_full, s.heldout_loss))
        words.append(
            f"{best.conversion.label} keeps the copy (copy loss {best.second_copy_loss:.2f}, best induction head "
            f"{best.best_induction:.2f}) in {best.cache_bytes_full / original.cache_bytes_full:.0%} of the cache, "
            f"for held-out loss {best.heldout_loss:.2f}."
        )
    if loses:
        widest = max(loses, key=lambda s: s.conversion.window)
        window = widest.conversion.window
        beyond = sum(period - 1 >= window for period in result.periods)  # the induction key lies period − 1 back
        words.append(
            f"A window of {window} loses it: for {beyond} of the {len(result.periods)} sentences "
            f"({min(result.periods)}–{max(result.periods)} tokens, its space included) the earlier copy is out of "
            f"reach; copy loss {widest.second_copy_loss:.2f}, best induction head {widest.best_induction:.2f}."
        )
    if grouped:
        each = "; ".join(
            f"{s.conversion.label}, {s.heldout_loss:.2f} and {s.second_copy_loss:.2f}"
            for s in sorted(grouped, key=lambda s: -s.conversion.kv_heads)
        )
        words.append(f"Averaging K/V heads (held-out and copy loss): {each}.")
    words.append(
        "These are conversions with no retraining: the weights are the shipped model's, keys and values averaged per "
        "group for GQA and MQA. Ainslie et al. (2023) uptrain such a model for about 5% of its training to recover "
        "its quality; that is not done here."
    )
    return " ".join(words)
