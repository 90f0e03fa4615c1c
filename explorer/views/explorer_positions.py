"""The Explorer's Positions section: the scores without and with the position knob's kind, side by side, what a
shuffle of the tokens does to the weights, and RoPE's two teaching figures. No streamlit, and no model run: the run
(``mha_core.runs.token_order.run_positions``) happened below; here its arrays become panels and sentences.

Listing 3.5 has no positions, so permuting the tokens only permutes the weights: "the dog bit the man" and "the man
bit the dog" are the same to attention alone. RoPE makes each score depend on the tokens and on i − j only; ALiBi
adds −slope·(i − j) to each head's scores below the diagonal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.attention.positions import rope_angles, rope_distance_scores
from mha_core.runs.token_order import PositionsRun, permutation_gap

from . import figures
from .figures.panel import Panel, head_names, index_labels, shape_text, token_heads_panel
from .markdown_text import escape_markdown

KIND_WORDS = {
    "none": "no positions",
    "learned": "learned positions",
    "sinusoidal": "sinusoidal positions",
    "rope": "RoPE",
    "alibi": "ALiBi",
}
FIGURE_POSITIONS = 64  # RoPE's teaching figures: positions 0 … 63
GAP_ROUNDING = 1e-5  # a change below this, put back in order, is float rounding: the weights merely permuted


@dataclass(frozen=True)
class PositionsView:
    """The section's panels: pairs drawn side by side (without | with), single panels, and computed sentences."""

    kind: str
    pairs: list[tuple[Panel, Panel]]
    panels: list[Panel]
    sentences: list[str]  # markdown, user text escaped
    shuffle_sentence: str  # markdown: what the shuffle did, with its numbers


def what_it_does(kind: str, head_dim: int, slopes: np.ndarray | None) -> str:
    """One sentence: where this kind puts order, and why that matters."""
    if kind == "none":
        return (
            "Listing 3.5 has no positions: shuffle the tokens and its weights are only shuffled with them, so "
            "*the dog bit the man* and *the man bit the dog* are the same to attention alone. Choose a kind of "
            "positions in the sidebar to see what each one changes."
        )
    if kind == "rope":
        return (
            f"RoPE turns each query and key by its position, dimension pair k by position × θ_k ({head_dim // 2} "
            "pairs here), before Q Kᵀ: a score then depends on the two tokens and on i − j only."
        )
    if kind == "alibi":
        listed = ", ".join(f"{slope:.4g}" for slope in slopes)
        return (
            "ALiBi adds no embedding: each head's scaled scores get −slope·|i − j| added, −slope·(i − j) below the "
            f"diagonal, which is all the causal mask keeps. The heads' slopes: {listed}."
        )
    return (
        f"{KIND_WORDS[kind].capitalize()} are rows added to x before W_query and W_key read it, so every query, "
        "every key and every score changes, by how far into the sequence each token sits."
    )


def _score_pair(run: PositionsRun, name: str, presenter: bool) -> tuple[Panel, Panel]:
    """(h, T, T) ``name`` ("logits" or "weights") without and with the kind, on one shared colour scale."""
    before, after = run.without[name], run.with_positions[name]
    shape = shape_text(before.shape)
    if name == "logits":
        top = float(max(np.abs(before).max(), np.abs(after).max(), 1e-12))
        scale, kind = {"zmin": -top, "zmax": top}, "scores"
        what = "scores softmax reads: Q Kᵀ / √head_dim" + (" + ALiBi's bias" if run.kind == "alibi" else "")
    else:
        scale, kind, what = {"zmin": 0.0, "zmax": figures.weights_top(before, after)}, "weights", "softmax weights"
    panels = []
    for side, values in (("without", before), ("with", after)):
        words = "without positions" if side == "without" else f"with {KIND_WORDS[run.kind]}"
        text = (
            f"The {what}, {words} · shape (h, T, T) = {shape} · batch element 0, no causal mask · rows: queries, "
            "columns: keys · one colour scale for both sides"
        )
        panels.append(
            token_heads_panel(
                f"positions_{name}_{side}",
                f"{'Scores' if name == 'logits' else 'Weights'} {words}",
                text,
                values,
                run.labels,
                figure_title=f"{'scores' if name == 'logits' else 'weights'} {words}",
                kind=kind,
                presenter=presenter,
                width_px=figures.half_figure_px(presenter),  # two side by side
                **scale,
            )
        )
    return panels[0], panels[1]


