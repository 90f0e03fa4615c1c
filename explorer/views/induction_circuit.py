"""The induction circuit on the Real heads page: what knocking heads out does to the loss, and how layer 1's heads
read what layer 0's write (Q-, K- and V-composition, Elhage et al. 2021). Pure: readings in, panels and text out.

Axis letters: L layers, h heads, T tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.gpt.model_heads import KnockoutReading

from . import figures
from .figures.panel import Panel
from .head_kinds import scores_figure, text_scores_panel

COMPOSITION_TEXT = {
    "Q": "the layer-1 head's query reads what the layer-0 head wrote (W_OV⁽⁰⁾ᵀ W_QK⁽¹⁾)",
    "K": "its key reads it (W_QK⁽¹⁾ W_OV⁽⁰⁾): how an induction head finds the token after an earlier copy, reading "
    "a previous-token head's output at every key",
    "V": "its value reads it (W_OV⁽¹⁾ W_OV⁽⁰⁾): what it moves was built by the layer-0 head",
}
CONVENTION = (
    "Each score is `‖product‖_F / (‖W_a‖_F ‖W_b‖_F)` (Elhage et al. 2021), with each head's W_QK = W_Qᵀ W_K and "
    "W_OV = W_O W_V taken from the module's weights and the attention's LayerNorm folded in by its scale γ only "
    "(its centring, division and shift left out, as a linear circuit must)."
)


def heads_label(heads) -> str:
    """((0, 1), (1, 3)) -> 'L0 H1, L1 H3'."""
    return ", ".join(f"L{layer} H{head}" for layer, head in heads) or "none"


@dataclass(frozen=True, kw_only=True)
class KnockoutView:
    loss: Panel
    scores: Panel | None  # every head's scores on the sentence with the heads knocked out (None: none chosen)
    sentence: str  # what happened, in numbers
    top_rows: list[dict]  # the next token after the sentence, heads knocked out


def knockout_view(reading: KnockoutReading, repeat_rows: list[int], *, presenter: bool) -> KnockoutView:
    """The loss at every position with every head and with ``reading.heads`` knocked out; ``repeat_rows`` are the
    positions whose last few tokens appeared earlier, where predicting the next token is an induction head's work."""
    positions = list(range(len(reading.loss)))
    who = heads_label(reading.heads)
    series = {"every head": [float(v) for v in reading.intact_loss]}
    if reading.heads:
        series[f"without {who}"] = [float(v) for v in reading.loss]
    figure = figures.line_chart(
        positions,
        series,
        title=f"Loss at each position, with every head and without {who}" if reading.heads else "Loss at each position",
        x_title="position t (predicting token t + 1)",
        y_title="loss (nats)",
        presenter=presenter,
    )
    panel = Panel(
        "knockout_loss",
        "Loss with heads knocked out",
        f"cross-entropy per position · shape (T − 1,) = ({len(positions)},) · {reading.mode} ablation: each "
        "knocked-out head's slice of the context "
        + ("set to zero" if reading.mode == "zero" else "replaced by its mean over this sentence's positions")
        + " before out_proj.",
        figure,
    )
    return KnockoutView(
        loss=panel,
        scores=text_scores_panel(reading.scores, presenter, key="knockout_scores", who=who) if reading.heads else None,
        sentence=knockout_sentence(reading, repeat_rows),
        top_rows=[{"token": t, "probability": p} for t, p in zip(reading.top_labels, reading.top_probs, strict=True)],
    )


def knockout_sentence(reading: KnockoutReading, repeat_rows: list[int]) -> str:
    """Mean loss before → after, on the whole sentence and on the positions that continue a repeat."""
    if not len(reading.loss):
        return "Your sentence is one token: there is nothing in it to predict."
    whole = f"mean loss **{reading.intact_loss.mean():.2f} → {reading.loss.mean():.2f}** nats on the whole sentence"
    rows = [r for r in repeat_rows if r < len(reading.loss)]  # position r predicts token r + 1; the last predicts none
    if not reading.heads:
        return "Choose heads to knock out: every head is working."
    if not rows:
        return f"Without {heads_label(reading.heads)}: {whole}. Your sentence repeats nothing, so nothing to copy."
    before, after = float(np.mean(reading.intact_loss[rows])), float(np.mean(reading.loss[rows]))
    return (
        f"Without {heads_label(reading.heads)}: {whole}, and **{before:.2f} → {after:.2f}** on the "
        f"{len(rows)} positions that continue an earlier stretch (what induction predicts)."
    )


@dataclass(frozen=True, kw_only=True)
class CompositionView:
    panel: Panel
    pair: str  # the previous-token → induction pair, named with its K-composition


