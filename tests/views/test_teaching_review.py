"""Issue 22's content review: two errors and nine imprecisions, each sentence pinned to the fact it states, computed.

As in test_teaching_facts.py, every test computes the fact first and then checks that the page's text says it.
"""

from __future__ import annotations

import pytest
import torch

from explorer.glue.state.settings import Settings
from explorer.views import (
    cost,
    follow_a_token,
    heads_and_references,
    knobs_that_teach,
    masks_and_cross_attention,
    step_through,
)
from mha_core.attention import book
from mha_core.attention.inputs import book_tokens
from mha_core.attention.modules import MultiHeadAttention, QKVMultiHeadAttention
from mha_core.runs import forward as runs
from mha_core.runs import profiling, teaching

from ..teaching_helpers import explorer_run, number, step

CPU = torch.device("cpu")


pytestmark = pytest.mark.usefixtures("one_thread")


def identity_preset():
    x, words = book_tokens()
    module = runs.build_module(Settings().module_spec())
    return runs.run_preset(module, x[None], list(words), "identity", num_heads=2), x


# --- errors ----------------------------------------------------------------------------------------------------------


def test_error_1_each_head_of_the_identity_preset_uses_only_its_own_head_dim_features():
    run, x = identity_preset()
    assert torch.equal(run.made.W_query.weight, torch.eye(2, 3)) and torch.equal(run.made.W_key.weight, torch.eye(2, 3))
    changed = x.clone()
    changed[:, 2] += 5.0  # feature 2: no head's W_query or W_key row reads it
    again = runs.run_trace(run.made, changed[None])
    assert torch.equal(again.steps["attn_scores"], run.trace.steps["attn_scores"])
    starts = run.trace.steps["attn_weights"][0, 1, 2, :3]  # head 1, query "starts", keys 0–2
    feature_1 = x[:, 1]
    torch.testing.assert_close(starts, torch.softmax(feature_1[2] * feature_1[:3], -1))  # feature 1 alone
    text = knobs_that_teach.PRESET_TEXT["identity"]
    assert "onwards" not in text and "(k+1)·head_dim − 1" in text and "no head uses feature 2" in text


def test_error_2_view_merges_the_transposed_axes_only_when_t_h_or_head_dim_is_1():
    for h, t, head_dim in [(2, 6, 1), (1, 6, 3), (2, 1, 3), (2, 6, 3), (4, 5, 2)]:
        transposed = torch.rand(2, h, t, head_dim).transpose(1, 2)  # (b, T, h, head_dim), strides not in row order
        works = 1 in (h, t, head_dim)
        if works:
            transposed.view(2, t, h * head_dim)  # (b, T, d_out) without a copy
        else:
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                transposed.view(2, t, h * head_dim)
    text = " ".join(step("concatenate").sentences)
    assert "raises an error otherwise" not in text
    assert "head_dim = 1" in text and "happens to work" in text and "at head_dim = 3 it raises" in text


# --- imprecisions ---------------------------------------------------------------------------------------------------


def test_imprecision_1_the_identity_preset_is_nearly_uniform_at_head_dim_1():
    run, _ = identity_preset()
    starts = run.trace.steps["attn_weights"][0, 1, 2]  # head 1, query "starts"
    journey, itself = float(starts[1]), float(starts[2])
    assert journey > itself and journey - itself < 0.01
    text = knobs_that_teach.PRESET_TEXT["identity"]
    assert f"{journey:.3f}" in text and f"{itself:.3f}" in text
    assert "nearly uniform" in text and "head_dim ≥ 2" in text


