"""mha_core.runs.teaching and the teaching pages' views: the numbers and figures behind them, without Streamlit."""

import copy
import math

import numpy as np
import pytest
import torch

from explorer.views import (
    heads_and_references,
    knobs_that_teach,
    masks_and_cross_attention,
    step_through,
    step_through_steps,
)
from mha_core.attention import masks
from mha_core.attention.kernels import ExplicitAttention
from mha_core.attention.listing import LISTING_LINES, STEP_LINES, statement_lines
from mha_core.attention.modules import MultiHeadAttention, trace_forward
from mha_core.attention.reference import compare_with_torch
from mha_core.runs import forward as runs
from mha_core.runs import teaching
from mha_core.runs.forward import InputSpec, ModuleSpec, build_input, build_module, run_trace

# --- entropy -------------------------------------------------------------------------------------------------------


def test_row_entropy_is_zero_for_one_hot_and_log_n_for_uniform():
    weights = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 0.0, 0.0], [0.0] * 4])
    entropy = teaching.row_entropy(weights)
    assert entropy.shape == (4,)
    assert entropy[0].item() == 0.0  # one-hot
    assert entropy[1].item() == pytest.approx(math.log(4), abs=1e-6)
    assert entropy[2].item() == pytest.approx(math.log(2), abs=1e-6)
    assert entropy[3].item() == 0.0  # a fully masked row: no NaN from 0·log 0
    allowed = weights > 0
    assert teaching.uniform_entropy(allowed).tolist() == pytest.approx([0.0, math.log(4), math.log(2), 0.0])


def test_entropy_falls_as_the_scale_rises():
    spec = ModuleSpec(d_in=8, d_out=16, context_length=10, num_heads=4, seed=7)
    module = build_module(spec)
    x, _ = build_input(InputSpec(kind="random", num_tokens=10, d_in=8, batch_size=2, seed=3))
    multipliers = [0.01, 0.25, 1, 4, 16, 256]
    sweep = runs.entropy_sweep(module, x, multipliers)
    assert all(a > b for a, b in zip(sweep, sweep[1:], strict=False)), sweep
    allowed = masks.causal(10).expand(2, 4, 10, 10)
    assert sweep[0] == pytest.approx(teaching.uniform_entropy(allowed).mean().item(), rel=1e-3)  # nearly uniform
    assert sweep[-1] < 0.2 * sweep[0]  # much closer to one-hot
    # the sweep's points are the module's own traced weights
    trace = run_trace(module, x, attention=ExplicitAttention(scale=4 / math.sqrt(module.head_dim)))
    assert sweep[3] == teaching.mean_entropy(trace.steps["attn_weights"])
    with pytest.raises(ValueError, match="positive"):
        runs.entropy_sweep(module, x, [0.0])


# --- dropout -------------------------------------------------------------------------------------------------------


def test_dropout_report_shows_the_keep_mask_and_exact_rescaling():
    p = 0.4
    module = build_module(ModuleSpec(d_in=4, d_out=8, context_length=40, dropout=p, num_heads=2, seed=1))
    x, _ = build_input(InputSpec(kind="random", num_tokens=40, d_in=4, batch_size=2, seed=2))
    trace = run_trace(module, x, train=True, seed=5)
    report = teaching.dropout_report(trace, p)
    before, after = trace.steps["attn_weights"], trace.steps["attn_weights_dropped"]
    kept = report.keep & report.allowed
    assert torch.all(after[~report.keep] == 0)  # dropped cells are zero
    assert torch.allclose(after[kept], before[kept] / (1 - p), rtol=1e-6, atol=0)
    assert report.max_rescale_error < 1e-6
    assert report.scale == pytest.approx(1 / (1 - p))
    assert abs(report.kept_fraction - (1 - p)) < 0.05  # 2 × 2 × 820 allowed cells
    assert report.row_sums.mean().item() == pytest.approx(1.0, abs=0.1)
    assert not torch.allclose(report.row_sums, torch.ones_like(report.row_sums))
    assert not module.training  # run_trace trained a private copy
    with pytest.raises(ValueError, match="train mode"):
        teaching.dropout_report(run_trace(module, x), p)


