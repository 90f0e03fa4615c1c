"""The four teaching pages, run headless with AppTest, each opened directly by its URL (no app.py).

Figures are read back from the chart JSON the page sends (plotly encodes arrays as base64 {dtype, bdata, shape}),
and compared with mha_core's own numbers computed here.
"""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from explorer.glue.frame.chart import ELEMENT, key_of
from explorer.views import heads_and_references, masks_and_cross_attention, step_through, step_through_steps
from mha_core.attention import masks
from mha_core.attention.listing import INIT_LINES, LISTING_LINES, STEP_LINES
from mha_core.attention.reference import compare_with_torch
from mha_core.runs import teaching
from mha_core.runs.forward import InputSpec, ModuleSpec, build_input, build_module, run_trace, separate_heads

from .. import apptest_helpers as helpers
from ..apptest_helpers import chart_places, charts, decode, printed

PAGES = {
    "step": "pages/1_Step_through.py",
    "heads": "pages/2_Heads_and_references.py",
    "masks": "pages/3_Masks_and_cross_attention.py",
    "knobs": "pages/4_Knobs_that_teach.py",
}


def open_page(page: str, **params) -> AppTest:
    """One of the four pages by its short name, as a link opens it; the run must not fail."""
    at = helpers.open_page(PAGES[page], {name: str(value) for name, value in params.items()}, timeout=60)
    assert not at.exception, at.exception[0].value if at.exception else ""
    return at


def chart(at: AppTest, key: str) -> dict:
    """The figure JSON of the chart drawn with key ``chart_<key>``."""
    found = charts(at)
    if key not in found:
        raise AssertionError(f"no chart_{key} on the page")
    return found[key]


def head_values(spec: dict, head: int) -> np.ndarray:
    """The values heatmap of one head (NaN where an overlay draws −∞ or NaN)."""
    trace = next(t for t in spec["data"] if t.get("meta") == {"role": "values", "head": head})
    return decode(trace["z"])


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning]


def url(at: AppTest, name: str) -> str:
    """A query parameter as the page left it (sync_url)."""
    value = at.query_params[name]
    return value[-1] if isinstance(value, list) else value


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


# --- 1. Step through -----------------------------------------------------------------------------------------------


def marked_lines(listing: str) -> list[int]:
    return [n for n, line in enumerate(listing.splitlines(), start=1) if line.startswith(step_through_steps.MARK)]


def test_step_through_has_twelve_steps_and_opens_on_the_url_step():
    at = open_page("step", step=5)
    slider = at.slider(key="step_number")
    assert (slider.min, slider.max, slider.value) == (1, 12, 5)
    listing = at.code[0].value
    assert marked_lines(listing) == [STEP_LINES["attn_scores"]] == [38]
    assert listing.splitlines()[37] == f"{step_through_steps.MARK} {LISTING_LINES[37]}"
    assert at.header[0].value == "Step 5 of 12: Scores: queries @ keysᵀ"
    texts = [m.value for m in at.markdown]
    assert "**Shape:** `(b, h, T, head_dim) = (2, 2, 6, 1)  →  (b, h, T, T) = (2, 2, 6, 6)`" in texts
    assert "**Listing 3.5, line 38:**" in texts
    assert url(at, "step") == "5"


def test_next_and_previous_move_one_step_and_the_url_follows():
    at = open_page("step", step=11)
    at.button(key="step_next").click().run()
    assert at.slider(key="step_number").value == 12 and url(at, "step") == "12"
    assert at.button(key="step_next").disabled
    # out_proj's constructor (__init__), then its call and the return
    assert marked_lines(at.code[0].value) == [INIT_LINES["out_proj"], STEP_LINES["output"], STEP_LINES["output"] + 1]
    at.button(key="step_previous").click().run()
    at.button(key="step_previous").click().run()
    assert at.slider(key="step_number").value == 10 and url(at, "step") == "10"
    at.slider(key="step_number").set_value(1).run()
    assert url(at, "step") == "1" and at.button(key="step_previous").disabled


