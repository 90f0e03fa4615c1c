"""Llama's attention block, exactly: grouped-query attention with RoPE and a KV cache, traced head by head.

This is the attention of the book's bonus Llama 3 build (rasbt/LLMs-from-scratch, ch05/07_gpt_to_llama and its
KV-cache version), with its names: ``W_query``, ``W_key``, ``W_value`` and ``out_proj``, all without bias;
``num_kv_groups`` key/value heads, each read by ``num_heads // num_kv_groups`` query heads; queries and keys
rotated by ``positions.apply_rope`` at their own positions (the cache's offset for new tokens), keys cached rotated.
It differs from ``variants.GroupedQueryAttention`` in exactly those two ways Llama differs from Listing 3.5: RoPE,
and no bias in ``out_proj``. With copied weights it equals Hugging Face's ``LlamaAttention`` (q_proj, k_proj,
v_proj, o_proj) within rounding (tests/mha_core/test_llama_attention.py).

Axis letters: b batch, t new tokens, s cached tokens, h query heads, g key/value heads, d head_dim.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from mha_core.attention import masks
from mha_core.attention.kernels import Attention, ExplicitAttention, Recorder, no_record
from mha_core.attention.modules import (
    cache_keys_and_values,
    check_divisible_heads,
    check_input,
    check_positive_int,
    check_room,
    merge_heads,
    split_heads,
)
from mha_core.attention.positions import apply_rope, compute_rope_params


class LlamaAttention(nn.Module):
    """Causal grouped-query attention with RoPE, as in Llama 3: (b, t, d_in) -> (b, t, d_out)."""

    def __init__(self, d_in, d_out, context_length, num_heads, num_kv_groups, rope_base=500_000.0):
        super().__init__()
        check_positive_int("d_in", d_in)
        check_divisible_heads("d_out", d_out, num_heads)
        check_positive_int("context_length", context_length)
        check_positive_int("num_kv_groups", num_kv_groups)
        if num_heads % num_kv_groups:
            raise ValueError(f"num_heads={num_heads} must be a multiple of num_kv_groups={num_kv_groups}")
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.num_heads, self.num_kv_groups = num_heads, num_kv_groups
        self.head_dim = d_out // num_heads
        self.group_size = num_heads // num_kv_groups  # query heads per key/value head
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False)
        self.out_proj = nn.Linear(d_out, d_out, bias=False)
        cos, sin = compute_rope_params(self.head_dim, theta_base=rope_base, context_length=context_length)
        self.register_buffer("cos", cos, persistent=False)  # (context_length, d)
        self.register_buffer("sin", sin, persistent=False)
        self.attention = ExplicitAttention()
        self.register_buffer("cache_k", None, persistent=False)  # (b, g, s, d), keys already rotated
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def reset_cache(self) -> None:
        """Empty the cache before a new sequence."""
        self.cache_k, self.cache_v, self.ptr_current_pos = None, None, 0

    def forward(self, x, *, use_cache=False, recorder: Recorder | None = None, attention: Attention | None = None):
        """``use_cache=True``: ``x`` holds the next tokens; they sit at positions ptr_current_pos onwards."""
        rec = recorder or no_record
        check_input("x", x, self.d_in)
        num_tokens = x.shape[1]
        start = check_room(self, num_tokens, use_cache)  # the first new token's position: RoPE's offset
        rec("x", x, "the input embeddings")
        queries = rec("queries", self.W_query(x), "queries = W_query(x)")  # (b, t, h·d)
        keys = rec("keys", self.W_key(x), "keys = W_key(x): one head per K/V group")  # (b, t, g·d)
        values = rec("values", self.W_value(x), "values = W_value(x): one head per K/V group")  # (b, t, g·d)
        queries = split_heads(queries, self.num_heads, "queries", rec)  # (b, h, t, d)
        keys = split_heads(keys, self.num_kv_groups, "keys", rec)  # (b, g, t, d)
        values = split_heads(values, self.num_kv_groups, "values", rec)  # (b, g, t, d)
        queries = rec("queries_rotated", apply_rope(queries, self.cos, self.sin, offset=start), "RoPE on queries")
        keys = rec("keys_rotated", apply_rope(keys, self.cos, self.sin, offset=start), "RoPE on keys")
        if use_cache:
            keys, values = cache_keys_and_values(self, keys, values, rec)  # (b, g, s, d): rotated keys cached
        keys = rec("keys_repeated", keys.repeat_interleave(self.group_size, dim=1), "K heads repeated per group")
        values = rec("values_repeated", values.repeat_interleave(self.group_size, dim=1), "V heads repeated")
        query_positions = torch.arange(start, start + num_tokens, device=x.device)  # (t,)
        key_positions = torch.arange(start + num_tokens - keys.shape[2], start + num_tokens, device=x.device)
        allowed = rec("mask", masks.by_position(query_positions, key_positions), "causal mask (True = may attend)")
        context = (attention or self.attention)(queries, keys, values, allowed, 0.0, rec)  # (b, h, t, d)
        context = merge_heads(context, rec)  # (b, t, h·d)
        return rec("output", self.out_proj(context), "output = out_proj(context), no bias")  # (b, t, d_out)
