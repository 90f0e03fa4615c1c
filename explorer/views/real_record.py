"""What the Real heads page says from the shipped model's record (``own_gpt.json``): its recipe, held-out loss, the
repeated-English probe and its knock-outs, and the training curve with the induction phase change. Pure: a record
(a dict, possibly missing any key) in, sentences and panels out; every number printed is the record's.

Axis letters: none (lists of steps and losses).
"""

from __future__ import annotations

import math

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
    "text_repeat_rows": "windows of the documentation in which a stretch is written again later",
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
    return said


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
    return lines + probe_lines(record)