def test_every_step_shows_the_traced_shapes_and_its_lines():
    """Non-default settings from the URL: 3 heads of 4 dims, 5 random tokens of 7 features, batch 3."""
    params = {
        "num_heads": 3,
        "head_dim": 4,
        "d_out": 12,
        "d_in": 7,
        "num_tokens": 5,
        "input": "random",
        "batch_size": 3,
        "seed": 9,
    }
    at = open_page("step", **params)
    trace = run_trace(
        build_module(ModuleSpec(d_in=7, d_out=12, context_length=6, num_heads=3, seed=9)),
        build_input(InputSpec(kind="random", num_tokens=5, d_in=7, batch_size=3, seed=9))[0],
    )
    for number, step in enumerate(step_through_steps.STEPS, start=1):
        at.slider(key="step_number").set_value(number).run()
        assert not at.exception
        shape = step_through.shape_line(trace, *step.after)
        if step.before:
            shape = f"{step_through.shape_line(trace, *step.before)}  →  {shape}"
        assert f"**Shape:** `{shape}`" in [m.value for m in at.markdown], step.key
        assert marked_lines(at.code[0].value) == list(step.lines)
        assert at.get(ELEMENT), step.key
    assert "(b, T, d_out) = (3, 5, 12)" in shape


def test_step_heatmap_holds_the_module_numbers_for_the_chosen_batch_element():
    at = open_page("step", step=7, batch=1, presenter="true")
    assert len(at.get(ELEMENT)) == 1  # presenter mode: the step's heatmap only
    assert at.title[0].value.startswith("7/12")
    trace = run_trace(build_module(ModuleSpec()), build_input(InputSpec())[0])
    spec = chart(at, "step_attn_weights")
    for head in range(2):
        np.testing.assert_array_equal(head_values(spec, head), trace.numpy("attn_weights")[1, head])
    assert url(at, "presenter") == "true" and url(at, "batch") == "1"


@pytest.mark.parametrize(
    ("raw", "shown", "message"),
    [("abc", 1, "not a whole number"), ("99", 12, "outside 1–12"), ("-3", 1, "outside 1–12")],
)
def test_bad_step_gives_a_notice_not_a_traceback(raw, shown, message):
    at = open_page("step", step=raw)
    assert at.slider(key="step_number").value == shown
    assert any(message in w and "step=" in w for w in warnings(at))


# --- 2. Heads and references ---------------------------------------------------------------------------------------


def test_heads_and_references_show_mha_cores_own_numbers_below_tolerance():
    params = {
        "num_heads": 4,
        "head_dim": 3,
        "d_out": 12,
        "d_in": 12,
        "num_tokens": 7,
        "input": "random",
        "qkv_bias": "true",
        "seed": 5,
    }
    at = open_page("heads", **params)
    spec = ModuleSpec(d_in=12, d_out=12, context_length=7, num_heads=4, qkv_bias=True, seed=5)
    x, _ = build_input(InputSpec(kind="random", num_tokens=7, d_in=12, batch_size=2, seed=5))

    heads_table = at.dataframe[0].value
    expected = separate_heads(build_module(spec), x).max_abs_diff
    assert dict(zip(heads_table["step"], heads_table["max |separate − batched|"], strict=True)) == expected
    assert max(expected.values()) < 1e-6
    assert len(at.dataframe) == 1  # the references tab is closed: not run, not sent

    at = open_page("heads", part="references", **params)
    table = at.dataframe[0].value
    assert list(table.columns) == ["comparison", "float32", "float64"]
    for dtype, tolerance in (("float32", 1e-5), ("float64", 1e-12)):
        report = compare_with_torch(build_module(replace(spec, dtype=dtype)), x.to(getattr(torch, dtype)))
        shown = dict(zip(table["comparison"], table[dtype], strict=True))
        for field, label in heads_and_references.REFERENCE_ROWS:
            assert shown[label] == getattr(report, field), (dtype, field)
            assert shown[label] < tolerance, (dtype, field)
    assert len(at.success) == 2 and not at.error
    assert any("online softmax" in m.value for m in at.markdown)


def test_heads_difference_heatmap_is_separate_minus_batched():
    at = open_page("heads", batch=1)
    module = build_module(ModuleSpec())
    x, _ = build_input(InputSpec())
    separate = separate_heads(module, x).weights[1].numpy()
    batched = run_trace(module, x).numpy("attn_weights")[1]
    spec = chart(at, "heads_difference")
    for head in range(2):
        np.testing.assert_array_equal(head_values(chart(at, "heads_separate"), head), separate[head])
        np.testing.assert_array_equal(
            head_values(spec, head), (separate[head].astype(np.float64) - batched[head]).astype(np.float32)
        )


# --- 3. Masks and cross-attention ----------------------------------------------------------------------------------