def _features_pair(run: PositionsRun, name: str, presenter: bool) -> tuple[Panel, Panel]:
    """(h, T, head_dim) queries or keys before and after RoPE's rotation, one colour scale."""
    before, after = run.without[name], run.with_positions[name]
    top = float(max(np.abs(before).max(), np.abs(after).max(), 1e-12))
    dims = index_labels(before.shape[-1])
    panels = []
    for side, values in (("plain", before), ("rotated", after)):
        title = f"{name.capitalize()}, {'as the module makes them' if side == 'plain' else 'rotated by RoPE'}"
        text = (
            f"`{name}` {side} · shape (h, T, head_dim) = {shape_text(values.shape)} · rows: tokens, columns: the "
            f"head's dims; dim k pairs with k + {before.shape[-1] // 2} · position 0 is not turned"
        )
        figure = figures.heads_heatmap(
            values,
            run.labels,
            dims,
            title=f"{name} {side}",
            kind="values",
            head_names=head_names(values.shape[0]),
            zmin=-top,
            zmax=top,
            presenter=presenter,
            row_title="token",
            col_title="dim",
            width_px=figures.half_figure_px(presenter),  # two side by side
        )
        panels.append(Panel(f"positions_{name}_{side}", title, text, figure))
    return panels[0], panels[1]


def _alibi_panel(run: PositionsRun, presenter: bool) -> Panel:
    bias = run.with_positions["bias"]  # (h, T, T)
    text = (
        f"`alibi_bias` · shape (h, T, T) = {shape_text(bias.shape)} · −slope_h × |i − j|: 0 on the diagonal, lower "
        "the farther the key · rows: queries, columns: keys"
    )
    return token_heads_panel(
        "positions_alibi_bias",
        "ALiBi's bias, per head",
        text,
        bias,
        run.labels,
        figure_title="ALiBi bias",
        kind="scores",
        presenter=presenter,
    )


def rope_distance_panel(head_dim: int, rope_base: float, presenter: bool) -> Panel:
    """An all-ones query and key: their score against i − j, which is all RoPE lets a score depend on."""
    scores = rope_distance_scores(head_dim, rope_base, FIGURE_POSITIONS).numpy()  # (64,)
    figure = figures.line_chart(
        list(range(FIGURE_POSITIONS)),
        {f"base {rope_base:,}": scores.tolist()},
        title="RoPE: score against distance",
        x_title="distance i − j",
        y_title="q · k after rotation",
        presenter=presenter,
    )
    text = (
        f"An all-ones query and key of head_dim {head_dim}, base {rope_base:,}: their score at distance i − j = "
        f"0 … {FIGURE_POSITIONS - 1} is the same at every pair of positions that far apart, {head_dim} at i = j, and "
        "it falls and waves as they part"
    )
    return Panel("rope_distance", "RoPE: the score depends on i − j", text, figure)


