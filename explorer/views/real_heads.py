"""What the Real heads page draws, from a real GPT's readings (``mha_core.gpt.model_heads``): figures and text. Pure.

Arrays in, Panels out; nothing here runs a model. The model view is one figure (every layer × head a thumbnail on
one shared colour scale); the scores are one figure of three layers × heads heatmaps.

Axis letters: L layers, h heads, T tokens (query rows, key columns), P the probe's period.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mha_core.gpt.head_scores import KINDS
from mha_core.gpt.model_heads import HeadProbe, TextReading, TextScores

from . import figures
from .figures.downsample import clipped_above, colorbar_ticks
from .figures.panel import Panel, shape_text
from .figures.style import SEQUENTIAL, escape_label, finish_figure, font_size
from .head_kinds import MODEL_VIEW_PX, baseline_text, is_kind, note, probe_baselines, scores_figure, text_scores_panel

KIND_TEXT = {  # what each kind of head does, in a sentence a student can say back
    "previous token": "looks at the token just before: it passes each token's left neighbour along (here a "
    "character), the first step of many larger patterns.",
    "first token": "rests on the first token: a head with nothing useful to read puts its weight there. What it "
    "reads there is nearly the same at every position, so it adds a near-constant vector (a bias), not nothing.",
    "induction": "looks for an earlier copy of the last few tokens and attends to what came after it, so the "
    "model can continue a repeat: seen “Harry Potter” once, after “Harry” it predicts “Potter”.",
}
TOKEN_KEY = "· is a space and ⏎ a new line (so neither is mistaken for punctuation); other bytes outside plain ASCII "
TOKEN_KEY += "show as their hex code, like xe2."
MAX_THUMB_PX = 170
MODEL_VIEW_TEXT = (  # the offsets are head_scores' (previous token: key i − 1; induction: key i − P + 1)
    "Each square is one head's attention weights on your sentence, every layer × head in one grid (the layout of "
    "BertViz's model view): row i is the token that reads, column j a token it may read (itself and the earlier "
    "ones: the causal mask), brighter is more weight. A bright line just under the diagonal (key i − 1) is a "
    "previous-token head. On a sentence typed twice, P tokens apart (its length and the space), a line P back from "
    "the diagonal (key i − P, the same token in the first copy) is a duplicate-token head, and the line one step to "
    "its right (key i − P + 1, the token that followed the earlier copy: the one to predict) is an induction head."
)


@dataclass(frozen=True, kw_only=True)
class RealHeadsView:
    """Everything the page draws for one (model, text): built once, shared by every session (never mutate it)."""

    model_view: Panel
    scores: Panel  # on the random probe
    text_scores: Panel | None  # on the typed sentence; None for one token (nothing earlier to read)
    top5: Panel
    induction: Panel
    strongest: dict[str, tuple[int, int, float]]  # kind -> (layer, head, score) on the probe
    is_kind: dict[str, bool]  # kind -> whether the strongest head clears is_kind's bar
    baselines: dict[str, float]  # kind -> the even-spread score on the probe
    top5_rows: list[dict]  # token, probability
    copy_losses: tuple[float, float]  # mean loss on the first and on the second copy
    drawn: int  # values the probe's random tokens were drawn from
    strongest_shape: tuple[int, int]  # (L, h)
    sentence: str  # the tokens drawn, decoded back to text
    vocab_size: int


def _thumb_axes(layout: dict, k: int, domains: tuple[list[float], list[float]], n: int) -> None:
    """Subplot k's axes: no ticks, row 0 at the top, square cells."""
    suffix = "" if k == 1 else str(k)
    hidden = {"showticklabels": False, "showgrid": False, "zeroline": False, "ticks": ""}
    layout[f"xaxis{suffix}"] = {"domain": domains[0], "anchor": f"y{suffix}", "range": [-0.5, n - 0.5]} | hidden
    layout[f"yaxis{suffix}"] = {
        "domain": domains[1],
        "anchor": f"x{suffix}",
        "range": [n - 0.5, -0.5],
        "scaleanchor": f"x{suffix}",
        "constrain": "domain",
    } | hidden
    layout[f"xaxis{suffix}"]["constrain"] = "domain"