def composition_view(
    scores: dict[str, np.ndarray],
    random: dict[str, float],
    strongest: dict[str, tuple[int, int, float]],
    *,
    presenter: bool,
) -> CompositionView:
    """Q-, K- and V-composition as three (layer-1 heads × layer-0 heads) heatmaps; the strongest previous-token
    head of layer 0 and induction head of layer 1 named, with their K-composition against random heads'."""
    top = max(float(np.nanmax(v)) for v in scores.values())
    figure = scores_figure(
        {f"{kind}-composition": value for kind, value in scores.items()},
        title="How each layer-1 head reads each layer-0 head",
        presenter=presenter,
        row_name="L1 H{}",
        col_name="L0 H{}",
        x_title="layer-0 head (writes)",
        cmax=max(top, 1e-6),
    )
    rows, cols = next(iter(scores.values())).shape
    panel = Panel(
        "composition",
        "Composition: layer 1 reading layer 0",
        f"shape (h, h) = ({rows}, {cols}) each · rows: layer-1 heads (readers), columns: layer-0 heads (writers) · "
        f"random heads of these shapes score about "
        + ", ".join(f"{kind} {value:.2f}" for kind, value in random.items())
        + f" · the colour scale tops at the largest score, {top:.2f}. {CONVENTION}",
        figure,
    )
    return CompositionView(panel=panel, pair=composition_sentence(scores, random, strongest))


STANDS_OUT = 0.05  # a pair's K-composition singles it out when it beats every other pair's by this much


def composition_sentence(scores: dict[str, np.ndarray], random: dict[str, float], strongest) -> str:
    """What the composition scores show and what they cannot, after the knock-out (the causal test): the pair's
    K-composition against every pair's range and random heads', and the Q and V ranges against theirs."""
    prev_layer, prev_head, _ = strongest["previous token"]
    ind_layer, ind_head, _ = strongest["induction"]
    lead = (
        "The knock-out above is the test of the circuit: it silences heads and measures what the model loses. "
        "Composition only reads the weights, and says whether a layer-1 head could read what a layer-0 head writes. "
    )
    ranges = {kind: (float(np.nanmin(v)), float(np.nanmax(v))) for kind, v in scores.items()}
    pairs = next(iter(scores.values())).size
    spread = "; ".join(
        f"{kind}-composition {low:.2f}–{high:.2f} (random heads {random[kind]:.2f})"
        for kind, (low, high) in ranges.items()
    )
    said = lead + f"Over all {pairs} pairs: {spread}. "
    if (prev_layer, ind_layer) != (0, 1):
        return (
            said
            + "The strongest previous-token head is not in layer 0, or the strongest induction head not in layer 1."
        )
    k = float(scores["K"][ind_head, prev_head])
    others = np.delete(scores["K"].reshape(-1), ind_head * scores["K"].shape[1] + prev_head)
    said += (
        f"The induction head **L1 H{ind_head}** reads the previous-token head **L0 H{prev_head}** with K-composition "
        f"**{k:.2f}**: "
    )
    if others.size and k >= float(np.nanmax(others)) + STANDS_OUT and k > 2 * random["K"]:
        return said + (
            f"the largest of all pairs by more than {STANDS_OUT}, the circuit's signature (each key carries the token "
            "before it, so the query finds the token that followed an earlier copy)."
        )
    below = [kind for kind in ("Q", "V") if kind in ranges and ranges[kind][1] < random[kind]]
    return said + (
        f"another pair scores as much, or within {STANDS_OUT}, so the score does not single this pair out: a large "
        "K-composition is what the circuit needs, not proof of it."
        + (f" {' and '.join(below)}-composition stay below random heads' for every pair." if below else "")
    )


@dataclass(frozen=True, kw_only=True)
class CopyingView:
    matrix: Panel  # the chosen head's OV circuit in token space
    scores: Panel  # every head's copying score


def copying_view(
    matrix: np.ndarray, labels: list[str], scores: np.ndarray, *, layer: int, head: int, presenter: bool
) -> CopyingView:
    """Head (layer, head)'s OV circuit in token space (V × V: row = the token attended to, column = the logit it
    raises or lowers) and every head's copying score (L × h)."""
    vocab = matrix.shape[0]
    score = float(scores[layer, head])
    panel = Panel(
        "ov_tokens",
        f"L{layer} H{head}'s OV circuit in token space",
        f"W_E W_OVᵀ W_Uᵀ · shape (V, V) = ({vocab}, {vocab}) · row s: what attending to token s adds to each "
        "token's logit through this head alone (the embedding, the head's W_OV, the unembedding, each LayerNorm's "
        "scale γ folded in; positions and biases left out). A copying head has a bright diagonal: reading a token "
        f"raises that same token. Copying score Σλ / Σ|λ| over the eigenvalues: **{score:.2f}** (1: all positive).",
        figures.matrix_heatmap(
            matrix,
            labels,
            labels,
            title=f"L{layer} H{head}: attended token → logit change",
            kind="values",
            presenter=presenter,
            row_title="token attended to",
            col_title="logit of",
        ),
    )
    figure = scores_figure({"copying score": scores}, title="Each head's copying score", presenter=presenter, cmax=1.0)
    table = Panel(
        "copying_scores",
        "Which heads copy?",
        f"Σλ / Σ|λ| of each head's OV circuit in token space · shape (L, h) = {scores.shape} · 1: every eigenvalue "
        "positive, the head raises the logit of what it reads (Elhage et al. 2021); −1: it lowers it; the colour "
        "scale shows 0 to 1, a negative score as 0.",
        figure,
    )
    return CopyingView(matrix=panel, scores=table)