def test_imprecision_2_the_mask_buffer_and_dropouts_draw_also_shape_the_output():
    torch.manual_seed(0)
    module = MultiHeadAttention(4, 4, 6, 0.5, 2)
    x = torch.rand(1, 6, 4)
    base = runs.run_trace(module, x, train=False).output
    other = MultiHeadAttention(4, 4, 6, 0.5, 2)
    other.load_state_dict(module.state_dict())
    other.mask.zero_()  # the buffer only: every key visible
    assert not torch.allclose(runs.run_trace(other, x, train=False).output, base)
    draws = [runs.run_trace(module, x, train=True, seed=seed).output for seed in (1, 2)]
    assert not torch.allclose(*draws)
    first = " ".join(step("x").sentences)
    assert "mask buffer" in first and "dropout's random draw" in first


def test_imprecision_3_the_books_row_1_is_the_second_row_in_both_copies_of_its_batch():
    run = explorer_run()
    output = run.trace.steps["output"]  # (2, 6, 2)
    assert run.labels[1] == "journey"
    for b in range(2):
        assert book.printed(output[b, 1].tolist()) == book.printed(list(book.PRINTED_OUTPUT[1]))
    torch.testing.assert_close(output[0], output[1])
    view = follow_a_token.build_token_view(run, token=1, batch_index=1, presenter=False, book_example=True)
    text = follow_a_token.book_row_text(view)
    assert "second row, journey" in text and "x⁽²⁾" in text and "either batch element" in text
    assert "two copies" in text


def test_imprecision_4_the_query_is_the_heads_slice_and_the_bars_are_the_weights_used():
    run = explorer_run(Settings(d_out=6, dropout=0.5, train=True))  # head_dim 3
    view = follow_a_token.build_token_view(run, token=4, batch_index=0, presenter=False, book_example=False)
    queries = run.trace.numpy("queries")[0, 4]  # (d_out,)
    assert view.heads[1].query == follow_a_token.vector_text(queries[3:6])  # head 1: columns 3–5
    dropped = run.trace.numpy("attn_weights_dropped")[0, :, 4]  # (h, T)
    assert not (dropped == run.trace.numpy("attn_weights")[0, :, 4]).all()  # dropout did something
    bars = view.panels[0].figure.to_dict()["data"]
    for head, bar in enumerate(bars):
        assert list(bar["y"]) == pytest.approx(dropped[head, :5].tolist())
    assert view.panels[0].caption.startswith("`attn_weights_dropped[0, :, 4, :]`")
    intro = follow_a_token.heads_intro(view)
    assert "its row of `queries`)" not in intro and "head_dim = 3 numbers" in intro and "queries_heads" in intro


def test_imprecision_5_nn_multihead_attention_never_builds_the_b_h_t_t_matrix():
    b, h, t = 4, 8, 256
    torch.manual_seed(0)
    module = MultiHeadAttention(64, 64, t, 0.0, h).eval()
    calls = profiling.variant_calls(module, torch.rand(b, t, 64))
    one = profiling.attention_matrix_bytes(b, h, t, "float32")
    torch_mha = profiling.peak_bytes(calls["torch_mha"], CPU) / one
    explicit = profiling.peak_bytes(calls["explicit"], CPU) / one
    assert torch_mha < 0.1 and explicit > 4
    text = cost.memory_method("cpu")
    assert "×4 per doubling" in text and "b·h times smaller" in text and "never builds the (b, h, T, T)" in text
    assert "under a tenth" in text and "more than four" in text


def test_imprecision_6_cross_attention_defaults_to_padding_and_names_the_causal_alignment():
    allowed = masks_and_cross_attention.masks.causal(4, 6)  # (i, j), as the page draws it
    assert not allowed[:, 4:].any() and allowed[:, :4].any(0).all()  # k4 and k5 never attended
    assert masks_and_cross_attention.never_attended(4, 6) == [4, 5]
    assert masks_and_cross_attention.DEFAULT_MASK == "padding"
    note = masks_and_cross_attention.mask_note("causal", 4, 6)
    assert "top-left" in note and "k4, k5 are never attended" in note and "bottom-right" in note
    assert "padding mask only" in masks_and_cross_attention.mask_note("padding", 4, 6)