# --- hand-made weights ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", teaching.POSITION_PATTERNS)
@pytest.mark.parametrize(("tokens", "heads"), [(1, 1), (6, 2), (16, 3)])
def test_positional_presets_produce_the_named_pattern(pattern, tokens, heads):
    module = teaching.positional_module(pattern, tokens, heads)
    x = teaching.position_inputs(tokens, batch_size=2)
    trace = trace_forward(module, x)
    weights = trace.steps["attn_weights"]  # (b, h, T, T)
    targets = teaching.pattern_targets(pattern, tokens)
    assert teaching.top_key_hits(weights, targets) == 1.0
    on_target = weights[..., range(tokens), targets]  # (b, h, T)
    assert on_target.min().item() > 0.99
    expected = {"self": list(range(tokens)), "previous": [0] + list(range(tokens - 1)), "first": [0] * tokens}
    assert targets == expected[pattern]
    # W_value = out_proj = I: each head's context row is its weight row, and the output is the heads side by side
    assert torch.allclose(trace.steps["context_heads"], weights, atol=1e-6)


def test_positional_presets_reject_too_many_tokens_and_leave_the_rng_alone():
    state = torch.get_rng_state()
    teaching.positional_module("first", 4, 2)
    assert torch.equal(state, torch.get_rng_state())
    with pytest.raises(ValueError, match="1–16 tokens"):
        teaching.positional_module("first", teaching.MAX_PRESET_TOKENS + 1, 1)
    with pytest.raises(ValueError, match="pattern"):
        teaching.pattern_targets("next", 3)


def test_identity_qk_copies_and_scores_become_input_dot_products():
    module = build_module(ModuleSpec(d_in=6, d_out=4, context_length=5, num_heads=2, qkv_bias=True, seed=3))
    before = copy.deepcopy(module.state_dict())
    made = teaching.with_identity_qk(module)
    for name, tensor in module.state_dict().items():
        assert torch.equal(tensor, before[name]), f"{name} of the original module changed"
    x = torch.rand(2, 5, 6)
    scores = trace_forward(made, x).steps["attn_scores"]  # (b, h, T, T)
    for head in range(2):
        part = x[..., 2 * head : 2 * head + 2]  # head k sees input features 2k, 2k+1
        assert torch.allclose(scores[:, head], part @ part.transpose(1, 2), atol=1e-6)
    assert torch.equal(made.W_value.weight, module.W_value.weight)


# --- masks and cross-attention -------------------------------------------------------------------------------------


def test_mask_bits_round_trip_with_empty_rows_and_columns():
    mask = torch.tensor([[True, False, True], [False, False, False], [True, False, False]])  # row 1, column 1 empty
    bits = masks_and_cross_attention.mask_to_bits(mask)
    assert bits == [0b101, 0, 0b001]
    assert torch.equal(masks_and_cross_attention.mask_from_bits(bits, 3), mask)
    assert masks_and_cross_attention.mask_from_bits([], 4).shape == (0, 4)


CUSTOM_FLAGS = ((True,) * 5, (False,) * 5, (True, False, False, False, False))  # the URL's m0=31, m1=0, m2=1


@pytest.mark.parametrize("kind", teaching.MASK_KINDS)
def test_every_mask_builder_gives_b_i_j_with_true_meaning_may_attend(kind):
    params = teaching.MaskParams(kind=kind, lengths=(5, 0), window=2, keep_fraction=0.5, seed=1, custom=CUSTOM_FLAGS)
    mask = teaching.make_mask(params, 2, 3, 5)
    if kind == "none":
        assert mask is None
        return
    assert mask.shape == (2, 3, 5) and mask.dtype == torch.bool
    i, j = torch.arange(3)[:, None], torch.arange(5)[None, :]
    expected = {
        "causal": (j <= i).expand(2, 3, 5),
        "padding": torch.stack([torch.ones(3, 5, dtype=torch.bool), torch.zeros(3, 5, dtype=torch.bool)]),
        "sliding window": ((j <= i) & (i - j < 2)).expand(2, 3, 5),
        "random": masks.random(3, 5, 0.5, 1, batch_size=2),
        "custom": masks_and_cross_attention.mask_from_bits([0b11111, 0, 0b00001], 5).expand(2, 3, 5),
    }[kind]
    assert torch.equal(mask, expected)


def test_the_pages_url_units_become_the_cores_mask_params():
    """?keep= is a percent and ?m0=… are bit rows; the core takes a fraction and one flag per key."""
    assert masks_and_cross_attention.random_params(35, seed=4) == teaching.MaskParams(
        kind="random", keep_fraction=0.35, seed=4
    )
    assert masks_and_cross_attention.custom_params([0b11111, 0, 0b00001], 5).custom == CUSTOM_FLAGS
    assert masks_and_cross_attention.custom_params([0b111], 2).custom == ((True, True),)  # bits past the keys: ignored


