"""The Real heads page's text drawn as text: what the model writes beside the copy (with every head, and with heads
knocked out), and one position read closely: where each head looks from it, the top guesses, and which head raised
the right next token's logit (direct logit attribution). Pure: readings in, panels and sentences out.

Axis letters: L layers, h heads, T tokens, k the top guesses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.gpt.model_heads import CharacterReading

from . import figures
from .figures.panel import Panel
from .figures.style import escape_label, escape_markdown, finish_figure, font_size, head_colors, shorten

STATUS_FILL = {  # a cell's background: semi-transparent, so it reads on the light and on the dark theme
    "given": "rgba(128,128,128,0.20)",
    "match": "rgba(0,158,115,0.35)",
    "miss": "rgba(213,94,0,0.50)",
}
STATUS_NAME = {"given": "given", "match": "matches the copy", "miss": "✗ differs from the copy"}
STRIP = 0.32  # a head's strip under a line of text, in text rows
MISS_MARK = "✗"


def statuses(written: list[int], copy: list[int]) -> list[str]:
    """Per written token: "match" where it is the copy's token, "miss" where not, "" past the copy's end."""
    return [("match" if w == copy[k] else "miss") if k < len(copy) else "" for k, w in enumerate(written)]


def first_miss(status: list[str]) -> int | None:
    return next((k for k, s in enumerate(status) if s == "miss"), None)


def _cells(n: int, per_line: int, pitch: float) -> tuple[list[int], list[float]]:
    """Each token's column and the top of its line (y grows downwards)."""
    return [k % per_line for k in range(n)], [(k // per_line) * pitch for k in range(n)]


def text_figure(labels, status, *, title: str, presenter: bool, per_line: int, overlay=None, chosen=None, hover=None):
    """Tokens as text in lines of ``per_line`` cells, each cell tinted by ``status`` ("given", "match", "miss", "")
    with a ✗ on a miss; ``overlay`` (h, n) weights draw one strip per head under each line (BertViz's head view on
    the text, each head in its colour, opacity the weight); ``chosen`` outlines (query, its next token)."""
    n, heads = len(labels), 0 if overlay is None else overlay.shape[0]
    pitch = 1.0 + heads * STRIP + 0.4
    cols, tops = _cells(n, per_line, pitch)
    data = []
    for kind, fill in STATUS_FILL.items():
        where = [k for k in range(n) if status[k] == kind]
        if where:
            data.append(_bar([cols[k] for k in where], [tops[k] for k in where], 1.0, fill, STATUS_NAME[kind]))
    for h, color in enumerate(head_colors(heads)):
        bars = _bar(cols, [t + 1.05 + h * STRIP for t in tops], STRIP * 0.8, color, f"head {h}")
        bars["marker"]["opacity"] = [float(min(1.0, max(0.0, w))) for w in overlay[h]]
        bars["customdata"] = [f"{w:.3f}" for w in overlay[h]]
        bars["hovertemplate"] = f"head {h} → %{{x}}: weight %{{customdata}}<extra></extra>"
        data.append(bars)
    shown = [escape_label(shorten(label, 3)) for label in labels]
    glyphs = _glyphs(cols, [t + 0.5 for t in tops], shown, hover or shown, font_size(presenter, 1.1))
    if chosen:  # a reading's text: each token's index, for a click on it (writing_sections.show_characters)
        glyphs["customdata"] = list(range(n))
    data.append(glyphs)
    misses = [k for k in range(n) if status[k] == "miss"]
    if misses:
        marks = _glyphs([cols[k] + 0.33 for k in misses], [tops[k] + 0.2 for k in misses], [MISS_MARK] * len(misses),
                        None, font_size(presenter, 0.7))  # fmt: skip
        data.append(marks)
    lines = (n - 1) // per_line + 1
    axis = {"showgrid": False, "zeroline": False, "showticklabels": False, "ticks": ""}
    layout = {
        "xaxis": axis | {"range": [-0.6, per_line - 0.4], "fixedrange": True},
        "yaxis": axis | {"range": [lines * pitch, -0.1], "fixedrange": True},
        "shapes": _outlines(chosen, cols, tops) if chosen else [],
        "barmode": "overlay",
        "showlegend": bool(heads or misses),
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
    }
    row_px = font_size(presenter, 1.9) * (1.0 + heads * STRIP * 0.9 + 0.3)
    return finish_figure({"data": data, "layout": layout}, title, presenter, plot_px=round(lines * row_px),
                         above_plot_px=font_size(presenter, 2.2))  # fmt: skip


def _bar(xs, bases, height: float, color: str, name: str) -> dict:
    return {
        "type": "bar",
        "x": xs,
        "y": [height] * len(xs),
        "base": bases,
        "width": 0.92,
        "marker": {"color": color, "line": {"width": 0}},
        "name": name,
        "hoverinfo": "skip",
        "showlegend": True,
    }


def _glyphs(xs, ys, texts, hover, size: int) -> dict:
    trace = {"type": "scatter", "mode": "text", "x": xs, "y": ys, "text": texts, "textfont": {"size": size},
             "showlegend": False}  # fmt: skip
    if hover is None:
        return trace | {"hoverinfo": "skip"}
    return trace | {"hovertext": hover, "hovertemplate": "%{hovertext}<extra></extra>"}


def _outlines(chosen: tuple[int, int | None], cols, tops) -> list[dict]:
    """A solid box round the reading position, a dashed one round the token it should predict."""
    shapes = []
    for k, dash in zip(chosen, ("solid", "dash"), strict=True):
        if k is not None and k < len(cols):
            box = {"x0": cols[k] - 0.48, "x1": cols[k] + 0.48, "y0": tops[k] - 0.02, "y1": tops[k] + 1.02}
            shapes.append({"type": "rect", "xref": "x", "yref": "y", "line": {"width": 2.5, "dash": dash}} | box)
    return shapes


# --- item 2: what the model writes, with every head and with heads knocked out ---------------------------------------


@dataclass(frozen=True, kw_only=True)
class Written:
    """One continuation: what was written, and how it compares with the copy."""

    panel: Panel
    matched: int  # tokens equal to the copy's, position by position
    first_miss: int | None  # the first that differs (0-based), None when none does
    compared: int  # tokens with a copy token to compare with


def written_view(written_labels, written_ids, copy_ids, copy_labels, *, who: str, key: str, presenter: bool):
    """A continuation drawn as text, each token tinted by whether it is the copy's, a ✗ where not."""
    status = statuses(list(written_ids), list(copy_ids))
    hover = [
        f"wrote “{escape_label(w)}”"
        + (f", the copy has “{escape_label(copy_labels[k])}”" if k < len(copy_labels) else "")
        for k, w in enumerate(written_labels)
    ]
    compared = sum(1 for s in status if s)
    matched = status.count("match")
    miss = first_miss(status)
    figure = text_figure(list(written_labels), status, title=who, presenter=presenter, per_line=20, hover=hover)
    said = f"{matched} of {compared} tokens are the copy's" if compared else "no copy to compare with"
    caption = f"{said}; " + (
        f"the first that differs is number {miss + 1} (✗)." if miss is not None else "none differs."
    )
    return Written(panel=Panel(key, who, caption, figure), matched=matched, first_miss=miss, compared=compared)


def comparison_sentence(intact: Written, knocked: Written | None, who: str) -> str:
    """The two continuations in one sentence, from the counts the panels show."""
    if not intact.compared:
        return (
            "Your sentence repeats no stretch yet, so there is no copy to compare with: type a sentence, then its "
            "first few words again (or press “Start the copy”), and the model continues it."
        )

    def part(view: Written) -> str:
        at = f"first differs at token {view.first_miss + 1}" if view.first_miss is not None else "never differs"
        return f"**{view.matched} of {view.compared}** tokens match the copy ({at})"

    said = f"With every head: {part(intact)}."
    return said + (f" Without {who}: {part(knocked)}." if knocked is not None else "")


# --- item 3: one position read closely --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PositionView:
    text: Panel
    top: Panel
    attribution: Panel
    sentence: str


def position_view(reading: CharacterReading, pos: int, layer: int, *, own: bool, presenter: bool) -> PositionView:
    """Position ``pos`` (0 … T − 2) of ``reading``: layer ``layer``'s heads' weights from it on the text, the top
    guesses, each head's direct logit attribution to the right next token, and a sentence from those numbers."""
    n = len(reading.ids)
    status = [""] * n
    if own:
        status = ["given"] * reading.given + statuses(
            list(reading.ids[reading.given :]), list(reading.true_ids[reading.given :])
        )
    overlay = np.zeros((reading.weights.shape[1], n), dtype=np.float32)
    overlay[:, : pos + 1] = reading.weights[layer, :, pos, : pos + 1]  # (h, keys up to pos)
    text = Panel(
        "position_text",
        "Where each head looks",
        f"`attn_weights[{layer}, :, {pos}, :]` · shape (h, T) = ({overlay.shape[0]}, {n}) · under each token one strip "
        f"per head of layer {layer}, as opaque as the weight the position in the solid box puts on it; the dashed box "
        "is the token it should predict. Click a token to read from it; click a head in the legend to hide it."
        + (
            f" Given the first {reading.given} tokens (grey), the model wrote the other {n - reading.given} on its "
            "own, greedy, each tinted by whether it is the text's (orange with ✗: not)."
            if own
            else ""
        ),
        text_figure(
            list(reading.labels),
            status,
            title=f"Layer {layer}'s heads reading from token {pos}",
            presenter=presenter,
            per_line=40,
            overlay=overlay,
            chosen=(pos, pos + 1),
        ),  # fmt: skip
    )
    right = reading.true_ids[pos + 1]
    labels = list(reading.top_labels[pos])
    marks = ["✓ " if int(i) == right else "" for i in reading.top_ids[pos]]
    top = Panel(
        "position_top",
        "The model's top guesses",
        f"softmax of the logits at position {pos} · shape (V,), the top {len(labels)} shown; ✓ marks the right next "
        f"token, which has probability {reading.right_prob[pos]:.3f}.",
        figures.bar_chart(
            [f"{m}“{label}”" for m, label in zip(marks, labels, strict=True)],
            [float(p) for p in reading.top_probs[pos]],
            title=f"After token {pos}: the next token",
            y_title="probability",
            presenter=presenter,
        ),  # fmt: skip
    )
    return PositionView(text=text, top=top, attribution=attribution_panel(reading, pos, presenter),
                        sentence=position_sentence(reading, pos, own=own))  # fmt: skip


def attribution_panel(reading: CharacterReading, pos: int, presenter: bool) -> Panel:
    """Every head's and every other part's direct logit attribution at ``pos``; they add up to the logit."""
    num_layers, num_heads = reading.head_dla.shape[:2]
    names = [f"L{layer} H{head}" for layer in range(num_layers) for head in range(num_heads)]
    values = [float(v) for v in reading.head_dla[:, :, pos].reshape(-1)]
    colors = [head_colors(num_heads)[k % num_heads] for k in range(len(names))]
    for name, part in reading.other_dla.items():
        names.append(name.replace("attention bias", "out_proj bias").replace("final LayerNorm shift", "LN shift"))
        values.append(float(part[pos]))
        colors.append("#7f7f7f")
    total = sum(values)
    right = escape_label(reading.true_labels[pos + 1])
    return Panel(
        "position_attribution",
        "Which part raised the right token's logit",
        f"direct logit attribution at position {pos} · shape (L, h) = ({num_layers}, {num_heads}) heads, then the "
        "rest of the residual stream in grey · each part centred, divided by the final LayerNorm's scale frozen at this"
        f" position, times its weight, read by the unembedding's row of the right token. Together: {total:.4f}; the "
        f"logit itself: {float(reading.logit[pos]):.4f}.",
        figures.bar_chart(
            names,
            values,
            title=f"Direct logit attribution to “{right}”, the right next token",
            y_title="logit",
            colors=colors,
            presenter=presenter,
        ),  # fmt: skip
    )


def position_sentence(reading: CharacterReading, pos: int, *, own: bool) -> str:
    """What happened at ``pos``, from the reading's numbers: the guess, right or not, and the head that helped most."""
    guess, right = reading.top_labels[pos][0], reading.true_ids[pos + 1]
    ok = int(reading.top_ids[pos][0]) == right
    layer, head = np.unravel_index(int(np.argmax(reading.head_dla[:, :, pos])), reading.head_dla.shape[:2])
    best = float(reading.head_dla[layer, head, pos])
    reads = "reading what it wrote itself" if own and pos >= reading.given else "with the true text given"
    verdict = "right" if ok else f"wrong (the text has “{escape_markdown(reading.true_labels[pos + 1])}”)"
    return (
        f"At token {pos} ({reads}) the model's first guess is “{escape_markdown(guess)}” with probability "
        f"{float(reading.top_probs[pos][0]):.2f}: {verdict}. The head that raised the right token's logit most is "
        f"**L{layer} H{head}** ({best:+.2f} of {float(reading.logit[pos]):.2f})."
    )