def test_imprecision_7_on_the_masks_page_qkv_bias_also_removes_out_projects_bias():
    assert QKVMultiHeadAttention(4, 2, bias=False).out_project.bias is None
    assert MultiHeadAttention(4, 4, 6, 0.0, 2, qkv_bias=False).out_proj.bias is not None
    mask = teaching.make_mask(teaching.MaskParams(kind="padding", lengths=(0,)), 1, 2, 3)  # every key padded
    query, source, query_labels, key_labels = teaching.cross_inputs(1, 2, 3, 4, seed=0)
    masked = teaching.run_cross(
        4, 2, bias=False, seed=0, device="cpu", dtype="float32", query=query, source=source, mask=mask
    )
    assert (masked.trace.output == 0).all()  # no bias anywhere: the fully masked rows' output is exactly zero
    view = masks_and_cross_attention.build_masks_view(
        masked, mask, query_labels, key_labels, batch_index=0, implementation="explicit", presenter=False
    )
    text = masks_and_cross_attention.fully_masked_text(view, qkv_bias=False)
    assert "single `bias` flag" in text and "never touches out_proj" in text


def test_imprecision_8_the_temperature_caption_states_the_scale_used():
    settings = Settings()
    module = runs.build_module(settings.module_spec())
    x, labels = runs.build_input(settings.input_spec())
    run = runs.run_temperature(module, x, 4.0)
    trace = run.trace
    expected = torch.softmax(trace.steps["masked_scores"] * 4.0 / trace.steps["queries_heads"].shape[-1] ** 0.5, -1)
    torch.testing.assert_close(trace.steps["attn_weights"], expected)
    shown = knobs_that_teach.build_temperature_view(run, labels, presenter=False).panels[0].caption
    assert "multiplied by 4/√head_dim = 4" in shown and "not the listing's 1/√head_dim" in shown
    plain = knobs_that_teach.build_temperature_view(runs.run_temperature(module, x, 1.0), labels, presenter=False)
    assert "not the listing's" not in plain.panels[0].caption


def test_imprecision_9_the_references_agree_on_this_input_to_float_rounding():
    settings = Settings()
    x, _ = runs.build_input(settings.input_spec())
    report = runs.compare_on_device(settings.module_spec(), x)
    assert 0 <= report.output_vs_sdpa <= heads_and_references.agreement_tolerance("float32")
    text = heads_and_references.FUSED_NO_WEIGHTS
    assert "prove" not in text and "on this input, to float rounding" in text


# --- what must hold, items 3–6 ----------------------------------------------------------------------------------------


def test_step_5_says_rank_at_most_head_dim_and_why_head_0_is_flat():
    run = explorer_run()  # head_dim 1
    scores = run.trace.steps["attn_scores"][0]  # (h, T, T)
    assert [int(torch.linalg.matrix_rank(s.double(), rtol=1e-5)) for s in scores] == [1, 1]  # outer products
    queries = run.trace.steps["queries_heads"][0, 0, :, 0]  # head 0, (T,)
    assert (queries < 0).all()
    weights = run.trace.steps["attn_weights"][0, 0, 1:]  # rows that see two keys or more
    assert set(weights.argmax(-1).tolist()) == {1} and 0.52 < float(weights.max()) < 0.525  # journey; ≤ 0.52
    view = step_through.build_step_view(
        run.trace, run.labels, number("scores"), batch_index=0, presenter=False, dropout_active=False
    )
    text = " ".join(view.sentences)
    assert "Rank ≤ head_dim" in text and "head 0: 1, head 1: 1" in text and "outer product" in text
    assert "In head 0 every query is negative" in text and "'journey' in every row" in text
    assert "no weight is above 0.52" in text and "In head 1 every query" not in text
    wide = explorer_run(Settings(d_out=8, num_heads=2))  # head_dim 4
    wide_text = " ".join(
        step_through.build_step_view(
            wide.trace, wide.labels, number("scores"), batch_index=0, presenter=False, dropout_active=False
        ).sentences
    )
    assert "head_dim = 4 (here head 0: 3, head 1: 3)" in wide_text  # 3 tokens of d_in 3: rank ≤ min(T, d_in)
    assert "outer product" not in wide_text