def test_mask_builders_reject_wrong_sizes():
    with pytest.raises(ValueError, match="2 lengths"):
        teaching.make_mask(teaching.MaskParams(kind="padding", lengths=(1,)), 2, 3, 4)
    with pytest.raises(ValueError, match="one row per query"):
        teaching.make_mask(teaching.MaskParams(kind="custom", custom=((True,) * 4,) * 2), 1, 3, 4)
    with pytest.raises(ValueError, match=r"one flag per key \(4\) in every row, got rows of \[3, 4\]"):
        teaching.make_mask(teaching.MaskParams(kind="custom", custom=((True,) * 4, (True,) * 3)), 1, 2, 4)
    with pytest.raises(ValueError, match="mask kind"):
        teaching.make_mask(teaching.MaskParams(kind="diagonal"), 1, 3, 4)


@pytest.mark.parametrize("fraction", [-0.01, 1.5, 70, float("nan")])
def test_keep_fraction_outside_0_1_is_refused_naming_the_number(fraction):
    with pytest.raises(ValueError, match=f"keep_fraction must be in \\[0, 1\\], got {fraction}"):
        teaching.MaskParams(kind="random", keep_fraction=fraction)


def test_cross_attention_fully_masked_rows_are_zero_and_fused_agrees():
    query, source, q_labels, k_labels = teaching.cross_inputs(2, 4, 6, 8, seed=0)
    assert query.shape == (2, 4, 8) and source.shape == (2, 6, 8) and k_labels[-1] == "k5"
    params = masks_and_cross_attention.custom_params([0b111111, 0, 0b000001, 0b100000], 6)
    mask = teaching.make_mask(params, 2, 4, 6)
    run = teaching.run_cross(
        8, 2, bias=True, seed=3, device="cpu", dtype="float32", query=query, source=source, mask=mask
    )
    steps = run.trace.steps
    weights = steps["attn_weights"]  # (b, h, i, j)
    assert torch.all(weights[mask[:, None].expand_as(weights).logical_not()] == 0)
    assert torch.all(weights[:, :, 1] == 0) and torch.all(steps["context_heads"][:, :, 1] == 0)
    assert torch.equal(steps["fully_masked_rows"].squeeze(1), masks.fully_masked_rows(mask))
    assert run.max_diff_explicit_fused < 1e-6
    nan_rows = torch.isnan(torch.softmax(steps["scaled_scores"], dim=-1)).all(-1)  # a hand-written softmax: 0/0
    assert nan_rows[:, :, 1].all() and nan_rows.sum() == 2 * 2  # row 1 in every batch element and head
    assert torch.equal(nan_rows, torch.isneginf(steps["scaled_scores"]).all(-1))  # what the view counts instead
    view = masks_and_cross_attention.build_masks_view(
        run, mask, q_labels, k_labels, batch_index=0, implementation="fused", presenter=False
    )
    assert view.fully_masked == ((0, (1,)), (1, (1,)))
    assert view.context_zero_on_masked_rows and view.handwritten_nan_rows == 4
    assert "False" in view.ours_text and view.blocked_text.count("True") == view.ours_text.count("False")


def test_both_implementations_share_weights():
    explicit = teaching.build_qkv_module(8, 2, implementation="explicit", seed=4)
    fused = teaching.build_qkv_module(8, 2, implementation="fused", seed=4)
    for (name, a), (_, b) in zip(explicit.state_dict().items(), fused.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="implementation"):
        teaching.build_qkv_module(8, 2, implementation="flash")


# --- references ----------------------------------------------------------------------------------------------------


def test_compare_on_device_is_compare_with_torch_where_float64_exists():
    spec = ModuleSpec()
    x, _ = build_input(InputSpec())
    expected = compare_with_torch(build_module(spec), x)
    assert runs.compare_on_device(spec, x) == expected
    assert runs.compare_on_device(spec, x, cpu_baseline=True) == expected  # the path a device without float64 takes
    report64 = runs.compare_on_device(ModuleSpec(dtype="float64"), x)
    assert report64.dtype == "float64" and report64.output_vs_float64 == 0.0
    assert heads_and_references.within_torch_error(report64)
    table = heads_and_references.reference_table({"float32": runs.compare_on_device(spec, x), "float64": report64})
    assert list(table) == ["comparison", "float32", "float64"]
    assert len(table["comparison"]) == len(table["float32"]) == len(heads_and_references.REFERENCE_ROWS)


# --- step through --------------------------------------------------------------------------------------------------


def test_statement_lines_follow_open_brackets():
    view_line = STEP_LINES["queries_split"]
    assert statement_lines(view_line) == [
        view_line,
        view_line + 1,
        view_line + 2,
    ]  # queries.view( … )
    assert statement_lines(STEP_LINES["attn_scores"]) == [STEP_LINES["attn_scores"]]
    assert statement_lines(STEP_LINES["attn_weights"]) == [
        STEP_LINES["attn_weights"],
        STEP_LINES["attn_weights"] + 1,
    ]


