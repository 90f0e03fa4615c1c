"""What the Real heads page says from the shipped model's record (``own_gpt.json``): its recipe, held-out loss, the
repeated-English probe and its knock-outs, and the training curve with the induction phase change. Pure: a record
(a dict, possibly missing any key) in, sentences and panels out; every number printed is the record's.

Axis letters: none (lists of steps and losses).
"""

from __future__ import annotations

import math

from mha_core.gpt.writing_probe import PREFIX as PROBE_PREFIX

from . import figures
from .figures.panel import Panel
from .figures.style import escape_label, escape_markdown


def number(record: dict, *names: str) -> float | None:
    """The first of ``names`` that the record holds as a finite number."""
    for key in names:
        value = record.get(key) if isinstance(record, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _count(recipe: dict, key: str) -> int:
    value = recipe.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


ROW_KINDS = {  # recipe field -> what its rows are (the training's, mha_core.gpt.data)
    "text_repeat_rows": "documentation in which a stretch is written again later",
    "periodic_rows": "a stretch of the documentation written again and again",
    "doubled_rows": "sentences of the documentation each typed twice",
    "few_letter_rows": "random strings of a few common letters with a stretch repeated",
    "repeat_rows": "random bytes with a stretch repeated",
}


def _rows(recipe: dict, kinds) -> str:
    return "; ".join(f"{_count(recipe, key)} rows of {ROW_KINDS[key]}" for key in kinds if _count(recipe, key))


def recipe_line(record: dict) -> str:
    """The recipe's phases in words, each with its numbers from the record; "" when the record has no recipe."""
    recipe = record.get("recipe") if isinstance(record.get("recipe"), dict) else {}
    steps, warmup = _count(recipe, "steps"), _count(recipe, "induction_warmup")
    if not steps or not warmup:
        return ""
    tokens = record.get("tokens") if isinstance(record.get("tokens"), dict) else {}
    seen = f" of {tokens['train']:,} bytes" if isinstance(tokens.get("train"), int) else ""
    where = escape_markdown(record["corpus"]) if isinstance(record.get("corpus"), str) else "pydoc_data.topics"
    said = (
        f"Recipe: {steps:,} AdamW steps. The first {warmup:,} see only random bytes, each row a random stretch "
        "repeated (the Trained heads page's induction task), where copying pays at once; none of that is text. "
        f"From step {warmup:,}, each batch holds {_count(recipe, 'batch_size')} windows of Python's documentation "
        f"(the training text{seen}: {where})"
    )
    middle = _rows(recipe, ROW_KINDS)
    said += f" beside {middle}." if middle else "."
    later = _count(recipe, "curriculum_start")
    if later and later < steps:
        letters = f"{_count(recipe, 'alphabet_from')} letters falling to {_count(recipe, 'alphabet_to')}"
        rest = _rows(recipe, ("periodic_rows", "doubled_rows"))
        said += (
            f" From step {later:,} on: {_count(recipe, 'alphabet_rows')} rows of random letters from an alphabet of "
            f"{letters}, a stretch repeated (only a match on several characters finds the copy), the documentation "
            f"windows{f', and {rest}' if rest else ''}."
        )
    polish = _count(recipe, "polish_start")
    if polish and polish < steps:
        said += (
            f" From step {polish:,} to the end: {_count(recipe, 'polish_text_rows')} documentation windows, "
            f"{_count(recipe, 'polish_doubled_rows')} rows of {ROW_KINDS['doubled_rows']} and "
            f"{_count(recipe, 'polish_alphabet_rows')} rows of random strings over {_count(recipe, 'alphabet_to')} "
            "letters, each kind weighed the same."
        )
    return said


def writing_line(record: dict) -> str:
    """What the model writes on its own, from the record's free-running probe (``writing_probe``); "" without it."""
    writing = record.get("writing")
    if not isinstance(writing, dict) or not isinstance(writing.get("sentences"), int):
        return ""
    to_write = writing.get("to_write") or []
    shortest, longest = min(to_write, default=0) + PROBE_PREFIX, max(to_write, default=0) + PROBE_PREFIX
    return (
        f"Writing on its own (greedy, each next character its own guess), given a sentence it never saw, a space and "
        f"the first {PROBE_PREFIX} characters of the sentence again, it finishes the copy exactly for "
        f"**{writing['completed']} of {writing['sentences']}** sentences of {shortest}–{longest} characters; the "
        f"median is **{writing['median_before_mistake']:g}** characters before its first mistake, and one mistake "
        "sends the rest astray (the copy is then read from the wrong place)."
    )


def probe_lines(record: dict) -> list[str]:
    """The developers' repeated-English probe: sentences the model never saw, each typed twice."""
    probe = record.get("english_probe")
    if not isinstance(probe, dict) or not isinstance(probe.get("sentences"), int):
        return []
    first, second = number(probe, "first_copy_loss"), number(probe, "second_copy_loss")
    return [
        f"On {probe['sentences']} English sentences it never saw, each typed twice: the best induction head puts "
        f"**{probe['best_induction']:.2f}** of its weight on the token after the earlier copy; the loss falls from "
        f"**{first:.2f}** nats per byte on the first copy to **{second:.2f}** on the second, a gain of "
        f"**{first - second:.2f}** from repetition, and with the true text given the greedy guess is right "
        f"**{probe['second_copy_accuracy']:.0%}** of the time on the second copy. Its best previous-token head "
        f"scores {probe['best_previous_token_on_text']:.2f} on plain held-out text."
    ]


def _gain(first: float | None, second: float | None) -> str:
    if first is None or second is None:
        return f"second copy **{second:.2f}**" if second is not None else ""
    return f"**{first:.2f} → {second:.2f}**, a gain of **{first - second:.2f}**"


def knockout_record_lines(record: dict) -> str:
    """What knocking out the previous-token and the induction heads did on the probe, from the record: each copy's
    loss and the gain from repetition (the first copy's loss moves too, so the second's alone would mislead)."""
    probe = record.get("english_probe")
    if not isinstance(probe, dict) or not probe.get("knockouts"):
        return ""
    said = [
        f"Measured on {probe['sentences']} repeated English sentences, with the true text given, in nats per byte "
        f"(first copy → second copy, and the gain from repetition): with every head "
        f"{_gain(number(probe, 'first_copy_loss'), number(probe, 'second_copy_loss'))} "
        f"({probe['second_copy_accuracy']:.0%} of the second copy guessed)."
    ]
    for row in probe["knockouts"]:
        heads = ", ".join(f"L{layer} H{head}" for layer, head in row["heads"])
        how = "zeroed" if row["mode"] == "zero" else "mean-ablated"
        said.append(
            f"The {escape_label(row['kind'])} ({heads}) {how}: "
            f"{_gain(number(row, 'first_copy_loss'), number(row, 'second_copy_loss'))} "
            f"({row['second_copy_accuracy']:.0%})."
        )
    return " ".join(said)


def about_lines(name: str, record: dict, facts) -> list[str]:
    """Plain sentences on the model: its shape, and for the shipped one its recipe, held-out loss and probe."""
    shape = (
        f"{facts.n_layers} layers × {facts.n_heads} heads, emb_dim {facts.emb_dim}, reading up to "
        f"{facts.context_length} tokens from a vocabulary of {facts.vocab_size:,}"
    )
    if name == "gpt2":
        return [
            f"**GPT-2** (OpenAI, 2019; 124M parameters): {shape}. Its weights are loaded into the book's "
            "`GPTModel`, so every head is the project's own `MultiHeadAttention`."
        ]
    lines = [
        f"**Our own GPT**: the book's `GPTModel` (chapter 4), {shape}, trained here on Python's documentation, one "
        "token per byte (a character, for English). Every block's attention is the project's own "
        "`MultiHeadAttention`: the module the Explorer traces."
    ]
    lines += [line for line in [recipe_line(record)] if line]
    held_out, unigram = number(record, "heldout_loss"), number(record, "unigram_heldout_loss")
    scored = record.get("heldout_tokens_scored")
    if held_out is not None and unigram is not None and isinstance(scored, int):
        lines.append(
            f"Held-out loss **{held_out:.2f}** nats per byte on all {scored:,} held-out bytes of the documentation, "
            f"against **{unigram:.2f}** for a unigram model on the same bytes (the same guess at every position, "
            "from byte counts alone): the difference is what context buys."
        )
    return lines + probe_lines(record) + [line for line in [writing_line(record)] if line]


# --- the phase change (item 4): the training curve, and the saved checkpoints' scores -------------------------------


def _curve(record: dict) -> tuple[list[int], list[float]]:
    """(steps, losses) of the record's ``train_loss`` ({"10": 5.66, ...}), in step order; empty when absent."""
    raw = record.get("train_loss") if isinstance(record.get("train_loss"), dict) else {}
    pairs = sorted((int(k), float(v)) for k, v in raw.items() if str(k).isdigit() and isinstance(v, int | float))
    return [s for s, _ in pairs], [v for _, v in pairs]


def induction_fall(steps: list[int], losses: list[float], warmup: int) -> dict | None:
    """Where the loss on the induction rows (the only rows before ``warmup``) falls: its plateau (the first five
    logged losses' mean), its value at the warm-up's end, and the first logged steps below 90 %, 50 % and 10 % of the
    way down; None when the curve does not fall."""
    inside = [(s, v) for s, v in zip(steps, losses, strict=True) if s <= warmup]
    if len(inside) < 6:
        return None
    plateau, end = sum(v for _, v in inside[:5]) / 5, inside[-1][1]
    if plateau - end < 1.0:
        return None

    def below(share: float) -> int:
        return next(s for s, v in inside if v < end + share * (plateau - end))

    return {"plateau": plateau, "end": end, "end_step": inside[-1][0], "from": below(0.9), "half": below(0.5),
            "to": below(0.1)}  # fmt: skip


def _marked(fig, step: int, label: str, *, at: float = 1.0, dash: str = "dot"):
    """A vertical line at ``step`` across the plot, labelled at height ``at`` (a share of the plot)."""
    fig.add_shape(type="line", x0=step, x1=step, xref="x", yref="paper", y0=0, y1=1, line={"dash": dash, "width": 2})
    fig.add_annotation(x=step, y=at, xref="x", yref="paper", text=label, showarrow=False, xanchor="left",
                       yanchor="top" if at > 0.5 else "bottom")  # fmt: skip
    return fig


def phase_change(record: dict, *, presenter: bool):
    """(panels, sentence): the training curve with the induction rows' fall marked, and, when the record holds
    saved checkpoints' measurements (``milestones``), the induction score and the copy loss against the step."""
    steps, losses = _curve(record)
    if not steps:
        return [], ""
    recipe = record.get("recipe") if isinstance(record.get("recipe"), dict) else {}
    warmup = _count(recipe, "induction_warmup") or steps[-1]
    fall = induction_fall(steps, losses, warmup)
    fig = figures.line_chart(steps, {"training loss (each logged batch)": losses}, title="The training curve",
                             x_title="step", y_title="loss (nats)", log_y=True, presenter=presenter)  # fmt: skip
    if fall:
        _marked(fig, fall["half"], f" half-way down, step {fall['half']}")
    if warmup < steps[-1]:
        _marked(fig, warmup, f" step {warmup}: text from here on", at=0.02, dash="dash")
    every = steps[1] - steps[0] if len(steps) > 1 else 1
    caption = f"`train_loss` of the record · {len(steps)} batches, one logged every {every} steps · log scale"
    panels = [Panel("training_curve", "The training curve", caption, fig)]
    said = phase_sentence(fall, warmup)
    points = [m for m in record.get("milestones", []) if isinstance(m, dict) and isinstance(m.get("step"), int)]
    if points:
        panels += milestone_panels(points, fall, presenter)
        said += " " + milestone_sentence(points)
    else:
        said += " The record keeps no checkpoints' scores, so the induction score cannot be drawn against the step."
    return panels, said


def phase_sentence(fall: dict | None, warmup: int) -> str:
    if fall is None:
        return f"In its first {warmup:,} steps (induction rows only) the loss does not fall by a nat: no phase change."
    return (
        f"In the first {warmup:,} steps every row is an induction row (random bytes, a stretch repeated): the loss "
        f"sits at **{fall['plateau']:.2f}** nats, then falls to **{fall['end']:.3f}** by step {fall['end_step']:,}, "
        f"most of the way between steps **{fall['from']:,}** and **{fall['to']:,}** (from 90 % to 10 % of the way "
        f"down), half-way at step {fall['half']:,} (marked): the phase change in which induction heads form "
        "(Olsson et al. 2022)."
    )


MILESTONE_SERIES = {
    "induction": {
        "probe_induction": "random tokens repeated",
        "english_induction": "held-out English typed twice",
    },  # fmt: skip
    "copy": {"english_first_copy_loss": "first copy", "english_copy_loss": "second copy (the copy)"},
}


def milestone_panels(points: list[dict], fall: dict | None, presenter: bool) -> list:
    """The saved checkpoints' induction scores and the held-out copy's loss against the step."""
    steps = [p["step"] for p in points]
    panels = []
    for key, names in MILESTONE_SERIES.items():
        series = {label: [number(p, field) for p in points] for field, label in names.items()}
        series = {label: ys for label, ys in series.items() if all(y is not None for y in ys)}
        if not series:
            continue
        what = "score (mean weight)" if key == "induction" else "loss (nats per byte)"
        title = "Best induction head, by checkpoint" if key == "induction" else "Copy loss, by checkpoint"
        fig = figures.line_chart(steps, series, title=title,
                                 x_title="step", y_title=what, presenter=presenter)  # fmt: skip
        if fall:  # labelled low: the legend sits at the top
            _marked(fig, fall["half"], f" step {fall['half']}", at=0.02)
        panels.append(Panel(f"milestones_{key}", what, f"the record's `milestones` · {len(steps)} checkpoints", fig))
    return panels


def milestone_sentence(points: list[dict]) -> str:
    first, last = points[0], points[-1]
    said = []
    if number(first, "english_induction") is not None and number(last, "english_induction") is not None:
        said.append(
            "On held-out English typed twice the best induction head's score goes from "
            f"{first['english_induction']:.2f} at step {first['step']:,} to {last['english_induction']:.2f} at step "
            f"{last['step']:,}"
        )
    if number(first, "english_copy_loss") is not None and number(last, "english_copy_loss") is not None:
        said.append(
            f"the copy's loss from {first['english_copy_loss']:.2f} to {last['english_copy_loss']:.2f} nats per byte"
        )
    return ("; ".join(said) + ".") if said else ""
