"""Attention as today's models build it, next to Listing 3.5 and named as the book's bonus code names it.

* ``GroupedQueryAttention`` (ch04/04_gqa): ``num_kv_groups`` key/value heads, each shared by
  ``num_heads // num_kv_groups`` query heads (Llama 3, Qwen3, Gemma 3). ``num_kv_groups = num_heads`` is
  ``MultiHeadAttention``; ``num_kv_groups = 1`` is multi-query attention.
* ``MultiHeadLatentAttention`` (ch04/05_mla, after DeepSeek V2–V3): one ``latent_dim``-wide vector per token is
  cached; every head's keys and values are rebuilt from it by ``W_UK`` and ``W_UV``. DeepSeek itself also caches a
  64-wide RoPE key shared by the heads (512 + 64 = 576) and, at inference, folds W_UK and W_UV into the query and
  output projections instead of rebuilding keys and values; this module, as the book's, does neither.
* ``MultiHeadAttentionWithSWA`` (ch04/06_swa): query i sees keys i − window + 1 … i, and the cache keeps only the
  last ``sliding_window_size`` keys. Mistral 7B v0.1 windows every layer (4,096); Gemma 3 windows 5 of every 6
  layers (1,024), the others keep every token.

Each takes ``recorder=`` like ``MultiHeadAttention`` (so ``trace_forward`` records every step, the cache's read and
write included) and ``use_cache=`` / ``reset_cache()`` like the book's bonus code. Parameters are created in the
W_query first as in Listing 3.5, and the mask is True = may attend (``masks``).

Axis letters: b batch, t new tokens, s cached tokens, h query heads, g key/value heads, r latent width, d head_dim.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from mha_core.attention import masks
from mha_core.attention.kernels import Attention, ExplicitAttention, Recorder, no_record
from mha_core.attention.modules import (
    cache_keys_and_values,
    check_divisible_heads,
    check_dropout,
    check_input,
    check_positive_int,
    check_room,
    merge_heads,
    split_heads,
)


class _CachedAttention(nn.Module):
    """What the three variants share with Listing 3.5: W_query, out_proj, dropout, the attention step, a cache."""

    CACHE_NAMES: tuple[str, ...] = ("cache_k", "cache_v")

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias):
        super().__init__()
        check_positive_int("d_in", d_in)
        check_divisible_heads("d_out", d_out, num_heads)
        check_positive_int("context_length", context_length)
        check_dropout(dropout)
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.qkv_bias = qkv_bias
        self.attention = ExplicitAttention()
        self.ptr_current_pos = 0

    def _finish_init(self, d_out: int, dropout: float) -> None:
        """out_proj and dropout after the key/value weights: the book's order of parameters."""
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        for name in self.CACHE_NAMES:
            self.register_buffer(name, None, persistent=False)

    def reset_cache(self) -> None:
        """Empty the cache before a new sequence."""
        for name in self.CACHE_NAMES:
            setattr(self, name, None)
        self.ptr_current_pos = 0

    def _begin(self, x: torch.Tensor, use_cache: bool, rec: Recorder) -> tuple[int, torch.Tensor]:
        """Check ``x``; the first new token's position; the per-head queries (b, h, t, d)."""
        check_input("x", x, self.d_in)
        start = check_room(self, x.shape[1], use_cache)
        rec("x", x, "the input embeddings")
        queries = rec("queries", self.W_query(x), "queries = W_query(x)")  # (b, t, d_out)
        return start, split_heads(queries, self.num_heads, "queries", rec)  # (b, h, t, d)

    def _attend(self, queries, keys, values, allowed, attention: Attention | None, rec: Recorder) -> torch.Tensor:
        """Attention over (b, h, s, d) keys and values under ``allowed`` (t, s), heads merged, then out_proj."""
        allowed = rec("mask", allowed, "mask as used, one row per new token (True = may attend)")
        dropout_p = self.dropout.p if self.training else 0.0
        context = (attention or self.attention)(queries, keys, values, allowed, dropout_p, rec)  # (b, h, t, d)
        context = merge_heads(context, rec)  # (b, t, d_out)
        return rec("output", self.out_proj(context), "output = out_proj(context)")  # (b, t, d_out)