def rope_rotation_panel(head_dim: int, rope_base: float, presenter: bool) -> Panel:
    """cos of each pair's angle p·θ_k, pairs down and positions across: pair 0 turns a radian a position (fast
    stripes), the last pairs barely (one colour): low pairs tell near tokens apart, high pairs far ones."""
    angles = rope_angles(head_dim, rope_base, FIGURE_POSITIONS).numpy()  # (64, d/2)
    pairs = angles.shape[1]
    turns = np.cos(angles.T)[None]  # (1, d/2, 64): one panel, a row per pair
    figure = figures.heads_heatmap(
        turns,
        index_labels(pairs),
        index_labels(FIGURE_POSITIONS),
        title="RoPE: cos(p · θ_k), each pair as position grows",
        kind="values",
        head_names=[f"head_dim {head_dim}, base {rope_base:,}"],
        zmin=-1.0,
        zmax=1.0,
        presenter=presenter,
        row_title="pair k",
        col_title="position p",
    )
    text = (
        f"cos(p · θ_k) · shape (head_dim / 2, positions) = ({pairs}, {FIGURE_POSITIONS}) · pair k of head_dim "
        f"{head_dim} turns by θ_k = {rope_base:,}^(−2k/{head_dim}) a position: pair 0 by 1 radian, pair {pairs - 1} "
        f"by {angles[1, -1]:.3g} · low pairs turn fast and tell near tokens apart, high pairs slowly, for far ones"
    )
    return Panel("rope_rotation", "RoPE: low pairs turn fast, high pairs slowly", text, figure)


def shuffle_sentence(run: PositionsRun) -> str:
    """What the shuffle did to the weights, with the largest change once they are put back in the tokens' order."""
    if run.order == list(range(len(run.order))):
        return "The tokens are in their own order. **Shuffle the tokens** to compare the weights of a permutation."
    shuffled = " ".join(escape_markdown(run.labels[i]) for i in run.order)
    without = permutation_gap(run, with_positions=False)
    text = (
        f"Shuffled: {shuffled}. Without positions the weights are merely permuted: put back in the tokens' order "
        f"they differ from the unshuffled ones by at most {without:.1e}."
    )
    if run.kind == "none":
        return text + " Choose a kind of positions to see a shuffle change them."
    with_positions = permutation_gap(run, with_positions=True)
    changed = "changed" if with_positions > GAP_ROUNDING else "only permuted too (this shuffle keeps every |i − j|)"
    return (
        f"{text} With {KIND_WORDS[run.kind]} they {changed}: by up to {with_positions:.3g}. Both without the causal "
        "mask, which is an order of its own: with it token i sees tokens 0 … i, so a shuffle changes even "
        "Listing 3.5's weights."
    )


def build_positions_view(
    run: PositionsRun | None, *, kind: str, head_dim: int, rope_base: float, presenter: bool, refused: str = ""
) -> PositionsView:
    """The section for one run (None when the kind cannot run on this module: ``refused`` says why)."""
    sentences = [what_it_does(kind, head_dim, None if run is None else run.slopes)]
    pairs: list[tuple[Panel, Panel]] = []
    panels: list[Panel] = []
    if refused:
        sentences.append(refused)
    if run is not None and run.total_tokens > len(run.labels):
        sentences.append(
            f"Every token on the axes: the first {len(run.labels)} of the input's {run.total_tokens} tokens are "
            "scored here, of batch element 0."
        )
    if run is not None and kind == "none":  # nothing to set beside them: the scores and weights alone
        panels += [_score_pair(run, "logits", presenter)[0], _score_pair(run, "weights", presenter)[0]]
    elif run is not None:
        pairs += [_score_pair(run, "logits", presenter), _score_pair(run, "weights", presenter)]
        if kind == "rope":
            pairs += [_features_pair(run, "queries", presenter), _features_pair(run, "keys", presenter)]
        if kind == "alibi":
            panels.append(_alibi_panel(run, presenter))
    if kind == "rope":
        figure_dim = head_dim if head_dim % 2 == 0 else 16  # the teaching figures need pairs; 16 when it is odd
        panels += [
            rope_distance_panel(figure_dim, rope_base, presenter),
            rope_rotation_panel(figure_dim, rope_base, presenter),
        ]
    return PositionsView(
        kind=kind,
        pairs=pairs,
        panels=panels,
        sentences=sentences,
        shuffle_sentence="" if run is None else shuffle_sentence(run),
    )
