"""What kind of head is this? Scores read off attention weights, and the probe that reveals induction heads.

Every score is a mean attention weight on one key per query, so 1 means "always exactly there" and a
uniform head scores about 1/T:

* previous token: query i on key i-1 (i >= 1);
* first token: query i on key 0 (i >= 1; query 0 can attend nowhere else);
* induction (Olsson et al. 2022): on a random sequence of ``period`` tokens repeated, query i in a later copy
  on key i - period + 1, the token just after this token's earlier occurrence.

Weights come as (..., h, T, T) with queries on rows; leading axes (layers, batch) are kept, batch averaged
by the caller. Axis letters: L layers, b batch, h heads, T tokens.
"""

from __future__ import annotations

import torch

KINDS = ("previous token", "first token", "induction")


def _check(weights: torch.Tensor) -> int:
    if weights.ndim < 3 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"weights must be (..., h, T, T) with queries on rows, got shape {tuple(weights.shape)}")
    if weights.shape[-1] < 2:
        raise ValueError(f"a score needs at least 2 tokens, got T={weights.shape[-1]}")
    return weights.shape[-1]


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """(..., h, T, T) -> (..., h): mean weight of query i on key i-1."""
    num_tokens = _check(weights)
    rows = torch.arange(1, num_tokens)  # (T-1,)
    return weights[..., rows, rows - 1].mean(dim=-1)


def first_token_score(weights: torch.Tensor) -> torch.Tensor:
    """(..., h, T, T) -> (..., h): mean weight of query i >= 1 on key 0."""
    _check(weights)
    return weights[..., 1:, 0].mean(dim=-1)


def induction_score(weights: torch.Tensor, period: int) -> torch.Tensor:
    """(..., h, T, T) -> (..., h): on a sequence repeating every ``period`` tokens, the mean weight of each
    query after the first copy on the key just after its token's previous occurrence (i - period + 1)."""
    num_tokens = _check(weights)
    if not 1 <= period < num_tokens:
        raise ValueError(f"period must be in [1, {num_tokens - 1}] for T={num_tokens}, got {period}")
    rows = torch.arange(period, num_tokens)  # (T - period,) queries in the later copies
    return weights[..., rows, rows - period + 1].mean(dim=-1)


def repeated_random_tokens(
    vocab_size: int, period: int, *, repeats: int = 2, batch_size: int = 1, seed: int = 0, low: int = 0
) -> torch.Tensor:
    """(b, period·repeats) int64: ``period`` seeded random ids in [low, vocab_size), repeated ``repeats`` times."""
    if not 0 <= low < vocab_size or period < 1 or repeats < 1 or batch_size < 1:
        raise ValueError(
            f"need 0 <= low < vocab_size and positive sizes, got low={low}, vocab_size={vocab_size}, "
            f"period={period}, repeats={repeats}, batch_size={batch_size}"
        )
    gen = torch.Generator().manual_seed(seed)
    first = torch.randint(low, vocab_size, (batch_size, period), generator=gen)  # (b, P)
    return first.repeat(1, repeats)  # (b, P·repeats)


def loss_per_position(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(b, T, V), (b, T) -> (b, T-1): cross-entropy of predicting token t+1 from position t, in nats."""
    log_probs = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # (b, T-1, V)
    return -log_probs.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (b, T-1)


def strongest(scores: torch.Tensor) -> tuple[int, int, float]:
    """(L, h) -> (layer, head, score) of the highest-scoring head."""
    flat = int(torch.argmax(scores))
    layer, head = divmod(flat, scores.shape[-1])
    return layer, head, float(scores[layer, head])


def repeat_targets(ids: torch.Tensor, min_match: int = 3) -> torch.Tensor:
    """(T,) ids -> (T,) int64: for each query i, the key an induction head would read, or -1.

    The key is j + 1, where j < i is the latest earlier position whose last ``min_match`` tokens equal the
    ``min_match`` tokens ending at i: the token that followed the last time this stretch was seen. On a text made
    of a sentence typed twice, every query of the second copy past its first ``min_match - 1`` tokens has one.
    A match on several tokens, not one: in English a single character has many earlier occurrences."""
    if ids.ndim != 1 or min_match < 1:
        raise ValueError(f"ids must be (T,) and min_match >= 1, got shape {tuple(ids.shape)} and {min_match}")
    num_tokens = ids.shape[0]
    targets = torch.full((num_tokens,), -1, dtype=torch.int64)
    if num_tokens <= min_match:
        return targets
    grams = ids.unfold(0, min_match, 1)  # (T - m + 1, m): the m tokens ending at position g + m - 1
    for i in range(min_match, num_tokens):
        here = grams[i - min_match + 1]  # (m,) the stretch ending at i
        earlier = (grams[: i - min_match + 1] == here).all(dim=-1).nonzero()  # stretches ending before i
        if earlier.numel():
            targets[i] = int(earlier[-1]) + min_match  # (its end) + 1
    return targets


def induction_score_on_text(weights: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(..., h, T, T), (T,) -> (..., h): mean weight of each query with a target (``repeat_targets``) on it; NaN
    where the text repeats no stretch."""
    _check(weights)
    rows = (targets >= 0).nonzero().flatten()  # queries that have an earlier copy
    if rows.numel() == 0:
        return torch.full(weights.shape[:-2], float("nan"))
    return weights[..., rows, targets[rows]].mean(dim=-1)


def even_spread_score(rows: torch.Tensor) -> float:
    """The score of a head that spreads each query's weight evenly over the keys it may see (query i sees i + 1
    keys), averaged over the queries ``rows`` that a score reads: the bar a head must clear to be that kind."""
    if rows.numel() == 0:
        return float("nan")
    return float((1.0 / (rows.double() + 1.0)).mean())
