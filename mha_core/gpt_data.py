"""What the shipped GPT learns from: Python's own documentation, a byte-level BPE made from it, and the batches.

The corpus is ``pydoc_data.topics.topics`` (the text behind ``help('topics')``, about 465 KB of English that
every Python install has), so the model trains anywhere with no download. Topics are taken in sorted key
order; the last ``HELDOUT_TOPICS`` are held out, unseen by the tokenizer and the model.

A share of each training batch is random tokens whose stretch repeats (the distribution of
``head_scores.repeated_random_tokens``, with varying period and offset), scored only where a repeat makes the
next token predictable: meant to reward an induction head, which plain text on this budget does not grow.
Within the 30-minute CPU budget it did not grow one either (docs/decisions.md has what was tried).

Axis letters: b batch, T tokens, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from .text_tokenizer import TextTokenizer

HELDOUT_TOPICS = 6  # of 79 topics, about 8% of the text


def corpus() -> tuple[str, str]:
    """(training text, held-out text): the topics in sorted key order, the last ``HELDOUT_TOPICS`` held out."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    if len(keys) <= HELDOUT_TOPICS:
        raise ValueError(f"pydoc_data has {len(keys)} topics, need more than {HELDOUT_TOPICS}")
    train_keys, heldout_keys = keys[:-HELDOUT_TOPICS], keys[-HELDOUT_TOPICS:]
    return "\n\n".join(topics[k] for k in train_keys), "\n\n".join(topics[k] for k in heldout_keys)


def train_tokenizer(text: str, vocab_size: int) -> TextTokenizer:
    """A byte-level BPE with ``vocab_size`` ids trained on ``text``: frequent words become one token, and any
    typed text still encodes (the 256 byte symbols are always in the vocabulary)."""
    if not 256 < vocab_size <= 65536:
        raise ValueError(f"vocab_size must be in (256, 65536] for a byte-level BPE, got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator([text], trainer=trainer)
    return TextTokenizer(tokenizer)


def encode(tokenizer: TextTokenizer, text: str) -> torch.Tensor:
    """The whole text as one (N,) int64 tensor of ids."""
    return torch.tensor(tokenizer.encode(text), dtype=torch.int64)


def text_windows(ids: torch.Tensor, gen: torch.Generator, batch_size: int, length: int) -> torch.Tensor:
    """(b, length): windows of the token stream at seeded random offsets."""
    if ids.numel() <= length:
        raise ValueError(f"the text has {ids.numel()} tokens, need more than {length} for one window")
    starts = torch.randint(0, ids.numel() - length + 1, (batch_size,), generator=gen)  # (b,)
    return ids[starts[:, None] + torch.arange(length)]  # (b, length)


def repeated_stretches(
    gen: torch.Generator, batch_size: int, length: int, vocab_size: int, alternating: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """((b, length) ids, (b, length - 1) bool): random ids in [0, V); from a random start, a random stretch
    repeats until the end. The mask marks the predictable targets (those inside a repeat), the only ones scored:
    the loss on unpredictable random tokens is pure noise.

    Row r: ``offset`` fresh tokens, then a stretch of ``period`` tokens tiled. Period and offset vary by row
    (period in [4, length // 2], offset in [0, length // 4]), so only content, not a fixed distance, finds the
    earlier copy. A share ``alternating`` of rows has period 2 (a b a b ...): there the previous token's
    neighbour is the answer, which rewards a previous-token head directly, the half of an induction circuit
    that longer repeats alone did not grow (docs/decisions.md).
    """
    if length < 32:
        raise ValueError(f"repeated stretches need length >= 32, got {length}")
    period = torch.randint(4, length // 2 + 1, (batch_size, 1), generator=gen)  # (b, 1)
    period = torch.where(torch.rand(batch_size, 1, generator=gen) < alternating, 2, period)  # (b, 1)
    offset = torch.randint(0, length // 4 + 1, (batch_size, 1), generator=gen)  # (b, 1)
    fresh = torch.randint(0, vocab_size, (batch_size, length), generator=gen)  # (b, length)
    positions = torch.arange(length)  # (length,)
    source = torch.where(positions < offset + period, positions, offset + (positions - offset) % period)  # (b, length)
    predictable = positions[1:] >= offset + period  # (b, length - 1): target t + 1 lies in a repeat
    return fresh.gather(1, source), predictable  # (b, length), (b, length - 1)


def training_batches(
    ids: torch.Tensor, gen: torch.Generator, sizes: tuple[int, int], vocab_size: int, repeat: tuple[float, int]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """[(text (b - r, T + 1), all scored), (repeated random stretches (r, R + 1), scored (r, R))] with
    r = round(share · b), empty parts left out. Each part: ids and which targets the loss counts.

    ``sizes`` = (b, T), ``repeat`` = (share, R, share of period 2); rows shorter than T (R < T) are cheaper.
    """
    batch_size, context_length = sizes
    share, length, alternating = repeat
    if not 0.0 <= share <= 1.0 or not 32 <= length <= context_length:
        raise ValueError(f"need repeat share in [0, 1] and length in [32, {context_length}], got {share}, {length}")
    num_repeated = round(share * batch_size)
    parts = []
    if num_repeated < batch_size:
        text = text_windows(ids, gen, batch_size - num_repeated, context_length + 1)  # (b - r, T + 1)
        parts.append((text, torch.ones(text.shape[0], context_length, dtype=torch.bool)))
    if num_repeated:
        rows = repeated_stretches(gen, num_repeated, length + 1, vocab_size, alternating)  # (r, R + 1), (r, R)
        parts.append(rows)
    return parts


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