def test_marked_listing_marks_exactly_the_given_lines():
    text = step_through_steps.marked_listing([38, 41])
    lines = text.splitlines()
    assert len(lines) == len(LISTING_LINES)
    marked = [n for n, line in enumerate(lines, start=1) if line.startswith(step_through_steps.MARK)]
    assert marked == [38, 41]
    assert lines[37] == f"{step_through_steps.MARK} {LISTING_LINES[37]}"


BOOK_SHAPES = {  # step -> (before, after) for the book's example: b 2, T 6, d_in 3, d_out 2, h 2, head_dim 1
    "x": ("", "(b, T, d_in) = (2, 6, 3)"),
    "projections": ("(b, T, d_in) = (2, 6, 3)", "(b, T, d_out) = (2, 6, 2)"),
    "view": ("(b, T, d_out) = (2, 6, 2)", "(b, T, h, head_dim) = (2, 6, 2, 1)"),
    "transpose": ("(b, T, h, head_dim) = (2, 6, 2, 1)", "(b, h, T, head_dim) = (2, 2, 6, 1)"),
    "scores": ("(b, h, T, head_dim) = (2, 2, 6, 1)", "(b, h, T, T) = (2, 2, 6, 6)"),
    "mask": ("(b, h, T, T) = (2, 2, 6, 6)", "(b, h, T, T) = (2, 2, 6, 6)"),
    "softmax": ("(b, h, T, T) = (2, 2, 6, 6)", "(b, h, T, T) = (2, 2, 6, 6)"),
    "dropout": ("(b, h, T, T) = (2, 2, 6, 6)", "(b, h, T, T) = (2, 2, 6, 6)"),
    "context": ("(b, h, T, T) = (2, 2, 6, 6)", "(b, h, T, head_dim) = (2, 2, 6, 1)"),
    "transpose_back": ("(b, h, T, head_dim) = (2, 2, 6, 1)", "(b, T, h, head_dim) = (2, 6, 2, 1)"),
    "concatenate": ("(b, T, h, head_dim) = (2, 6, 2, 1)", "(b, T, d_out) = (2, 6, 2)"),
    "out_proj": ("(b, T, d_out) = (2, 6, 2)", "(b, T, d_out) = (2, 6, 2)"),
}


def test_every_step_has_its_shapes_lines_and_a_figure():
    assert [step.key for step in step_through_steps.STEPS] == list(BOOK_SHAPES)
    module = build_module(ModuleSpec())
    x, labels = build_input(InputSpec())
    trace = run_trace(module, x)
    for number, step in enumerate(step_through_steps.STEPS, start=1):
        view = step_through.build_step_view(trace, labels, number, batch_index=1, presenter=False, dropout_active=False)
        assert (view.shape_before, view.shape_after) == BOOK_SHAPES[step.key], step.key
        for name in step.listing_steps:
            assert STEP_LINES[name] in view.lines, (step.key, name)
        assert view.code.splitlines()[0] == LISTING_LINES[view.lines[0] - 1].strip()
        assert view.panels and all(panel.figure.data for panel in view.panels)
        assert len(view.sentences) >= 2
    with pytest.raises(ValueError, match="step"):
        step_through.build_step_view(trace, labels, 13, batch_index=0, presenter=False, dropout_active=False)


def test_step_figures_hold_the_traced_numbers():
    module = build_module(ModuleSpec())
    x, labels = build_input(InputSpec())
    trace = run_trace(module, x)
    number = [step.key for step in step_through_steps.STEPS].index("softmax") + 1
    view = step_through.build_step_view(trace, labels, number, batch_index=0, presenter=True, dropout_active=False)
    main = view.main.figure  # the softmax step's result: the weights
    for head in range(2):
        values = next(t for t in main.data if t.meta == {"role": "values", "head": head})
        np.testing.assert_array_equal(np.asarray(values.z), trace.numpy("attn_weights")[0, head])


def test_identity_preset_view_never_touches_the_module_it_is_given():
    module = build_module(ModuleSpec())
    before = copy.deepcopy(module.state_dict())
    x, labels = build_input(InputSpec())
    for preset in teaching.PRESETS:
        view = knobs_that_teach.build_preset_view(
            runs.run_preset(module, x, labels, preset, num_heads=2), presenter=False
        )
        assert view.panels[0].figure.data
        if preset in teaching.POSITION_PATTERNS:
            assert view.hits == 1.0
    for name, tensor in module.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    assert isinstance(module, MultiHeadAttention) and not module.training
