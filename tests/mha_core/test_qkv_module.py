"""continuiti's behaviours for the general module, and agreement with torch's attention."""

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_core.attention import masks
from mha_core.attention.kernels import ExplicitAttention, FusedAttention
from mha_core.attention.modules import QKVMultiHeadAttention, trace_forward

IMPLEMENTATIONS = [ExplicitAttention, FusedAttention]


def copy_to_torch(module: QKVMultiHeadAttention) -> nn.MultiheadAttention:
    """nn.MultiheadAttention with in_proj rows [0:E] query, [E:2E] key, [2E:] value, as continuiti's test."""
    E = module.hidden_dim
    mha = nn.MultiheadAttention(E, module.n_heads, bias=module.bias, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(
            torch.cat([module.query_project.weight, module.key_project.weight, module.value_project.weight])
        )
        mha.out_proj.weight.copy_(module.out_project.weight)
        if module.bias:
            mha.in_proj_bias.copy_(
                torch.cat([module.query_project.bias, module.key_project.bias, module.value_project.bias])
            )
            mha.out_proj.bias.copy_(module.out_project.bias)
    return mha.eval()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_zero_values_give_zero_output_without_bias(impl):
    module = QKVMultiHeadAttention(16, 4, attention=impl(), bias=False)
    query, key = torch.rand(2, 5, 16), torch.rand(2, 7, 16)
    output = module(query, key, torch.zeros(2, 7, 16))
    assert output.shape == (2, 5, 16)
    assert torch.equal(output, torch.zeros_like(output))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_all_true_mask_equals_no_mask(impl):
    module = QKVMultiHeadAttention(12, 3, attention=impl())
    q, kv = torch.rand(3, 4, 12), torch.rand(3, 6, 12)
    mask = torch.ones(3, 4, 6, dtype=torch.bool)
    assert torch.allclose(module(q, kv, kv, mask), module(q, kv, kv), atol=1e-6, rtol=0)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_gradients_follow_the_mask(impl):
    """Keys and values get gradient only where some query attends to them (continuiti's test)."""
    module = QKVMultiHeadAttention(8, 2, attention=impl(), bias=False)
    query = torch.rand(1, 4, 8, requires_grad=True)
    key = torch.rand(1, 6, 8, requires_grad=True)
    value = torch.rand(1, 6, 8, requires_grad=True)
    mask = torch.zeros(1, 4, 6, dtype=torch.bool)
    mask[:, :, :3] = True  # keys 3, 4, 5 are never attended
    module(query, key, value, mask).sum().backward()
    assert torch.all(key.grad[0, 3:] == 0) and torch.all(value.grad[0, 3:] == 0)
    assert key.grad[0, :3].abs().sum() > 0 and value.grad[0, :3].abs().sum() > 0
    assert query.grad.abs().sum() > 0


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("bias", [True, False])
def test_equals_torch_multihead_attention_with_random_mask(impl, bias):
    module = QKVMultiHeadAttention(32, 4, attention=impl(), bias=bias).eval()
    q, k, v = torch.rand(3, 5, 32), torch.rand(3, 9, 32), torch.rand(3, 9, 32)
    mask = masks.random(5, 9, keep_prob=0.6, seed=1, batch_size=3)
    mask[..., 0] = True  # keep every row attending somewhere, so torch has no NaN rows
    expected, _ = copy_to_torch(module)(q, k, v, attn_mask=masks.to_blocked(mask).repeat_interleave(4, dim=0))
    assert torch.allclose(module(q, k, v, mask), expected, atol=1e-6, rtol=0)


def test_explicit_and_fused_agree_and_trace_weights_match_torch():
    explicit = QKVMultiHeadAttention(24, 6, attention=ExplicitAttention()).eval()
    fused = QKVMultiHeadAttention(24, 6, attention=FusedAttention()).eval()
    fused.load_state_dict(explicit.state_dict())
    q, kv = torch.rand(2, 7, 24), torch.rand(2, 3, 24)
    trace = trace_forward(explicit, q, kv, kv)
    assert torch.allclose(trace.output, fused(q, kv, kv), atol=1e-6, rtol=0)
    _, torch_weights = copy_to_torch(explicit)(q, kv, kv, need_weights=True, average_attn_weights=False)
    assert torch.allclose(trace.steps["attn_weights"], torch_weights, atol=1e-6, rtol=0)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_fully_masked_rows_give_zero_context_not_nan(impl):
    module = QKVMultiHeadAttention(8, 2, attention=impl(), bias=False).eval()
    q, kv = torch.rand(2, 4, 8), torch.rand(2, 5, 8)
    mask = torch.ones(2, 4, 5, dtype=torch.bool)
    mask[0, 2] = False  # query 2 of batch element 0 may attend to nothing
    trace = trace_forward(module, q, kv, kv, mask)
    assert torch.isfinite(trace.output).all()
    assert torch.equal(trace.steps["context"][0, 2], torch.zeros(8))  # zero context, like the fused kernel
    if impl is ExplicitAttention:
        assert trace.steps["fully_masked_rows"].squeeze(1).tolist()[0] == [False, False, True, False]
        assert torch.equal(trace.steps["attn_weights"][0, :, 2], torch.zeros(2, 5))
        assert torch.isneginf(trace.steps["masked_scores"][0, :, 2]).all()


def test_dropout_is_applied_in_training_mode_only():
    module = QKVMultiHeadAttention(16, 4, dropout_p=0.5)
    q = torch.rand(2, 10, 16)
    module.train()
    trace = trace_forward(module, q, q, q)
    weights, dropped = trace.steps["attn_weights"], trace.steps["attn_weights_dropped"]
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1
    assert torch.allclose(dropped[kept], weights[kept] / 0.5)  # survivors rescaled by 1/(1-p)
    module.eval()
    eval_trace = trace_forward(module, q, q, q)
    assert torch.equal(eval_trace.steps["attn_weights_dropped"], eval_trace.steps["attn_weights"])
    assert torch.equal(module(q, q, q), eval_trace.output)


@settings(max_examples=40, deadline=None)
@given(
    heads=st.integers(1, 6),
    head_dim=st.integers(1, 8),
    tgt=st.integers(1, 9),
    src=st.integers(1, 9),
    batch=st.integers(1, 3),
    bias=st.booleans(),
    cross=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_agrees_with_torch(heads, head_dim, tgt, src, batch, bias, cross, seed):
    """Self- and cross-attention over random shapes agree with nn.MultiheadAttention."""
    torch.manual_seed(seed)
    E = heads * head_dim
    module = QKVMultiHeadAttention(E, heads, bias=bias).eval()
    query = torch.randn(batch, tgt, E)
    key = torch.randn(batch, src if cross else tgt, E)
    value = torch.randn_like(key)
    if not cross:
        key = value = query
    expected, expected_weights = copy_to_torch(module)(query, key, value, need_weights=True, average_attn_weights=False)
    trace = trace_forward(module, query, key, value)
    assert torch.allclose(trace.output, expected, atol=1e-5, rtol=1e-5)
    assert torch.allclose(trace.steps["attn_weights"], expected_weights, atol=1e-6, rtol=1e-5)
