"""What the shipped GPT learns from: Python's own documentation as bytes, and the induction rows mixed in.

The corpus is ``pydoc_data.topics.topics`` (the text behind ``help('topics')``, about 465 KB of English that
every Python install has), so the model trains anywhere with no download. Topics are taken in sorted key
order; the last ``HELDOUT_TOPICS`` are held out, unseen by the model.

Text alone on the 30-minute CPU budget grows a previous-token head but no induction head, so training rows
of the Trained heads page's induction task (``mha_core.toy.tasks``: distinct random ids, then a segment repeated)
are mixed in, scored only on the repeat, where the next token is predictable (docs/decisions.md). Random bytes
teach a one-byte match, which English defeats (a byte has many earlier occurrences), so rows of English repeated
(``repeated_text_rows``, ``periodic_text_rows``) and of a few letters repeated (``few_letter_rows``, where only
a match on several bytes finds the copy) follow.

Axis letters: b batch, T tokens, V vocabulary.
"""

from __future__ import annotations

import math
import re
from pydoc_data.topics import topics

import torch

from mha_core.toy import tasks

HELDOUT_TOPICS = 6  # of 79 topics, about 8% of the text


def corpus() -> tuple[str, str]:
    """(training text, held-out text): the topics in sorted key order, the last ``HELDOUT_TOPICS`` held out."""
    keys = sorted(topics)
    if len(keys) <= HELDOUT_TOPICS:
        raise ValueError(f"pydoc_data has {len(keys)} topics, need more than {HELDOUT_TOPICS}")
    train_keys, heldout_keys = keys[:-HELDOUT_TOPICS], keys[-HELDOUT_TOPICS:]
    return "\n\n".join(topics[k] for k in train_keys), "\n\n".join(topics[k] for k in heldout_keys)


def encode(tokenizer, text: str) -> torch.Tensor:
    """The whole text as one (N,) int64 tensor of ids."""
    return torch.tensor(tokenizer.encode(text), dtype=torch.int64)


def text_windows(ids: torch.Tensor, gen: torch.Generator, batch_size: int, length: int) -> torch.Tensor:
    """(b, length): windows of the token stream at seeded random offsets."""
    if ids.numel() <= length:
        raise ValueError(f"the text has {ids.numel()} tokens, need more than {length} for one window")
    starts = torch.randint(0, ids.numel() - length + 1, (batch_size,), generator=gen)  # (b,)
    return ids[starts[:, None] + torch.arange(length)]  # (b, length)


def induction_rows(
    gen: torch.Generator, batch_size: int, length: int, vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids (b, T), targets (b, T), scored (b, T) bool): the induction task's rows (``tasks.TASKS["induction"]``),
    distinct random ids ending with a segment of varying length repeated. Only the repeat is scored: there the
    target is the token that followed this one's earlier occurrence; elsewhere random ids cannot be guessed."""
    batch = tasks.TASKS["induction"].batch(gen, batch_size, length, vocab_size)
    return batch.tokens, batch.targets, batch.scored


def heldout_windows(ids: torch.Tensor, context_length: int, max_windows: int | None = None) -> torch.Tensor:
    """(n, T + 1): consecutive non-overlapping windows of the held-out stream (the last partial one dropped)."""
    count = (ids.numel() - 1) // context_length
    if max_windows is not None:
        count = min(count, max_windows)
    if count < 1:
        raise ValueError(f"held-out text has {ids.numel()} tokens, fewer than one window of {context_length + 1}")
    starts = torch.arange(count) * context_length  # (n,)
    return ids[starts[:, None] + torch.arange(context_length + 1)]  # (n, T + 1)


def unigram_loss(train_ids: torch.Tensor, heldout_ids: torch.Tensor, vocab_size: int) -> float:
    """Held-out cross-entropy (nats per token) of the add-one-smoothed token frequencies of the training text:
    the loss of a model that ignores context, the bar a language model must clear."""
    counts = torch.bincount(train_ids, minlength=vocab_size).double() + 1.0  # (V,)
    log_probs = torch.log(counts / counts.sum())  # (V,)
    loss = -log_probs[heldout_ids].mean().item()
    if not math.isfinite(loss):
        raise ValueError(f"unigram loss is {loss}: held-out ids outside [0, {vocab_size})?")
    return loss