def _grid_geometry(num_layers: int, num_heads: int, presenter: bool) -> tuple[float, float, float, float]:
    """(thumbnail px, gap px, left px for row names, plot height px) for an L × h grid in a page-wide figure."""
    left = font_size(presenter) * 4.5
    gap = 6.0
    side = min(MAX_THUMB_PX, (MODEL_VIEW_PX - left - 90 - gap * num_heads) / num_heads)
    return side, gap, left, num_layers * (side + gap)


def model_view_figure(weights: np.ndarray, labels: list[str], *, title: str, presenter: bool = False):
    """Every layer × head's (T, T) weights as thumbnails in one figure: layers down, heads across.

    weights: (L, h, T, T), queries on rows. Hover names the layer, head, query and key tokens and the weight; the
    axes are categories made unique by their position ("3 ·the"), so two equal tokens stay apart.
    """
    num_layers, num_heads, num_tokens, _ = weights.shape
    side, gap, left, plot_px = _grid_geometry(num_layers, num_heads, presenter)
    width = MODEL_VIEW_PX
    names = [f"{i} {escape_label(label)}" for i, label in enumerate(labels)]
    data, layout, notes = [], {}, []
    for layer in range(num_layers):
        for head in range(num_heads):
            k = layer * num_heads + head + 1
            x0 = (left + head * (side + gap)) / width
            y1 = 1 - layer * (side + gap) / plot_px
            domains = ([x0, x0 + side / width], [max(0.0, y1 - side / plot_px), y1])
            _thumb_axes(layout, k, domains, num_tokens)
            data.append(_thumb_trace(weights[layer, head], names, layer, head, k))
        notes.append(note(f"layer {layer}", 0, 1 - (layer * (side + gap) + side / 2) / plot_px, "left"))
    notes += [note(f"head {h}", (left + h * (side + gap) + side / 2) / width, 1, "center") for h in range(num_heads)]
    top = figures.weights_top(weights)
    ticks, labels = colorbar_ticks(0.0, top, clipped_top=clipped_above(weights, top), max_ticks=5)  # "≥ top"
    bar = {"title": {"text": "weight"}, "thickness": 14, "len": min(1.0, 400 / plot_px)}
    layout |= {
        "annotations": notes,
        "coloraxis": {
            "colorscale": SEQUENTIAL,
            "cmin": 0.0,
            "cmax": top,
            "colorbar": bar | {"tickmode": "array", "tickvals": ticks, "ticktext": labels},
        },
    }
    return finish_figure(
        {"data": data, "layout": layout},
        title,
        presenter,
        plot_px=round(plot_px),
        above_plot_px=font_size(presenter, 1.6),
    )


def _thumb_trace(z: np.ndarray, names: list[str], layer: int, head: int, k: int) -> dict:
    suffix = "" if k == 1 else str(k)
    hover = f"layer {layer}, head {head}<br>query %{{y}}<br>key %{{x}}<br>weight %{{z:.3f}}<extra></extra>"
    return {
        "type": "heatmap",
        "z": np.asarray(z, dtype=np.float32),
        "x": names,
        "y": names,
        "coloraxis": "coloraxis",
        "xaxis": f"x{suffix}",
        "yaxis": f"y{suffix}",
        "hovertemplate": hover,
        "meta": {"role": "values", "head": k - 1, "layer": layer},
    }


def induction_sentence(first: float, second: float, drawn: int, source: str = "") -> str:
    """What the two copies' mean losses say, in words that stay true whatever the model learned; ``drawn`` is how
    many values the random tokens were drawn from (a uniform guess among them costs ln drawn), ``source`` which."""
    chance = math.log(drawn)
    said = (
        f"Mean loss **{first:.2f}** nats on the first copy, **{second:.2f}** on the second. The random tokens are "
        f"drawn from {drawn:,} values{f' ({source})' if source else ''}: a uniform guess among them costs "
        f"ln {drawn:,} = {chance:.2f}. "
    )
    if first > chance + 0.2:
        said += (
            f"On the first copy the model does worse than that, by {first - chance:.2f}: it guesses as if the "
            "tokens were the text it learned from, and random ones are not (confidently wrong). "
        )
    else:
        said += "Random tokens cannot be guessed, so on the first copy no model does much better than that. "
    if second < min(first, chance) - 0.5:
        return said + (
            f"On the second copy the loss falls to {second:.2f}, {first - second:.2f} nats below the first copy "
            f"and {chance - second:.2f} below a uniform guess: the model finds each token's earlier occurrence and "
            "predicts what followed it, which is what induction heads do."
        )
    return said + "On the second copy it does not fall much: this model has not learned to copy a repeat yet."


