"""Issue 44: Llama's attention block against Hugging Face's ``LlamaAttention`` (tiny random config, copied weights).

Prefill and token-by-token decoding with the KV cache agree within 1e-5: the same GQA, RoPE and causal mask, the
softmax scale divided here and multiplied there (so within rounding, not bitwise).
"""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention as HFLlamaAttention
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from mha_core.attention.modules import trace_forward
from mha_core.attention.positions import apply_rope, compute_rope_params
from mha_core.variants.llama import LlamaAttention

SHAPES = [(32, 4, 2, 500_000.0), (48, 6, 1, 10_000.0), (32, 4, 4, 10_000.0)]  # hidden, heads, K/V heads, base


def pair(hidden, heads, kv_heads, base, context=24):
    """(ours, Hugging Face's, its rotary embedding), the weights copied from a random HF layer."""
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads, intermediate_size=8,
        num_hidden_layers=1, vocab_size=16, max_position_embeddings=context, rope_theta=base,
    )  # fmt: skip
    config._attn_implementation = "eager"
    hf = HFLlamaAttention(config, layer_idx=0).eval()
    ours = LlamaAttention(hidden, hidden, context, heads, kv_heads, rope_base=base).eval()
    for mine, theirs in (("W_query", "q_proj"), ("W_key", "k_proj"), ("W_value", "v_proj"), ("out_proj", "o_proj")):
        getattr(ours, mine).weight.data.copy_(getattr(hf, theirs).weight.data)
    return ours, hf, LlamaRotaryEmbedding(config)


def hf_call(hf, rotary, x, first, cache=None):
    """Hugging Face's attention on ``x`` (b, t, hidden) at positions first …, over its cache if given."""
    t = x.shape[1]
    positions = torch.arange(first, first + t)[None].expand(x.shape[0], t)  # (b, t)
    seen = first + t
    blocked = torch.ones(t, seen, dtype=torch.bool).triu(diagonal=first + 1)  # key j > query's position
    mask = torch.zeros(t, seen).masked_fill(blocked, -torch.inf)[None, None]  # (1, 1, t, s): additive
    out, weights = hf(x, position_embeddings=rotary(x, positions), attention_mask=mask, cache=cache)
    return out, weights


@pytest.mark.parametrize("shape", SHAPES)
def test_prefill_equals_hugging_faces_llama_attention(shape):
    ours, hf, rotary = pair(*shape)
    x = torch.randn(2, 11, shape[0])
    with torch.no_grad():
        theirs, their_weights = hf_call(hf, rotary, x, 0)
    trace = trace_forward(ours, x)
    assert (trace.output - theirs).abs().max() <= 1e-5
    assert (trace.steps["attn_weights"] - their_weights).abs().max() <= 1e-5  # every head's weights


@pytest.mark.parametrize("shape", SHAPES)
def test_decoding_token_by_token_with_the_cache_equals_hugging_faces(shape):
    ours, hf, rotary = pair(*shape)
    x = torch.randn(1, 12, shape[0])
    cache = DynamicCache()
    ours.reset_cache()
    worst = 0.0
    spans = [(0, 5)] + [(t, t + 1) for t in range(5, 12)]  # a prompt of 5, then one token at a time
    with torch.no_grad():
        for first, end in spans:
            theirs, _ = hf_call(hf, rotary, x[:, first:end], first, cache)
            trace = trace_forward(ours, x[:, first:end], use_cache=True)
            worst = max(worst, (trace.output - theirs).abs().max().item())
            assert trace.steps["cache_keys"].shape == (1, shape[2], end, shape[0] // shape[1])  # g heads, not h
    assert worst <= 1e-5
    whole = trace_forward(ours, x).output  # and the cached calls equal one uncached forward
    assert ours.ptr_current_pos == 12
    assert (whole[:, -1] - trace.output[:, -1]).abs().max() <= 1e-6


def test_the_trace_shows_each_head_rotated_grouped_and_cached_rotated():
    ours, _, _ = pair(32, 4, 2, 10_000.0)
    x = torch.randn(1, 6, 32)
    trace = trace_forward(ours, x)
    cos, sin = compute_rope_params(8, theta_base=10_000.0, context_length=24)
    assert torch.equal(trace.steps["queries_rotated"], apply_rope(trace.steps["queries_heads"], cos, sin))
    assert trace.info["keys_rotated"].shape == (1, 2, 6, 8)
    for head in range(4):  # query heads 0, 1 read K/V head 0; 2, 3 read K/V head 1
        assert torch.equal(trace.steps["keys_repeated"][:, head], trace.steps["keys_rotated"][:, head // 2])
    ours(x[:, :4], use_cache=True)
    cached = trace_forward(ours, x[:, 4:], use_cache=True).steps["cache_keys"]
    assert (cached - trace.steps["keys_rotated"]).abs().max() <= 1e-6  # keys are cached already rotated


def test_bad_shapes_are_refused_with_the_numbers():
    with pytest.raises(ValueError, match="num_heads=6 must be a multiple of num_kv_groups=4"):
        LlamaAttention(24, 24, 8, 6, 4)
    ours = LlamaAttention(16, 16, 4, 2, 1)
    with pytest.raises(ValueError, match="more than context_length=4"):
        ours(torch.randn(1, 5, 16))