def _span(gen: torch.Generator, low: int, high: int) -> int:
    """One seeded integer in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def repeated_text_rows(
    ids: torch.Tensor, gen: torch.Generator, batch_size: int, length: int, span: tuple[int, int]
) -> torch.Tensor:
    """(b, length): text windows in which a stretch of ``span`` tokens is written again later in the same window,
    at a random place: the second copy can be read off the first by induction. Every target is scored."""
    low, high = span
    if not 1 <= low <= high <= length // 2:
        raise ValueError(f"need 1 <= span low <= high <= length // 2 = {length // 2}, got {span}")
    rows = text_windows(ids, gen, batch_size, length).clone()  # (b, length)
    for row in rows:
        size = _span(gen, low, high)
        first = _span(gen, 0, length - 2 * size)
        second = _span(gen, first + size, length - size)
        row[second : second + size] = row[first : first + size]
    return rows


def periodic_text_rows(
    ids: torch.Tensor, gen: torch.Generator, batch_size: int, length: int, span: tuple[int, int]
) -> torch.Tensor:
    """(b, length): a stretch of ``span`` text tokens, written again and again to fill the row, like a sentence
    typed twice (or more). Every target is scored."""
    low, high = span
    if not 1 <= low <= high < ids.numel():
        raise ValueError(f"need 1 <= span low <= high < {ids.numel()} tokens, got {span}")
    rows = []
    for _ in range(batch_size):
        size = _span(gen, low, high)
        start = _span(gen, 0, ids.numel() - size)
        rows.append(ids[start : start + size].repeat(length // size + 1)[:length])  # (length,)
    return torch.stack(rows)  # (b, length)


FEW_LETTERS = tuple(b"etaoinshrdlu ")  # the commonest bytes of English


def few_letter_rows(gen: torch.Generator, batch_size: int, length: int, letters: int) -> torch.Tensor:
    """(b, length): random strings over ``letters`` of the commonest English bytes, a stretch of them repeated
    later. With few letters each byte recurs every few positions, so only a match on several earlier bytes finds
    the copy: the skill English needs and random bytes do not teach. Every target is scored."""
    if not 2 <= letters <= len(FEW_LETTERS) or length < 8:
        raise ValueError(f"need 2 <= letters <= {len(FEW_LETTERS)} and length >= 8, got {letters} and {length}")
    pool = torch.tensor(FEW_LETTERS)
    rows = []
    for _ in range(batch_size):
        alphabet = pool[torch.randperm(len(pool), generator=gen)[:letters]]  # (letters,)
        row = alphabet[torch.randint(0, letters, (length,), generator=gen)]  # (length,)
        size = _span(gen, length // 8, length // 2)
        first = _span(gen, 0, length - 2 * size)
        second = _span(gen, first + size, length - size)
        row[second : second + size] = row[first : first + size]
        rows.append(row)
    return torch.stack(rows)  # (b, length)


def alphabet_rows(
    gen: torch.Generator, batch_size: int, length: int, letters: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids (b, T), targets (b, T), scored (b, T) bool): random strings over ``letters`` printable characters drawn
    afresh for each row, a stretch of T/4..T/2 written again later; scored inside the copy only (from its third
    token on), where the next token is the one after the same stretch earlier. With few letters every character
    recurs every few positions, so only a match on several characters finds the copy: taught with ``letters``
    falling from many (one character is enough) to few, a model's induction heads learn to match several."""
    if not 2 <= letters <= 94 or length < 16:
        raise ValueError(f"need 2 <= letters <= 94 and length >= 16, got {letters} and {length}")
    ids, targets, scored = [], [], []
    for _ in range(batch_size):
        alphabet = torch.randperm(94, generator=gen)[:letters] + 33  # (letters,) printable ASCII, no space
        row = alphabet[torch.randint(0, letters, (length + 1,), generator=gen)]  # (T + 1,)
        size = _span(gen, length // 4, length // 2)
        first = _span(gen, 0, length + 1 - 2 * size)
        second = _span(gen, first + size, length + 1 - size)
        row[second : second + size] = row[first : first + size]
        mask = torch.zeros(length, dtype=torch.bool)
        mask[second + 2 : second + size - 1] = True  # position t predicts t + 1, inside the copy
        ids.append(row[:-1])
        targets.append(row[1:])
        scored.append(mask)
    return torch.stack(ids), torch.stack(targets), torch.stack(scored)


def sentences(text: str, low: int, high: int) -> list[torch.Tensor]:
    """The text's sentences (split after . ! ? and at blank lines, whitespace collapsed) of ``low``..``high`` ASCII
    characters, each as (n,) byte ids: the English that ``doubled_rows`` repeats."""
    pieces = (" ".join(p.split()) for p in re.split(r"(?<=[.!?])\s+|\n\s*\n", text))
    kept = [torch.tensor(list(p.encode())) for p in pieces if low <= len(p) <= high and p.isascii()]
    if not kept:
        raise ValueError(f"the text has no sentence of {low}..{high} ASCII characters")
    return kept


def doubled_rows(
    pool: list[torch.Tensor], gen: torch.Generator, batch_size: int, length: int, ids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids (b, T), targets (b, T), scored (b, T) bool): rows of pieces of English each typed twice, a space between
    and a newline after ("S S\\nR R\\n..."), from the row's start until it is full; scored on the second copies
    only, where a model that reads the first can write every character: the free-running probe's task. A piece is a
    sentence from ``pool``, or with ``ids`` (the text) half the time a stretch of it as long as a pool sentence, so
    the copies never run out (a pool of a few thousand sentences could be learnt by heart)."""
    rows = torch.full((batch_size, length + 1), ord("\n"), dtype=torch.int64)  # (b, T + 1)
    scored = torch.zeros(batch_size, length + 1, dtype=torch.bool)  # (b, T + 1), over the targets' positions
    for row in range(batch_size):
        at = 0
        while at < length + 1:
            piece = pool[int(torch.randint(0, len(pool), (1,), generator=gen))]
            if ids is not None and bool(torch.rand(1, generator=gen) < 0.5):
                start = int(torch.randint(0, ids.numel() - len(piece), (1,), generator=gen))
                piece = ids[start : start + len(piece)]
            unit = torch.cat([piece, torch.tensor([ord(" ")]), piece, torch.tensor([ord("\n")])])[: length + 1 - at]
            rows[row, at : at + len(unit)] = unit
            scored[row, at + len(piece) + 1 : at + len(unit)] = True  # the second copy and its newline
            at += len(unit)
    return rows[:, :-1], rows[:, 1:], scored[:, 1:]