def top5_figure(reading: TextReading, *, presenter: bool = False):
    return figures.bar_chart(
        [f"“{label}”" for label in reading.top_labels],
        reading.top_probs,
        title=f"What comes after “{escape_label(reading.labels[-1])}”? "
        f"The {len(reading.top_ids)} most likely next tokens",
        y_title="probability",
        presenter=presenter,
    )


def induction_figure(probe: HeadProbe, *, presenter: bool = False):
    """The loss at each position of the probe: the first copy at chance, the second falling if heads copy."""
    period, positions = probe.period, list(range(len(probe.loss)))
    loss = [float(v) for v in probe.loss]
    first = [v if t < period else None for t, v in zip(positions, loss, strict=True)]
    second = [v if t >= period - 1 else None for t, v in zip(positions, loss, strict=True)]
    chance = [math.log(probe.drawn)] * len(positions)
    return figures.line_chart(
        positions,
        {"first copy": first, "second copy": second, f"a uniform guess, ln {probe.drawn}": chance},
        title=f"Loss on {period} random tokens, then the same {period} again",
        x_title="position t (predicting token t + 1)",
        y_title="loss (nats)",
        references=[f"a uniform guess, ln {probe.drawn}"],
        presenter=presenter,
    )


def build_view(
    reading: TextReading, probe: HeadProbe, text: TextScores, *, label: str, vocab_size: int, presenter: bool
):
    """Every panel of the page for one reading of the sentence, its scores and the model's probe."""
    num_layers, num_heads, num_tokens, _ = reading.weights.shape
    model_view = Panel(
        "model_view",
        f"Every head of {label} on your sentence",
        f"`attn_weights` of every layer · shape (L, h, T, T) = {shape_text(reading.weights.shape)} · one thumbnail "
        f"per layer and head, rows: queries (row 0 at the top), columns: keys; hover for the tokens and the weight. "
        f"{TOKEN_KEY}",
        model_view_figure(
            reading.weights, list(reading.labels), title=f"{num_layers} layers × {num_heads} heads", presenter=presenter
        ),
    )
    baselines = probe_baselines(probe.period)
    scores = Panel(
        "head_scores",
        "On random tokens repeated",
        f"Mean weight on the expected key, per head · shape (L, h) = ({num_layers}, {num_heads}) each · measured on "
        f"{probe.period} random tokens repeated ({2 * probe.period} tokens, averaged over a few such sequences), "
        "the same for every sentence; 1 is every query exactly there. An even spread scores "
        f"{baseline_text(baselines)}.",
        scores_figure(probe.scores, title="Each head's score on random tokens repeated", presenter=presenter),
    )
    top5 = Panel(
        "top5",
        "The next token",
        f"softmax of the logits after the last token · shape (V,) = ({vocab_size},) · the top "
        f"{len(reading.top_ids)} of {vocab_size:,} together have {sum(reading.top_probs):.0%} of the probability.",
        top5_figure(reading, presenter=presenter),
    )
    induction = Panel(
        "induction",
        "Induction: copying what came next last time",
        f"cross-entropy per position · shape (2P − 1,) = ({len(probe.loss)},) · mean {probe.first_copy_loss:.2f} "
        f"nats on the first copy, {probe.second_copy_loss:.2f} on the second (a uniform guess among the "
        f"{probe.drawn:,} values drawn: ln {probe.drawn:,} = {math.log(probe.drawn):.2f}).",
        induction_figure(probe, presenter=presenter),
    )
    rows = [{"token": lab, "probability": p} for lab, p in zip(reading.top_labels, reading.top_probs, strict=True)]
    return RealHeadsView(
        model_view=model_view,
        scores=scores,
        text_scores=text_scores_panel(text, presenter),
        top5=top5,
        induction=induction,
        strongest=dict(probe.strongest),
        is_kind={kind: is_kind(probe.strongest[kind][2], baselines[kind]) for kind in KINDS},
        baselines=baselines,
        top5_rows=rows,
        copy_losses=(probe.first_copy_loss, probe.second_copy_loss),
        drawn=probe.drawn,
        strongest_shape=(num_layers, num_heads),
        sentence=reading.text,
        vocab_size=vocab_size,
    )