def test_the_softmax_step_charts_why_sqrt_head_dim():
    demo = teaching.scale_demo()
    assert demo.head_dims == (1, 4, 16, 64)
    for ratio, d in zip([s / demo.spread[0] for s in demo.spread], demo.head_dims, strict=True):
        assert ratio == pytest.approx(d**0.5, rel=0.25)  # the raw spread grows like √head_dim
    assert max(demo.spread_scaled) / min(demo.spread_scaled) < 1.2  # divided: about the same for every head_dim
    assert demo.top_weight[-1] > 3 * demo.top_weight[0]  # towards one-hot without the division
    assert max(demo.top_weight_scaled) - min(demo.top_weight_scaled) < 0.02
    run = explorer_run()
    view = step_through.build_step_view(
        run.trace,
        run.labels,
        number("softmax"),
        batch_index=0,
        presenter=False,
        dropout_active=False,
        scale_demo=demo,
    )
    keys = [p.key for p in view.panels]
    assert keys[-2:] == ["scale_spread", "scale_top_weight"] and view.main.key == "step_attn_weights"
    drawn = view.panels[-1].figure.to_dict()["data"]
    assert list(drawn[0]["y"]) == pytest.approx(list(demo.top_weight))


def test_out_proj_maps_the_heads_back_to_the_embedding_width_and_d_out_is_per_head_in_the_wrapper():
    from mha_core.attention import book
    from mha_core.gpt.model import GPTModel

    cfg = {"vocab_size": 20, "context_length": 8, "emb_dim": 12, "n_heads": 3, "n_layers": 1}
    model = GPTModel(cfg | {"drop_rate": 0.0, "qkv_bias": False}).eval()
    att = model.attention_module(0)
    assert att.d_in == att.d_out == 12 and att.out_proj.weight.shape == (12, 12)  # back to emb_dim: x + att(x)
    torch.manual_seed(0)
    wrapper = book.MultiHeadAttentionWrapper(3, 1, 6, 0.0, num_heads=2).eval()  # d_out 1 per head
    x = book_tokens()[0][None]
    out = wrapper(x)
    assert out.shape == (1, 6, 2)  # num_heads · d_out
    batched = book.from_wrapper(wrapper, 6).eval()
    assert (batched.d_out, batched.num_heads) == (2, 2)
    torch.testing.assert_close(batched(x), out)
    text = " ".join(step("out_proj").sentences)
    assert "added back to its input" in text and "Wrapper(d_out=1, num_heads=2) matches" in text


def test_cost_tells_memory_from_work():
    from torch.utils.flop_counter import FlopCounterMode

    b, h, d = 2, 4, 16
    flops = []
    for t in (64, 128):
        module = MultiHeadAttention(h * d, h * d, t, 0.0, h).eval()
        x = torch.rand(b, t, h * d)
        with FlopCounterMode(display=False) as counter:
            attention_explorer_free = runs.run_trace(module, x)
        assert attention_explorer_free.output.shape == (b, t, h * d)
        projections = 4 * 2 * b * t * (h * d) ** 2  # W_query, W_key, W_value, out_proj
        flops.append(counter.get_total_flops() - projections)
        assert flops[-1] == 2 * (2 * b * h * t * t * d)  # Q Kᵀ and weights @ V: 2 flops per multiply-add
    assert flops[1] == 4 * flops[0]
    text = cost.work_markdown(b, h, d, [64, 128])
    assert "2 · b · h · T² · head_dim" in text and f"{2 * b * h * 128 * 128 * d:,}" in text
    assert "not sub-quadratic" in text and "saves the memory" in text
