"""Attention masks under ONE convention: True means "this query may attend to this key".

This is the convention of ``F.scaled_dot_product_attention``. Two other conventions exist
in the code this project reproduces, and they are translated here and only here:

* the book's causal buffer (``torch.triu(ones, diagonal=1)``) is 1 where a position is
  *blocked*;
* ``torch.nn.MultiheadAttention``'s boolean ``attn_mask`` is True where a position is
  *blocked*.

Axis letters: b batch, i query position, j key position.
"""

from __future__ import annotations

import torch


def causal(num_queries: int, num_keys: int | None = None, device=None) -> torch.Tensor:
    """(i, j) lower-triangular mask: query i may attend to keys 0..i."""
    num_keys = num_queries if num_keys is None else num_keys
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril()


def book_causal_buffer(context_length: int) -> torch.Tensor:
    """The book's buffer, verbatim: a float matrix that is 1 where a position is blocked."""
    return torch.triu(torch.ones(context_length, context_length), diagonal=1)


def from_blocked(blocked: torch.Tensor) -> torch.Tensor:
    """Translate a True/1-means-blocked mask (the book's buffer, nn.MultiheadAttention)."""
    return ~blocked.bool()


def to_blocked(allowed: torch.Tensor) -> torch.Tensor:
    """Translate to nn.MultiheadAttention's convention, where True means blocked."""
    return ~allowed


def padding(lengths: list[int], num_queries: int, num_keys: int) -> torch.Tensor:
    """(b, i, j) mask where batch element n may attend only to its first lengths[n] keys."""
    for length in lengths:
        if not 0 <= length <= num_keys:
            raise ValueError(f"padding length {length} is outside [0, {num_keys}] keys")
    key_pos = torch.arange(num_keys)
    allowed = key_pos[None, :] < torch.tensor(lengths)[:, None]  # (b, j)
    return allowed[:, None, :].expand(len(lengths), num_queries, num_keys).clone()  # (b, i, j)


def sliding_window(num_queries: int, num_keys: int, window: int, causal_only: bool = True) -> torch.Tensor:
    """(i, j) mask where query i sees key j where |i − j| < window (only j ≤ i if causal)."""
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    i = torch.arange(num_queries)[:, None]
    j = torch.arange(num_keys)[None, :]
    allowed = (i - j).abs() < window
    if causal_only:
        allowed &= j <= i
    return allowed


def causal_bottom_right(num_queries: int, num_keys: int, device=None) -> torch.Tensor:
    """(i, j) causal mask for the last ``num_queries`` of ``num_keys`` positions (KV-cache decoding).

    Query i sits at position i + num_keys − num_queries, so it may attend to keys j ≤ i + num_keys − num_queries;
    with as many queries as keys this is ``causal``. Listing 3.5's buffer sliced at rows start..start+i gives it.
    """
    if not 1 <= num_queries <= num_keys:
        raise ValueError(f"need 1 ≤ num_queries ≤ num_keys, got {num_queries} queries and {num_keys} keys")
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(diagonal=num_keys - num_queries)


def by_position(query_positions: torch.Tensor, key_positions: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """(i, j) causal mask from absolute positions: key j ≤ query i, and i − j < window when a window is given.

    A sliding-window cache keeps only the last keys, so their positions no longer start at 0; this is
    ``sliding_window`` (or ``causal``) read at those positions.
    """
    if window is not None and window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    distance = query_positions[:, None] - key_positions[None, :]  # (i, j): how far back key j lies
    allowed = distance >= 0
    return allowed if window is None else allowed & (distance < window)


def random(num_queries: int, num_keys: int, keep_prob: float, seed: int, batch_size: int = 1) -> torch.Tensor:
    """(b, i, j) seeded Bernoulli mask; each position is kept with probability keep_prob."""
    if not 0.0 <= keep_prob <= 1.0:
        raise ValueError(f"keep_prob must be in [0, 1], got {keep_prob}")
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(batch_size, num_queries, num_keys, generator=gen) < keep_prob


def fully_masked_rows(allowed: torch.Tensor) -> torch.Tensor:
    """True for every query row whose keys are all masked (shape of `allowed` less its last axis)."""
    return ~allowed.any(dim=-1)


def check_mask(attn_mask: torch.Tensor, batch_size: int, num_queries: int, num_keys: int) -> None:
    """Raise a ValueError naming the numbers if attn_mask is not a bool (b, i, j) or (i, j) tensor."""
    if attn_mask.dtype != torch.bool:
        raise ValueError(f"attn_mask must be torch.bool (True = may attend), got {attn_mask.dtype}")
    expected = (batch_size, num_queries, num_keys)
    if attn_mask.ndim == 2:
        ok = tuple(attn_mask.shape) == expected[1:]
    else:
        ok = tuple(attn_mask.shape) == expected
    if not ok:
        raise ValueError(
            f"attn_mask has shape {tuple(attn_mask.shape)}; expected (batch, tgt_len, src_len) = {expected}"
            f" or (tgt_len, src_len) = {expected[1:]}"
        )
