"""Issue 44: positions in Listing 3.5 — none, learned, sinusoidal, RoPE, ALiBi — and what each one is for.

Without positions attention cannot tell an order from its permutation (the weights only permute); RoPE makes every
score depend on i − j alone, also through the KV cache's offset; ``apply_rope`` is Hugging Face's
``apply_rotary_pos_emb`` with ``LlamaRotaryEmbedding``; ALiBi's slopes and biases are Press et al.'s.
"""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from mha_core.attention.kernels import ExplicitAttention, FusedAttention
from mha_core.attention.modules import MultiHeadAttention, trace_forward
from mha_core.attention.positions import (
    POSITION_KINDS,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    compute_rope_params,
    sinusoidal_table,
)

ORDERED = ("learned", "sinusoidal", "rope", "alibi")  # the kinds that tell positions apart


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def unmasked(query, key, value, attn_mask, dropout_p, recorder, **extra):
    """The attention step with the causal mask dropped: every token sees every token."""
    return ExplicitAttention()(query, key, value, None, dropout_p, recorder, **extra)


def build(positions, *, d_in=6, d_out=8, context_length=12, num_heads=2, seed=7, rope_base=10_000):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_in, d_out, context_length, 0.0, num_heads, positions=positions, rope_base=rope_base)


# --- the default is Listing 3.5, bit for bit -------------------------------------------------------------------------


def test_no_positions_is_listing_3_5_bit_for_bit_and_every_kind_keeps_the_books_weights():
    x = torch.rand(2, 6, 6)
    plain = build(None).eval()
    none = build("none").eval()
    assert none.state_dict().keys() == plain.state_dict().keys()
    a, b = trace_forward(plain, x), trace_forward(none, x)
    assert list(a.steps) == list(b.steps)
    assert all(torch.equal(a.steps[name], b.steps[name]) for name in a.steps)
    for kind in ORDERED:  # the position parts are made after W_query … out_proj: the seed still makes those
        other = build(kind)
        assert all(torch.equal(other.state_dict()[k], plain.state_dict()[k]) for k in plain.state_dict())
    assert set(build("learned").state_dict()) - set(plain.state_dict()) == {"positions.pos_emb.weight"}
    assert set(build("rope").state_dict()) == set(plain.state_dict())  # tables are buffers not saved


def test_unknown_kinds_and_odd_heads_are_refused_with_the_numbers():
    with pytest.raises(ValueError, match="positions='absolute' is not one of none, learned"):
        build("absolute")
    with pytest.raises(ValueError, match="head_dim must be even, got 3"):
        MultiHeadAttention(6, 6, 8, 0.0, 2, positions="rope")
    with pytest.raises(ValueError, match=r"positions 10\.\.12 are outside the 12"):
        apply_rope(torch.rand(1, 1, 3, 4), *compute_rope_params(4, context_length=12), offset=10)


# --- without positions, order is invisible --------------------------------------------------------------------------


