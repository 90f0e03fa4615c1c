"""Issue 33: grouped-query, multi-query, latent and sliding-window attention against Listing 3.5 and the Masks page.

Equal weights give equal outputs within rounding (1e-6): the variants run the same ExplicitAttention, and where the
arithmetic is the same (GQA at num_kv_groups = num_heads), bitwise.
"""

from __future__ import annotations

import pytest
import torch

from mha_core.attention import masks
from mha_core.attention.modules import MultiHeadAttention, QKVMultiHeadAttention, trace_forward
from mha_core.variants.cached_generation import decode_module
from mha_core.variants.layers import (
    GroupedQueryAttention,
    MultiHeadAttentionWithSWA,
    MultiHeadLatentAttention,
    cache_bytes,
)


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def joined(traces) -> torch.Tensor:
    return torch.cat([t.output for t in traces], dim=1)  # (b, T, d_out)


# --- grouped-query and multi-query attention ---------------------------------------------------------------------


@pytest.mark.parametrize("bias", [False, True])
def test_gqa_with_a_group_per_head_is_listing_3_5(bias):
    mha = MultiHeadAttention(5, 12, 8, 0.0, 3, qkv_bias=bias).eval()
    gqa = GroupedQueryAttention(5, 12, 8, 0.0, 3, num_kv_groups=3, qkv_bias=bias).eval()
    gqa.load_state_dict(mha.state_dict())  # the same names: W_query, W_key, W_value, out_proj, mask
    x = torch.rand(2, 8, 5)
    assert (gqa(x) - mha(x)).abs().max() <= 1e-6
    assert torch.equal(gqa(x), mha(x))  # the same arithmetic: repeat_interleave by 1 is the identity