MASK_CASES = {
    "causal": ({}, teaching.MaskParams(kind="causal")),
    "padding": ({"len0": 6, "len1": 3}, teaching.MaskParams(kind="padding", lengths=(6, 3))),
    "sliding window": (
        {"window": 2, "window_side": "both"},
        teaching.MaskParams(kind="sliding window", window=2, causal_only=False),
    ),
    "random": ({"keep": 50}, teaching.MaskParams(kind="random", keep_fraction=0.5, seed=123)),
    "custom": (
        {"m0": 0b111111, "m1": 0, "m2": 0b000101, "m3": 0b100001},  # row q1 and columns k1, k3, k4 empty
        masks_and_cross_attention.custom_params([0b111111, 0, 0b000101, 0b100001], 6),
    ),
}


@pytest.mark.parametrize("kind", list(MASK_CASES))
def test_each_mask_appears_in_the_weights_with_zeros_exactly_where_blocked(kind):
    extra, params = MASK_CASES[kind]
    at = open_page("masks", mask=kind, tgt_len=4, src_len=6, batch=1, **extra)
    mask = teaching.make_mask(params, 2, 4, 6)[1].numpy()  # (i, j) of batch element 1
    np.testing.assert_array_equal(head_values(chart(at, "mask"), 0), mask.astype(np.float32))
    weights_spec = chart(at, "weights")
    for head in range(2):
        weights = head_values(weights_spec, head)
        assert weights.shape == (4, 6)
        assert np.all(weights[~mask] == 0), head
        assert np.all(weights[mask] > 0), head
        rows = mask.any(-1)
        np.testing.assert_allclose(weights[rows].sum(-1), 1.0, atol=1e-6)
    assert float(metric(at, "max |explicit − fused| output")) < 1e-5
    assert metric(at, "implementations agree") == "yes"
    flagged = [w for w in warnings(at) if w.startswith("Fully masked rows")]
    assert bool(flagged) == bool((~teaching.make_mask(params, 2, 4, 6).any(-1)).any())
    if kind == "custom":
        assert flagged == ["Fully masked rows (every key blocked) · batch element 0: q1; batch element 1: q1"]
    assert not at.code  # boundary.printed: no syntax highlighter for a printed mask
    ours, blocked = printed(at)
    assert ours == str(torch.from_numpy(mask)) and blocked == str(masks.to_blocked(torch.from_numpy(mask)))


def test_padding_length_zero_flags_fully_masked_rows_and_zero_context():
    at = open_page("masks", mask="padding", tgt_len=3, src_len=5, len0=0, len1=5, impl="fused")
    assert warnings(at) == ["Fully masked rows (every key blocked) · batch element 0: q0, q1, q2"]
    text = " ".join(m.value for m in at.markdown)
    assert "are exactly 0" in text and "NaN in 6 (batch, head, query) rows" in text  # 3 rows × 2 heads
    weights = chart(at, "weights")
    assert all(np.all(head_values(weights, head) == 0) for head in range(2))
    assert chart(at, "output")["layout"]["title"]["text"].startswith("output (fused)")
    assert url(at, "len0") == "0" and url(at, "impl") == "fused"


def test_custom_mask_buttons_and_url_rows():
    at = open_page("masks", mask="custom", tgt_len=3, src_len=4)
    assert [url(at, f"m{i}") for i in range(3)] == ["1", "3", "7"]  # causal by default
    places = chart_places(at)
    at.button(key="masks_none").click().run()
    assert not at.exception
    assert [url(at, f"m{i}") for i in range(3)] == ["0", "0", "0"]
    assert warnings(at) == [
        "Fully masked rows (every key blocked) · batch element 0: q0, q1, q2; batch element 1: q0, q1, q2"
    ]
    assert chart_places(at) == places  # the warning came without moving a chart: each is updated, not redrawn
    at.button(key="masks_all").click().run()
    assert [url(at, f"m{i}") for i in range(3)] == ["15"] * 3 and not warnings(at)
    assert chart_places(at) == places


def test_no_mask_and_bad_mask_params():
    at = open_page("masks", mask="none")
    assert not printed(at) and all(np.all(head_values(chart(at, "weights"), h) > 0) for h in range(2))
    at = open_page("masks", mask="<b>x</b>", tgt_len=99, src_len="zz", m0=-1)
    notes = warnings(at)
    assert any("mask=`<b>x</b>` is not one of" in n for n in notes)
    assert any("tgt_len=`99` is outside 1–32" in n for n in notes)
    assert any("src_len=`zz` is not a whole number" in n for n in notes)
    assert at.slider(key="masks_tgt").value == 32 and at.selectbox(key="masks_kind").value == "padding"