def test_without_positions_or_mask_a_permutation_only_permutes_the_weights_and_outputs():
    module = build(None).eval()
    x = torch.rand(1, 7, 6)
    perm = torch.randperm(7)
    base = trace_forward(module, x, attention=unmasked)
    moved = trace_forward(module, x[:, perm], attention=unmasked)
    weights = base.steps["attn_weights"]  # (b, h, T, T)
    expected = weights[:, :, perm][:, :, :, perm]  # rows and columns permuted alike
    torch.testing.assert_close(moved.steps["attn_weights"], expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(moved.output, base.output[:, perm], rtol=0, atol=1e-6)
    scores = base.steps["attn_scores"][:, :, perm][:, :, :, perm]  # the same dot products, summed in other blocks
    torch.testing.assert_close(moved.steps["attn_scores"], scores, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ORDERED)
def test_with_positions_a_permutation_changes_the_weights(kind):
    module = build(kind).eval()
    x = torch.rand(1, 7, 6)
    perm = torch.tensor([2, 0, 5, 1, 6, 3, 4])  # not the reversal: ALiBi's |i − j| unmasked cannot see that one
    base = trace_forward(module, x, attention=unmasked).steps["attn_weights"]
    moved = trace_forward(module, x[:, perm], attention=unmasked).steps["attn_weights"]
    assert (moved - base[:, :, perm][:, :, :, perm]).abs().max() > 1e-3


@pytest.mark.parametrize("kind", POSITION_KINDS)
def test_every_kind_decodes_with_the_cache_like_its_forward(kind):
    """The cache's offset puts each new token at its own position: chunks of 3, 1, 4 tokens equal one forward."""
    module = build(kind).eval()
    x = torch.rand(2, 8, 6)
    whole = module(x)
    module.reset_cache()
    parts = [module(x[:, a:b], use_cache=True) for a, b in ((0, 3), (3, 4), (4, 8))]
    assert (torch.cat(parts, dim=1) - whole).abs().max() <= 1e-6


# --- RoPE ---------------------------------------------------------------------------------------------------------


def test_rope_scores_depend_only_on_the_distance():
    """One query vector and one key vector at every position: the score matrix is constant along each diagonal."""
    cos, sin = compute_rope_params(8, context_length=16)
    q = torch.randn(1, 1, 1, 8).expand(1, 1, 16, 8)
    k = torch.randn(1, 1, 1, 8).expand(1, 1, 16, 8)
    scores = (apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).transpose(-2, -1))[0, 0]  # (16, 16)
    for distance in range(-15, 16):
        diagonal = torch.diagonal(scores, offset=-distance)  # entries with i − j = distance
        assert (diagonal - diagonal[0]).abs().max() <= 1e-5
    assert (scores[0, 0] - scores[5, 0]).abs() > 1e-3  # and the distance does change it


@pytest.mark.parametrize("shift", [1, 5, 20])
def test_rope_scores_are_unchanged_when_every_position_shifts(shift):
    cos, sin = compute_rope_params(16, context_length=64)
    q, k = torch.randn(2, 3, 10, 16), torch.randn(2, 3, 10, 16)
    at_zero = apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).transpose(-2, -1)
    shifted = apply_rope(q, cos, sin, offset=shift) @ apply_rope(k, cos, sin, offset=shift).transpose(-2, -1)
    assert (shifted - at_zero).abs().max() <= 1e-5
    assert (apply_rope(q, cos, sin, offset=shift) - apply_rope(q, cos, sin)).abs().max() > 1e-3


def test_rope_scores_after_a_cache_of_k_tokens_equal_the_scores_at_zero():
    """Through the module: k tokens cached first, then x at positions k …; its queries over its own keys score as
    x alone at positions 0 …, within rounding."""
    module = build("rope", context_length=16).eval()
    x, before = torch.rand(1, 5, 6), torch.rand(1, 4, 6)
    alone = trace_forward(module, x).steps["attn_scores"]  # (b, h, 5, 5)
    module(before, use_cache=True)
    cached = trace_forward(module, x, use_cache=True).steps["attn_scores"]  # (b, h, 5, 4 + 5)
    assert (cached[..., 4:] - alone).abs().max() <= 1e-5
    assert (trace_forward(build(None, context_length=16).eval(), x).steps["attn_scores"] - alone).abs().max() > 1e-3


@pytest.mark.parametrize(("head_dim", "base"), [(8, 10_000.0), (16, 500_000.0)])
def test_apply_rope_equals_hugging_faces_rotary_embedding(head_dim, base):
    config = LlamaConfig(
        hidden_size=head_dim * 4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=8,
        num_hidden_layers=1, vocab_size=16, max_position_embeddings=32, rope_theta=base,
    )  # fmt: skip
    rotary = LlamaRotaryEmbedding(config)
    q, k = torch.randn(2, 4, 9, head_dim), torch.randn(2, 2, 9, head_dim)
    positions = torch.arange(3, 12)[None].expand(2, 9)  # (b, t): a cache of 3 tokens before them
    hf_cos, hf_sin = rotary(q, positions)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    cos, sin = compute_rope_params(head_dim, theta_base=base, context_length=32)
    assert (apply_rope(q, cos, sin, offset=3) - hf_q).abs().max() <= 1e-6
    assert (apply_rope(k, cos, sin, offset=3) - hf_k).abs().max() <= 1e-6


