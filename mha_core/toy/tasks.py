"""The synthetic tasks a tiny model is trained on: how each is sampled, where each query should attend, what it outputs.

Every task states where each scored query position *should* attend (``Task.attend_to``). The
target is read off that key position, and ``Task.pattern_score`` measures how much weight each head
puts there. Data is sampled on the fly from a seeded ``torch.Generator``: nothing is downloaded.

* ``previous_token``: output token t-1 (position-based; one layer).
* ``first_token``: output token 0 (position-based; one layer).
* ``key_value_lookup``: pairs "A=3" with distinct keys, then queries "A?"; output the value of the
  pair whose key matches (content-based; one layer, because each pair is a single token).
* ``induction``: a segment of distinct tokens repeated; in the repeat, output the token that followed
  the current token's previous occurrence (two layers: a previous-token head feeds an induction head).

Axis letters: b batch, t query position, s key position, h heads, T tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

NOT_SCORED = -1  # attend_to value for a position the task does not score


def _most_recent_earlier(match: torch.Tensor) -> torch.Tensor:
    """(b, t, s) bool "key s matches query t" -> (b, t) latest s < t that matches, else NOT_SCORED."""
    num_tokens = match.shape[-1]
    earlier = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=match.device).tril(-1)  # (t, s): s < t
    match = match & earlier  # (b, t, s)
    positions = torch.arange(num_tokens, device=match.device)  # (s,)
    return torch.where(match, positions, NOT_SCORED).amax(dim=-1)  # (b, t)


def _distinct_tokens(gen: torch.Generator, batch_size: int, length: int, vocab_size: int) -> torch.Tensor:
    """(b, length) rows of distinct tokens from [0, vocab_size): the first `length` of a random permutation."""
    return torch.rand(batch_size, vocab_size, generator=gen).argsort(dim=-1)[:, :length]  # (b, length)


# previous_token ----------------------------------------------------------------------------


def _sample_uniform(gen, batch_size, seq_len, vocab_size):
    return torch.randint(vocab_size, (batch_size, seq_len), generator=gen)  # (b, T)


def _attend_previous(tokens):
    positions = torch.arange(tokens.shape[-1]).expand_as(tokens)  # (b, T)
    return torch.where(positions >= 1, positions - 1, NOT_SCORED)


def _attend_first(tokens):
    positions = torch.arange(tokens.shape[-1]).expand_as(tokens)  # (b, T)
    return torch.where(positions >= 1, 0, NOT_SCORED)


# key_value_lookup --------------------------------------------------------------------------
# Vocabulary layout for n keys (letters) and n values (digits):
#   [0, n)              value tokens "0".."n-1"  (only ever targets)
#   [n, n + n·n)        pair tokens  "A=3": key k, value v at id n + k·n + v
#   [n + n·n, n·(n+2))  query tokens "A?"  : key k at id n + n·n + k


def _lookup_size(vocab_size: int) -> int:
    """Largest n (keys = values = n) whose vocabulary n·(n+2) fits in vocab_size."""
    return int(math.isqrt(vocab_size + 1)) - 1


def _sample_lookup(gen, batch_size, seq_len, vocab_size):
    """P = ceil(T / 2) pairs with distinct keys, then Q = T - P queries asking distinct keys among them."""
    n = _lookup_size(vocab_size)
    num_pairs = (seq_len + 1) // 2
    keys = _distinct_tokens(gen, batch_size, num_pairs, n)  # (b, P)
    values = torch.randint(n, (batch_size, num_pairs), generator=gen)  # (b, P)
    pairs = n + keys * n + values  # (b, P)
    asked = _distinct_tokens(gen, batch_size, seq_len - num_pairs, num_pairs)  # (b, Q): which pair each query asks
    queries = n + n * n + keys.gather(1, asked)  # (b, Q)
    return torch.cat([pairs, queries], dim=1)  # (b, T)


def _lookup_parts(tokens, vocab_size):
    """Per token: (key or -1, is a pair token, is a query token), each (b, T)."""
    n = _lookup_size(vocab_size)
    is_pair = (tokens >= n) & (tokens < n + n * n)
    is_query = tokens >= n + n * n
    key = torch.where(is_pair, (tokens - n) // n, torch.where(is_query, tokens - n - n * n, -1))
    return key, is_pair, is_query


def _attend_lookup(tokens, vocab_size):
    key, is_pair, is_query = _lookup_parts(tokens, vocab_size)
    match = (key[:, :, None] == key[:, None, :]) & is_query[:, :, None] & is_pair[:, None, :]  # (b, t, s)
    return _most_recent_earlier(match)


def _target_lookup(tokens, attend_to, vocab_size):
    n = _lookup_size(vocab_size)
    attended = tokens.gather(1, attend_to.clamp(min=0))  # (b, T): the pair token looked up
    return (attended - n) % n  # its value part, which is the id of value token "v"


def _label_lookup(token, vocab_size):
    n = _lookup_size(vocab_size)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if token < n:
        return str(token)
    if token < n + n * n:
        key, value = divmod(token - n, n)
        return f"{letters[key % 26]}={value}"
    return f"{letters[(token - n - n * n) % 26]}?"


def _check_lookup(vocab_size, seq_len):
    n = _lookup_size(vocab_size)
    num_pairs = (seq_len + 1) // 2
    if seq_len < 2 or n < num_pairs:
        raise ValueError(
            f"key_value_lookup needs seq_len >= 2 and (seq_len + 1) // 2 = {num_pairs} distinct keys, "
            f"but vocab_size={vocab_size} holds only {n} keys (n keys need vocab_size >= n·(n+2))"
        )


# induction ---------------------------------------------------------------------------------


def _sample_repeated_segment(gen, batch_size, seq_len, vocab_size):
    """Rows of distinct tokens: prefix (T - 2p), segment (p), the same segment again.

    The segment length p varies by row, in [T // 4, T // 2], so no fixed positional offset
    finds the earlier copy; the model has to match content. All tokens before the repeat are
    distinct, so every repeated token has exactly one earlier occurrence.
    """
    segment_len = torch.randint(max(2, seq_len // 4), seq_len // 2 + 1, (batch_size, 1), generator=gen)  # (b, 1)
    distinct = _distinct_tokens(gen, batch_size, seq_len, vocab_size)  # (b, T); only the first T - p are used
    positions = torch.arange(seq_len)  # (T,)
    source = torch.where(positions < seq_len - segment_len, positions, positions - segment_len)  # (b, T)
    return distinct.gather(1, source)  # (b, T)


def _attend_induction(tokens):
    match = tokens[:, :, None] == tokens[:, None, :]  # (b, t, s)
    previous = _most_recent_earlier(match)  # (b, T)
    return torch.where(previous >= 0, previous + 1, NOT_SCORED)


def _check_induction(vocab_size, seq_len):
    if seq_len < 4 or vocab_size < seq_len:
        raise ValueError(
            f"induction needs seq_len >= 4 and vocab_size >= seq_len (tokens before the repeat are distinct), "
            f"got seq_len={seq_len}, vocab_size={vocab_size}"
        )


def _check_any(vocab_size, seq_len):
    if seq_len < 2:
        raise ValueError(f"seq_len must be at least 2, got {seq_len}")


# the registry --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TaskDefaults:
    """The default budget: what ``train`` uses for arguments left as None."""

    num_layers: int
    vocab_size: int
    seq_len: int
    steps: int
    batch_size: int
    lr: float


class TaskBatch(NamedTuple):
    """One sampled batch. Unscored positions have attend_to = NOT_SCORED and a meaningless target."""

    tokens: torch.Tensor  # (b, T) long
    targets: torch.Tensor  # (b, T) long
    scored: torch.Tensor  # (b, T) bool
    attend_to: torch.Tensor  # (b, T) long: the key position each scored query should attend to


@dataclass(frozen=True, kw_only=True)
class Task:
    """A synthetic task: how to sample it, where each query should attend, what it must output."""

    name: str
    description: str  # one sentence, for the page
    defaults: TaskDefaults
    sample_tokens: Callable = field(repr=False)  # (gen, b, T, vocab_size) -> tokens (b, T)
    find_key: Callable = field(repr=False)  # (tokens (b, T), vocab_size) -> expected key (b, T) or NOT_SCORED
    read_target: Callable | None = field(default=None, repr=False)  # (tokens, key, vocab_size) -> (b, T); None: copy
    token_label: Callable | None = field(default=None, repr=False)  # (token id, vocab_size) -> str; None: the id
    check_sizes: Callable = field(default=_check_any, repr=False)  # (vocab_size, T) -> None, or ValueError

    def check(self, vocab_size: int, seq_len: int) -> None:
        """Raise ValueError if this task cannot be sampled at this vocabulary size and length."""
        _check_any(vocab_size, seq_len)
        self.check_sizes(vocab_size, seq_len)

    def attend_to(self, tokens: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """(b, T) -> (b, T): the key position each query should attend to, NOT_SCORED where none."""
        return self.find_key(tokens, vocab_size)

    def targets(self, tokens: torch.Tensor, attend_to: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """(b, T) target ids, read off the expected key (meaningless where NOT_SCORED)."""
        if self.read_target is None:
            return tokens.gather(-1, attend_to.clamp(min=0))  # (b, T): copy the attended token
        return self.read_target(tokens, attend_to, vocab_size)

    def batch(self, gen: torch.Generator, batch_size: int, seq_len: int, vocab_size: int) -> TaskBatch:
        """Sample tokens and derive expected keys, scored positions and targets from them."""
        tokens = self.sample_tokens(gen, batch_size, seq_len, vocab_size)  # (b, T)
        attend_to = self.attend_to(tokens, vocab_size)  # (b, T)
        targets = self.targets(tokens, attend_to, vocab_size)  # (b, T)
        return TaskBatch(tokens, targets, attend_to != NOT_SCORED, attend_to)

    def label(self, token: int, vocab_size: int) -> str:
        """A short readable name for one token id."""
        return str(token) if self.token_label is None else self.token_label(token, vocab_size)

    def pattern_score(self, weights, tokens, vocab_size: int | None = None) -> np.ndarray:
        """Mean attention weight each head puts on the expected key, over the scored query positions.

        weights: (h, T, T) or (b, h, T, T), tensor or array; tokens: (T,) or (b, T).
        Returns (h,) floats in [0, 1]. vocab_size matters only for key_value_lookup
        (default: the task's default vocab_size).
        """
        weights = torch.as_tensor(weights)
        tokens = torch.as_tensor(tokens).cpu()
        if weights.ndim == 3:
            weights, tokens = weights[None], tokens.reshape(1, -1)  # (1, h, T, T), (1, T)
        vocab_size = self.defaults.vocab_size if vocab_size is None else vocab_size
        attend_to = self.attend_to(tokens, vocab_size).to(weights.device)  # (b, T)
        scored = attend_to != NOT_SCORED  # (b, T)
        index = attend_to.clamp(min=0)[:, None, :, None].expand(-1, weights.shape[1], -1, 1)  # (b, h, T, 1)
        on_expected = weights.gather(-1, index)[..., 0]  # (b, h, T): weight each query puts on its expected key
        on_expected = on_expected * scored[:, None, :]  # (b, h, T): zero where not scored
        return (on_expected.sum(dim=(0, 2)) / scored.sum().clamp(min=1)).double().cpu().numpy()  # (h,)


def _ignore_vocab(fn):
    """Adapt a (tokens) -> keys function to the (tokens, vocab_size) signature tasks share."""
    return lambda tokens, vocab_size: fn(tokens)


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="previous_token",
            description="At each position output the token just before it; positions t >= 1 are scored.",
            defaults=TaskDefaults(num_layers=1, vocab_size=16, seq_len=16, steps=200, batch_size=64, lr=1e-2),
            sample_tokens=_sample_uniform,
            find_key=_ignore_vocab(_attend_previous),
        ),
        Task(
            name="first_token",
            description="At each position output the sequence's first token; positions t >= 1 are scored.",
            defaults=TaskDefaults(num_layers=1, vocab_size=16, seq_len=16, steps=200, batch_size=64, lr=1e-2),
            sample_tokens=_sample_uniform,
            find_key=_ignore_vocab(_attend_first),
        ),
        Task(
            name="key_value_lookup",
            description=(
                "The first half holds pairs like A=3 with distinct keys; at each query like A? in the second "
                "half output the value paired with that key (content-based: the key position is random)."
            ),
            defaults=TaskDefaults(num_layers=1, vocab_size=80, seq_len=12, steps=400, batch_size=64, lr=1e-2),
            sample_tokens=_sample_lookup,
            find_key=_attend_lookup,
            read_target=_target_lookup,
            token_label=_label_lookup,
            check_sizes=_check_lookup,
        ),
        Task(
            name="induction",
            description=(
                "Distinct random tokens end with a segment of varying length repeated; in the repeat, predict the "
                "next token by finding the current token's previous occurrence and copying what followed it."
            ),
            defaults=TaskDefaults(num_layers=2, vocab_size=16, seq_len=16, steps=400, batch_size=64, lr=1e-2),
            sample_tokens=_sample_repeated_segment,
            find_key=_ignore_vocab(_attend_induction),
            check_sizes=_check_induction,
        ),
    )
}