def test_gqa_shares_each_kv_head_across_its_group_and_mqa_shares_one():
    x = torch.rand(1, 6, 8)
    for groups in (1, 2, 4):
        gqa = GroupedQueryAttention(8, 16, 6, 0.0, 4, num_kv_groups=groups).eval()
        trace = trace_forward(gqa, x)
        assert trace.info["keys_heads"].shape == (1, groups, 6, 4)
        repeated = trace.steps["keys_repeated"]  # (b, h, T, d)
        for head in range(4):
            assert torch.equal(repeated[:, head], trace.steps["keys_heads"][:, head // (4 // groups)])
        assert gqa.W_key.weight.shape == (groups * 4, 8)


def test_gqa_equals_mha_whose_kv_heads_are_copied_across_each_group():
    """GQA is MHA whose W_key and W_value rows repeat per group: the reference built by hand."""
    gqa = GroupedQueryAttention(6, 12, 7, 0.0, 4, num_kv_groups=2, qkv_bias=True).eval()
    mha = MultiHeadAttention(6, 12, 7, 0.0, 4, qkv_bias=True).eval()
    state = gqa.state_dict()
    for name in ("W_key", "W_value"):
        for part in ("weight", "bias"):
            per_head = state[f"{name}.{part}"].view(2, 3, *state[f"{name}.{part}"].shape[1:])  # (g, d, ...)
            state[f"{name}.{part}"] = per_head.repeat_interleave(2, dim=0).reshape(12, *per_head.shape[2:])
    mha.load_state_dict(state)
    x = torch.rand(3, 7, 6)
    assert (gqa(x) - mha(x)).abs().max() <= 1e-6


def test_gqa_refuses_groups_that_do_not_divide_the_heads():
    with pytest.raises(ValueError, match=r"num_heads=6 must be a multiple of num_kv_groups=4 .*1, 2, 3, 6"):
        GroupedQueryAttention(8, 12, 4, 0.0, 6, num_kv_groups=4)
    with pytest.raises(ValueError, match="num_kv_groups must be a positive integer, got 0"):
        GroupedQueryAttention(8, 12, 4, 0.0, 6, num_kv_groups=0)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_gqa_caches_only_its_kv_heads_and_decodes_like_its_forward(groups):
    gqa = GroupedQueryAttention(8, 16, 9, 0.0, 4, num_kv_groups=groups).eval()
    x = torch.rand(2, 9, 8)
    traces = decode_module(gqa, x, 4)
    assert (joined(traces) - gqa(x)).abs().max() <= 1e-6
    assert gqa.cache_k.shape == (2, groups, 9, 4)
    assert cache_bytes(gqa) == 2 * 2 * groups * 9 * 4 * 4  # K,V × batch × g × T × d × float32
    assert traces[-1].info["keys_repeated"].shape == (2, 4, 9, 4)


# --- multi-head latent attention ---------------------------------------------------------------------------------


def test_mla_caches_one_latent_per_token_and_rebuilds_keys_and_values_from_it():
    mla = MultiHeadLatentAttention(8, 16, 10, 0.0, 4, latent_dim=6).eval()
    x = torch.rand(2, 10, 8)
    traces = decode_module(mla, x, 3)
    assert (joined(traces) - mla(x)).abs().max() <= 1e-6
    assert mla.cache_c_kv.shape == (2, 10, 6) and not hasattr(mla, "cache_k")  # the latent only
    assert cache_bytes(mla) == 2 * 10 * 6 * 4  # batch × tokens × latent_dim × float32: no K, no V
    last = traces[-1]
    with torch.no_grad():
        assert torch.equal(last.steps["keys"], mla.W_UK(last.steps["cache_latent"]))
        assert torch.equal(last.steps["values"], mla.W_UV(last.steps["cache_latent"]))
    assert last.info["keys_heads"].shape == (2, 4, 10, 4)


def test_mla_default_latent_is_the_books():
    assert MultiHeadLatentAttention(8, 256, 4, 0.0, 4).latent_dim == 32  # d_out // 8
    assert MultiHeadLatentAttention(8, 16, 4, 0.0, 4).latent_dim == 16  # at least 16
    with pytest.raises(ValueError, match="latent_dim must be a positive integer, got -2"):
        MultiHeadLatentAttention(8, 16, 4, 0.0, 4, latent_dim=-2)


def test_mla_is_mha_when_the_latent_is_an_identity_of_the_input():
    """latent = x (W_DKV the identity) and W_UK = W_key, W_UV = W_value: Listing 3.5 again."""
    mla = MultiHeadLatentAttention(8, 8, 5, 0.0, 2, latent_dim=8).eval()
    mha = MultiHeadAttention(8, 8, 5, 0.0, 2).eval()
    with torch.no_grad():
        mla.W_DKV.weight.copy_(torch.eye(8))
        mla.W_query.weight.copy_(mha.W_query.weight)
        mla.W_UK.weight.copy_(mha.W_key.weight)
        mla.W_UV.weight.copy_(mha.W_value.weight)
        mla.out_proj.load_state_dict(mha.out_proj.state_dict())
    x = torch.rand(2, 5, 8)
    assert (mla(x) - mha(x)).abs().max() <= 1e-6


# --- sliding-window attention ------------------------------------------------------------------------------------


def masks_page_reference(swa: MultiHeadAttentionWithSWA, x: torch.Tensor, window: int) -> torch.Tensor:
    """The Masks page's way: QKVMultiHeadAttention with the same weights under masks.sliding_window."""
    qkv = QKVMultiHeadAttention(swa.d_in, swa.num_heads, bias=True).eval()
    pairs = {"query_project": "W_query", "key_project": "W_key", "value_project": "W_value", "out_project": "out_proj"}
    qkv.load_state_dict(
        {f"{a}.{p}": swa.state_dict()[f"{b}.{p}"] for a, b in pairs.items() for p in ("weight", "bias")}
    )
    mask = masks.sliding_window(x.shape[1], x.shape[1], window, causal_only=True)
    with torch.no_grad():
        return qkv(x, x, x, attn_mask=mask)


@pytest.mark.parametrize("window", [1, 2, 3, 5, 20])
def test_swa_equals_full_attention_under_the_masks_pages_sliding_window(window):
    swa = MultiHeadAttentionWithSWA(8, 8, 12, 0.0, 2, qkv_bias=True, sliding_window_size=window).eval()
    x = torch.rand(2, 12, 8)
    reference = masks_page_reference(swa, x, window)
    assert (swa(x) - reference).abs().max() <= 1e-6
    traces = decode_module(swa, x, 4)
    assert (joined(traces) - reference).abs().max() <= 1e-6
    assert torch.equal(trace_forward(swa, x).steps["mask"], masks.sliding_window(12, 12, window))


def test_swa_cache_keeps_the_last_window_keys():
    swa = MultiHeadAttentionWithSWA(8, 8, 12, 0.0, 2, sliding_window_size=3).eval()
    x = torch.rand(1, 12, 8)
    keys = trace_forward(swa, x).steps["keys_heads"]  # (b, h, T, d), uncached
    swa.reset_cache()
    swa(x[:, :5], use_cache=True)  # a prompt longer than the window
    assert swa.cache_k.shape[2] == 3
    for t in range(5, 12):
        trace = trace_forward(swa, x[:, t : t + 1], use_cache=True)
        assert trace.info["cache_keys"].shape[2] == 4  # 3 kept + the new one are read
        assert swa.cache_k.shape[2] == 3 and swa.ptr_current_pos == t + 1
        assert (swa.cache_k - keys[:, :, t - 2 : t + 1]).abs().max() <= 1e-6  # the last three positions
        assert trace.steps["mask"].tolist() == [[False, True, True, True]]  # the oldest read key is outside
    assert cache_bytes(swa) == 2 * 3 * 8 * 4  # K,V × window × d_out × float32, however long the sequence


def test_swa_without_a_window_is_listing_3_5():
    swa = MultiHeadAttentionWithSWA(6, 8, 7, 0.0, 2).eval()
    mha = MultiHeadAttention(6, 8, 7, 0.0, 2).eval()
    swa.load_state_dict({k: v for k, v in mha.state_dict().items() if k != "mask"})
    x = torch.rand(2, 7, 6)
    assert (swa(x) - mha(x)).abs().max() <= 1e-6
    with pytest.raises(ValueError, match="sliding_window_size must be a positive integer, got 0"):
        MultiHeadAttentionWithSWA(6, 8, 7, 0.0, 2, sliding_window_size=0)


def test_by_position_is_sliding_window_at_shifted_positions():
    for window in (1, 2, 4):
        mask = masks.by_position(torch.arange(6), torch.arange(6), window)
        assert torch.equal(mask, masks.sliding_window(6, 6, window))
    assert torch.equal(masks.by_position(torch.arange(6), torch.arange(6)), masks.causal(6))
    shifted = masks.by_position(torch.tensor([7]), torch.arange(4, 8), window=3)
    assert shifted.tolist() == [[False, True, True, True]]


@pytest.mark.parametrize(
    "make",
    [
        lambda: GroupedQueryAttention(4, 8, 3, 0.0, 2, 1),
        lambda: MultiHeadLatentAttention(4, 8, 3, 0.0, 2, latent_dim=3),
        lambda: MultiHeadAttentionWithSWA(4, 8, 3, 0.0, 2, sliding_window_size=2),
    ],
)
def test_every_variant_resets_and_refuses_to_overflow_its_context(make):
    module = make().eval()
    module(torch.rand(1, 3, 4), use_cache=True)
    assert cache_bytes(module) > 0
    with pytest.raises(ValueError, match=r"cache holds 3 and input has 1 tokens, more than context_length=3"):
        module(torch.rand(1, 1, 4), use_cache=True)
    module.reset_cache()
    assert cache_bytes(module) == 0 and module.ptr_current_pos == 0
    assert torch.equal(trace_forward(module, torch.ones(1, 3, 4)).output, module(torch.ones(1, 3, 4)))
