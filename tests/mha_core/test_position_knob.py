"""Issue 44, item 3: the position knob's numbers, from a trace's queries and keys (``positioned_scores``) and from
one module on its tokens in order and shuffled (``run_positions``). The module-level facts (a permutation only
permutes the weights without positions, RoPE's shift invariance through ``apply_rope``) are in test_positions.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core.attention.modules import MultiHeadAttention, trace_forward
from mha_core.attention.positions import (
    POSITION_KINDS,
    positioned_scores,
    rope_angles,
    rope_distance_scores,
)
from mha_core.runs.token_order import (
    permutation_gap,
    rope_fits,
    run_positions,
    shuffled_order,
    unshuffled,
)


def build(positions=None, *, d_in=6, d_out=8, num_heads=2, seed=7, rope_base=10_000):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_in, d_out, 12, 0.0, num_heads, positions=positions, rope_base=rope_base).eval()


def test_none_gives_the_traces_own_scores_and_weights_bit_for_bit():
    module, x = build(), torch.rand(2, 7, 6)
    steps = trace_forward(module, x).steps
    result = positioned_scores(steps["queries_heads"], steps["keys_heads"], "none", allowed=steps["mask"])
    assert torch.equal(result["scores"], steps["attn_scores"])
    assert torch.equal(result["logits"], steps["scaled_scores"])
    assert torch.equal(result["weights"], steps["attn_weights"])
    assert result["bias"] is None


@pytest.mark.parametrize("kind", ["rope", "alibi"])
def test_rope_and_alibi_from_the_plain_trace_equal_the_module_built_with_them(kind):
    """The same seed makes the same W_query and W_key: applying the kind to the plain trace's queries and keys gives
    the positioned module's own scores."""
    x = torch.rand(2, 7, 6)
    plain = trace_forward(build(), x).steps
    own = trace_forward(build(kind, rope_base=500), x).steps
    result = positioned_scores(plain["queries_heads"], plain["keys_heads"], kind, rope_base=500, allowed=own["mask"])
    torch.testing.assert_close(result["scores"], own["attn_scores"], rtol=0, atol=1e-6)
    torch.testing.assert_close(result["weights"], own["attn_weights"], rtol=0, atol=1e-6)
    if kind == "rope":
        torch.testing.assert_close(result["queries"], own["queries_rotated"], rtol=0, atol=0)
    else:
        torch.testing.assert_close(result["bias"], own["alibi_bias"], rtol=0, atol=0)
        torch.testing.assert_close(result["logits"], own["biased_scores"], rtol=0, atol=1e-6)


def test_learned_and_sinusoidal_are_refused_by_the_scores_function():
    q = torch.rand(1, 2, 3, 4)
    with pytest.raises(ValueError, match="'sinusoidal' is added to x instead"):
        positioned_scores(q, q, "sinusoidal")


@pytest.mark.parametrize("shift", [1, 5, 20])
def test_rope_distance_scores_are_the_same_whatever_the_first_position(shift):
    at_zero = rope_distance_scores(16, 10_000, 12)
    assert (rope_distance_scores(16, 10_000, 12, start=shift) - at_zero).abs().max() <= 1e-5
    assert at_zero[0] == pytest.approx(16.0)  # all-ones · all-ones at distance 0: head_dim
    assert at_zero[1:].max() < 16.0  # any distance lowers it


def test_rope_angles_turn_low_pairs_fast_and_high_pairs_slow():
    angles = rope_angles(8, 10_000, 5)  # (5, 4)
    assert angles.shape == (5, 4)
    assert torch.equal(angles[0], torch.zeros(4, dtype=torch.float64))
    assert angles[1, 0] == 1.0  # pair 0: one radian per position
    assert (angles[1, 1:] < angles[1, :-1]).all()  # every next pair slower
    assert angles[1, 3] == pytest.approx(10_000 ** (-6 / 8))


def test_shuffle_zero_keeps_the_order_and_other_shuffles_are_seeded_permutations():
    assert shuffled_order(5, 0) == [0, 1, 2, 3, 4]
    assert shuffled_order(6, 3) == shuffled_order(6, 3)
    assert sorted(shuffled_order(6, 3)) == list(range(6))


def test_unshuffled_puts_rows_and_columns_back():
    matrix = np.arange(9.0).reshape(1, 3, 3)  # entry [i, j] = 3i + j
    order = [2, 0, 1]
    shuffled = matrix[:, order][:, :, order]  # what the shuffled tokens' matrix is when merely permuted
    assert np.array_equal(unshuffled(shuffled, order), matrix)


@pytest.mark.parametrize("kind", POSITION_KINDS)
def test_a_shuffle_merely_permutes_the_weights_without_positions_and_changes_them_with(kind):
    module, x = build(), torch.rand(2, 7, 6)
    run = run_positions(module, x, list("abcdefg"), kind=kind, rope_base=10_000, seed=7, shuffle=2)
    assert run.order != list(range(7))
    assert permutation_gap(run, with_positions=False) <= 1e-6
    if kind == "none":
        assert permutation_gap(run, with_positions=True) == permutation_gap(run, with_positions=False)
    else:
        assert permutation_gap(run, with_positions=True) > 1e-3
    assert run.without["weights"].shape == (2, 7, 7)  # batch element 0 only, (h, t, t)


@pytest.mark.parametrize("kind", ["learned", "sinusoidal"])
def test_added_positions_give_the_module_built_with_them_its_queries(kind):
    x = torch.rand(1, 7, 6)
    run = run_positions(build(), x, list("abcdefg"), kind=kind, rope_base=10_000, seed=7, shuffle=0)
    own = build(kind)
    if kind == "learned":  # the knob seeds its own table; the module's is another draw: give it the knob's
        torch.manual_seed(7)
        table = torch.nn.Embedding(7, 6).weight
        own.positions.pos_emb.weight.data[:7] = table.detach()
    steps = trace_forward(own, x).steps
    np.testing.assert_allclose(run.with_positions["queries"], steps["queries_heads"][0].numpy(), atol=1e-6)
    np.testing.assert_allclose(run.with_positions["scores"], steps["attn_scores"][0].numpy(), atol=1e-5)


def test_alibi_slopes_are_read_off_the_bias_and_an_odd_head_dim_refuses_rope():
    run = run_positions(build(num_heads=2), torch.rand(1, 5, 6), list("abcde"), kind="alibi", rope_base=1, seed=0,
                        shuffle=0)  # fmt: skip
    np.testing.assert_allclose(run.slopes, [2.0**-4, 2.0**-8])
    assert not rope_fits("rope", 3) and rope_fits("alibi", 3)
    with pytest.raises(ValueError, match="head_dim must be even, got 1"):
        run_positions(build(d_out=2), torch.rand(1, 5, 6), list("abcde"), kind="rope", rope_base=1, seed=0, shuffle=0)