def test_the_traced_module_rotates_queries_and_keys_as_apply_rope_does():
    module = build("rope", rope_base=100).eval()
    trace = trace_forward(module, torch.rand(1, 5, 6))
    cos, sin = compute_rope_params(4, theta_base=100, context_length=12)
    assert torch.equal(trace.steps["queries_rotated"], apply_rope(trace.steps["queries_heads"], cos, sin))
    assert torch.equal(trace.steps["keys_rotated"], apply_rope(trace.steps["keys_heads"], cos, sin))
    rotated_scores = trace.steps["queries_rotated"] @ trace.steps["keys_rotated"].transpose(-2, -1)
    assert torch.equal(trace.steps["attn_scores"], rotated_scores)


# --- sinusoidal and learned -----------------------------------------------------------------------------------------


def test_sinusoidal_table_is_vaswani_et_al():
    table = sinusoidal_table(50, 10)
    for p in (0, 1, 7, 49):
        for k in range(5):
            angle = p / 10_000 ** (2 * k / 10)
            assert abs(table[p, 2 * k].item() - math.sin(angle)) <= 1e-6
            assert abs(table[p, 2 * k + 1].item() - math.cos(angle)) <= 1e-6
    assert sinusoidal_table(4, 5).shape == (4, 5)  # an odd width ends on a sine


@pytest.mark.parametrize("kind", ["learned", "sinusoidal"])
def test_absolute_positions_are_added_to_x_before_the_projections(kind):
    module = build(kind).eval()
    x = torch.rand(1, 5, 6)
    trace = trace_forward(module, x)
    rows = module.positions.pos_emb.weight[:5] if kind == "learned" else sinusoidal_table(12, 6)[:5]
    assert torch.equal(trace.steps["position_embeddings"], rows.detach())
    assert torch.equal(trace.steps["x_with_positions"], x + rows.detach())
    assert torch.equal(trace.steps["queries"], module.W_query(x + rows.detach()))


# --- ALiBi --------------------------------------------------------------------------------------------------------


def paper_slopes(n: int) -> list[float]:
    """Press et al.: a geometric sequence from 2^(−8/n) with that ratio; for n not a power of two, the largest
    power of two's sequence, then every other term of twice that many heads' sequence."""

    def geometric(m: int) -> list[float]:
        first = 2 ** (-8 / m)
        return [first * first**i for i in range(m)]

    if math.log2(n).is_integer():
        return geometric(n)
    below = 2 ** math.floor(math.log2(n))
    return geometric(below) + geometric(2 * below)[::2][: n - below]


@pytest.mark.parametrize("heads", [8, 12])
def test_alibi_slopes_are_the_papers(heads):
    slopes = alibi_slopes(heads)
    assert slopes.tolist() == pytest.approx(paper_slopes(heads), rel=1e-6)
    if heads == 8:  # the paper's example: 1/2, 1/4, …, 1/256
        assert slopes.tolist() == [1 / 2 ** (k + 1) for k in range(8)]


@pytest.mark.parametrize("heads", [8, 12])
def test_alibi_bias_is_the_papers_lower_triangle(heads):
    positions = torch.arange(6)
    bias = alibi_bias(alibi_slopes(heads), positions, positions)  # (h, t, s)
    slopes = paper_slopes(heads)
    for h in range(heads):
        for i in range(6):
            for j in range(i + 1):  # the paper's matrix: 0 on the diagonal, −m·1, −m·2 … to the left
                assert bias[h, i, j].item() == pytest.approx(-slopes[h] * (i - j), rel=1e-6, abs=1e-9)


def test_the_module_adds_the_alibi_bias_to_the_scaled_scores_and_fused_agrees():
    module = build("alibi", d_out=8, num_heads=8, context_length=10).eval()
    x = torch.rand(1, 6, 6)
    trace = trace_forward(module, x)
    bias = trace.steps["alibi_bias"]
    allowed = trace.steps["mask"]
    added = (trace.steps["biased_scores"] - trace.steps["scaled_scores"])[0][:, allowed]
    assert (added - bias[:, allowed]).abs().max() <= 1e-6
    fused = module(x, attention=FusedAttention())
    assert (fused - trace.output).abs().max() <= 1e-6
