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