class GroupedQueryAttention(_CachedAttention):
    """Causal grouped-query attention: (b, t, d_in) -> (b, t, d_out) with num_kv_groups key/value heads."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, num_kv_groups, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        check_positive_int("num_kv_groups", num_kv_groups)
        if num_heads % num_kv_groups != 0:
            divisors = [g for g in range(1, num_heads + 1) if num_heads % g == 0]
            raise ValueError(
                f"num_heads={num_heads} must be a multiple of num_kv_groups={num_kv_groups} "
                f"(num_kv_groups may be {', '.join(map(str, divisors))})"
            )
        self.num_kv_groups = num_kv_groups
        self.group_size = num_heads // num_kv_groups  # query heads per key/value head
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.register_buffer("mask", masks.book_causal_buffer(context_length))  # 1 = blocked, as Listing 3.5
        self._finish_init(d_out, dropout)

    def forward(self, x, *, use_cache=False, recorder: Recorder | None = None, attention: Attention | None = None):
        rec = recorder or no_record
        start, queries = self._begin(x, use_cache, rec)  # (b, h, t, d)
        keys = rec("keys", self.W_key(x), "keys = W_key(x): one head per K/V group")  # (b, t, g·d)
        values = rec("values", self.W_value(x), "values = W_value(x): one head per K/V group")  # (b, t, g·d)
        keys = split_heads(keys, self.num_kv_groups, "keys", rec)  # (b, g, t, d)
        values = split_heads(values, self.num_kv_groups, "values", rec)  # (b, g, t, d)
        if use_cache:
            keys, values = cache_keys_and_values(self, keys, values, rec)  # (b, g, s, d): g heads cached, not h
        # Each K/V head serves group_size query heads in a row: [K0, K1] -> [K0, K0, K1, K1] for group_size 2.
        keys = rec("keys_repeated", keys.repeat_interleave(self.group_size, dim=1), "K heads repeated per group")
        values = rec("values_repeated", values.repeat_interleave(self.group_size, dim=1), "V heads repeated")
        end = start + x.shape[1]
        allowed = masks.from_blocked(self.mask[start:end, :end])  # (t, s), the causal rows at the new positions
        return self._attend(queries, keys, values, allowed, attention, rec)  # (b, t, d_out)


class MultiHeadLatentAttention(_CachedAttention):
    """Causal attention whose keys and values come from one cached ``latent_dim``-wide vector per token."""

    CACHE_NAMES = ("cache_c_kv",)

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, latent_dim=None):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.latent_dim = latent_dim if latent_dim is not None else max(16, d_out // 8)  # the book's default
        check_positive_int("latent_dim", self.latent_dim)
        self.W_DKV = nn.Linear(d_in, self.latent_dim, bias=qkv_bias)  # down: x -> the cached latent
        self.W_UK = nn.Linear(self.latent_dim, d_out, bias=qkv_bias)  # up: latent -> every head's keys
        self.W_UV = nn.Linear(self.latent_dim, d_out, bias=qkv_bias)  # up: latent -> every head's values
        self.register_buffer("mask", masks.book_causal_buffer(context_length))
        self._finish_init(d_out, dropout)

    def forward(self, x, *, use_cache=False, recorder: Recorder | None = None, attention: Attention | None = None):
        rec = recorder or no_record
        start, queries = self._begin(x, use_cache, rec)  # (b, h, t, d)
        latent = rec("latent", self.W_DKV(x), "latent = W_DKV(x): what the cache keeps per token")  # (b, t, r)
        if use_cache:
            before = self.cache_c_kv if self.cache_c_kv is not None else latent[:, :0]  # (b, s, r)
            rec("cache_latent_before", before, "cache read: the latents cached by earlier calls")
            latent = latent if self.cache_c_kv is None else torch.cat([self.cache_c_kv, latent], dim=1)  # (b, s, r)
            self.cache_c_kv = rec("cache_latent", latent, "cache write: earlier latents and this call's")
            self.ptr_current_pos += x.shape[1]
        keys = rec("keys", self.W_UK(latent), "keys = W_UK(latent), rebuilt for every cached token")  # (b, s, d_out)
        values = rec("values", self.W_UV(latent), "values = W_UV(latent)")  # (b, s, d_out)
        keys = split_heads(keys, self.num_heads, "keys", rec)  # (b, h, s, d)
        values = split_heads(values, self.num_heads, "values", rec)  # (b, h, s, d)
        end = start + x.shape[1]
        allowed = masks.from_blocked(self.mask[start:end, :end])  # (t, s)
        return self._attend(queries, keys, values, allowed, attention, rec)  # (b, t, d_out)


class MultiHeadAttentionWithSWA(_CachedAttention):
    """Listing 3.5 with a causal sliding window: query i attends to keys i − window + 1 … i."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, sliding_window_size=None):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        if sliding_window_size is not None:
            check_positive_int("sliding_window_size", sliding_window_size)
        self.sliding_window_size = sliding_window_size  # None: every earlier key (Listing 3.5)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self._finish_init(d_out, dropout)

    def forward(self, x, *, use_cache=False, recorder: Recorder | None = None, attention: Attention | None = None):
        rec = recorder or no_record
        start, queries = self._begin(x, use_cache, rec)  # (b, h, t, d)
        num_tokens = x.shape[1]
        keys = rec("keys", self.W_key(x), "keys = W_key(x)")  # (b, t, d_out)
        values = rec("values", self.W_value(x), "values = W_value(x)")  # (b, t, d_out)
        keys = split_heads(keys, self.num_heads, "keys", rec)  # (b, h, t, d)
        values = split_heads(values, self.num_heads, "values", rec)  # (b, h, t, d)
        first_key = start  # the position of keys[:, :, 0]
        if use_cache:
            keys, values = cache_keys_and_values(self, keys, values, rec)  # (b, h, kept + t, d)
            first_key = start + num_tokens - keys.shape[2]
            self._trim_cache(rec)
        window = self.sliding_window_size
        query_positions = torch.arange(start, start + num_tokens, device=x.device)  # (t,)
        key_positions = torch.arange(first_key, first_key + keys.shape[2], device=x.device)  # (s,)
        allowed = masks.by_position(query_positions, key_positions, window)  # (t, s)
        return self._attend(queries, keys, values, allowed, attention, rec)  # (b, t, d_out)

    def _trim_cache(self, rec: Recorder) -> None:
        """Keep the last ``sliding_window_size`` keys and values: no later query can see an older one."""
        window = self.sliding_window_size
        if window is not None and self.cache_k.shape[2] > window:
            self.cache_k = self.cache_k[:, :, -window:].clone()  # (b, h, window, d): the old storage can go
            self.cache_v = self.cache_v[:, :, -window:].clone()
        rec("cache_keys_kept", self.cache_k, "the keys the cache keeps for the next call: the last window")


def held_tokens(module: nn.Module) -> int:
    """Tokens the first cache in ``module`` holds now, counted on its tensor: a window cache stops at its window,
    while ``ptr_current_pos`` (the next position) keeps counting."""
    for sub in module.modules():
        for name, axis in (("cache_k", 2), ("cache_c_kv", 1)):  # (b, h, s, d) and (b, s, r)
            tensor = getattr(sub, name, None)
            if isinstance(tensor, torch.Tensor):
                return tensor.shape[axis]
    return 0


def cache_bytes(module: nn.Module) -> int:
    """Bytes every KV cache in ``module`` (itself and its submodules) holds now, measured from the tensors."""
    total = 0
    for sub in module.modules():
        for name in ("cache_k", "cache_v", "cache_c_kv"):
            tensor = getattr(sub, name, None)
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()
    return total