def test_cross_attention_opens_on_padding_and_a_causal_mask_says_how_it_is_aligned():
    at = open_page("masks")
    assert not at.error and at.selectbox(key="masks_kind").value == "padding" and url(at, "mask") == "padding"
    assert "weights" in charts(at) and "padding mask only" in " ".join(c.value for c in at.caption)
    at = open_page("masks", mask="causal", tgt_len=4, src_len=6)
    weights = head_values(chart(at, "weights"), 0)  # (i, j)
    assert np.all(weights[:, 4:] == 0)  # top-left: k4 and k5 are never attended
    assert "k4, k5 are never attended" in " ".join(c.value for c in at.caption)


# --- 4. Knobs that teach -------------------------------------------------------------------------------------------


def test_entropy_falls_as_the_temperature_falls():
    entropies = []
    for multiplier in ("0.25", "4", "64"):
        at = open_page("knobs", scale=multiplier)
        entropies.append(float(metric(at, "mean row entropy (nats)")))
        assert float(metric(at, "softmax scale")) == pytest.approx(float(multiplier) / math.sqrt(1), rel=1e-3)
    assert entropies[0] > entropies[1] > entropies[2], entropies
    sweep = chart(at, "temperature_sweep")["data"][0]
    ys = decode(sweep["y"])
    assert np.all(np.diff(ys) < 0)  # the sweep falls too


def test_dropout_knob_shows_the_mask_and_the_rescaling():
    at = open_page("knobs", knob="dropout", drop=25, draw=3)
    assert metric(at, "survivors scaled by") == "×1.333"
    assert float(metric(at, "rescale error")) < 1e-6
    keep = chart(at, "dropout_keep")
    after = chart(at, "dropout_after")
    before = chart(at, "dropout_before")
    for head in range(2):
        kept = head_values(keep, head)
        w_after, w_before = head_values(after, head), head_values(before, head)
        dropped = kept == 0
        assert np.all(w_after[dropped] == 0)
        survivors = kept == 1
        np.testing.assert_allclose(w_after[survivors], w_before[survivors] / 0.75, rtol=1e-6)
        assert np.isnan(kept[np.triu_indices(6, 1)]).all()  # causally masked cells: neither kept nor dropped


@pytest.mark.parametrize("preset", teaching.POSITION_PATTERNS)
def test_hand_made_weights_produce_the_named_pattern(preset):
    at = open_page("knobs", knob="presets", preset=preset)
    assert metric(at, "rows on the pattern") == "100%"
    targets = teaching.pattern_targets(preset, 6)
    weights = chart(at, "preset_weights")
    for head in range(2):
        assert head_values(weights, head).argmax(-1).tolist() == targets


def test_knobs_bad_params_give_notices():
    at = open_page("knobs", scale="7", drop="500", draw="x", preset="<script>")
    notes = " ".join(warnings(at))
    assert "scale=`7` is not one of" in notes and "drop=`500` is outside 5–90" in notes
    assert "draw=`x` is not a whole number" in notes and "preset=`<script>` is not one of" in notes
    assert at.select_slider(key="knobs_scale").value == "1"
    assert at.session_state.knobs_preset == "previous"  # its radio is in a closed tab: corrected all the same


def test_only_the_open_knob_runs_and_the_others_keep_their_values():
    at = open_page("knobs", knob="dropout", drop=25, preset="first")
    keys = {key_of(element.proto).removeprefix("chart_") for element in at.get(ELEMENT)}
    assert keys == {"dropout_after", "dropout_keep", "dropout_before", "dropout_row_sums"}
    assert url(at, "drop") == "25" and url(at, "preset") == "first" and url(at, "knob") == "dropout"


# --- every page ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_opens_directly_in_presenter_mode_with_shared_settings(page):
    at = open_page(page, presenter="true", num_heads=3, head_dim=2, d_out=6, batch=7)
    assert at.toggle(key="w_presenter").value
    assert at.slider(key="w_num_heads").value == 3  # the explorer's shared sidebar, from the URL
    assert url(at, "num_heads") == "3" and url(at, "presenter") == "true"
    assert at.get(ELEMENT)
    if page != "knobs":  # batch is a page parameter of the other three: clamped with a notice
        assert any("batch=`7` is outside 0–1" in w for w in warnings(at))


TABS = [("app.py", "section"), (PAGES["knobs"], "knob"), (PAGES["heads"], "part")]


@pytest.mark.parametrize(("path", "key"), TABS)
def test_a_bad_tab_in_the_url_opens_the_first_tab_with_a_notice(path, key):
    at = helpers.open_page(path, {key: "<script>x"}, timeout=60)
    assert not at.error and at.get(ELEMENT)
    assert any(f"{key}=`<script>x` is not one of" in w for w in warnings(at)), warnings(at)
