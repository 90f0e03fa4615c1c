"""mha_core.runs.profiling (formula, memory accounting, report structure) and the Cost page through AppTest.

No timing is asserted: times on a shared machine say nothing. Memory is counted in bytes, so it is exact.
"""

from __future__ import annotations

import pytest
import torch
from streamlit.testing.v1 import AppTest

from explorer.glue.frame.chart import ELEMENT, figure_of, key_of
from explorer.glue.memory import budget
from explorer.views import cost
from mha_core.attention.modules import trace_forward
from mha_core.runs import forward as runs
from mha_core.runs import profiling

from ..apptest_helpers import chart_places, run_page

PAGE = "pages/6_Cost.py"
SMALL = profiling.CostSpec(
    num_heads=2, head_dim=4, batch_size=2, max_tokens=128, min_tokens=32, repeats=1, time_budget_s=120
)


@pytest.mark.parametrize(
    ("b", "h", "t", "dtype", "expected"),
    [
        (1, 1, 1, "float32", 4),
        (2, 4, 64, "float32", 2 * 4 * 64 * 64 * 4),
        (1, 16, 1024, "float32", 64 * 2**20),  # the explorer's largest setting: 64 MiB per matrix
        (3, 2, 10, "float64", 3 * 2 * 100 * 8),
        (1, 2, 8, torch.bfloat16, 2 * 64 * 2),
    ],
)
def test_attention_matrix_bytes_is_b_h_t_squared_bytes(b, h, t, dtype, expected):
    assert profiling.attention_matrix_bytes(b, h, t, dtype) == expected


@pytest.mark.parametrize(("b", "h", "d", "t"), [(1, 1, 1, 1), (2, 3, 4, 7), (1, 16, 2, 64)])
def test_traced_attention_steps_hold_exactly_the_formulas_bytes(b, h, d, t):
    module = runs.build_module(runs.ModuleSpec(d_in=5, d_out=h * d, context_length=t, num_heads=h))
    trace = trace_forward(module, torch.rand(b, t, 5))
    measured = profiling.trace_matrix_bytes(trace)
    assert set(measured) == set(profiling.ATTENTION_STEPS)
    formula = profiling.attention_matrix_bytes(b, h, t, "float32")
    assert measured == dict.fromkeys(profiling.ATTENTION_STEPS, formula)
    for name in profiling.ATTENTION_STEPS:  # and each is its own (b, h, T, T) storage of exactly that size
        assert trace.steps[name].shape == (b, h, t, t)
        assert trace.steps[name].untyped_storage().nbytes() == formula


def test_token_counts_double_up_to_the_maximum():
    assert profiling.token_counts(1024) == [64, 128, 256, 512, 1024]
    assert profiling.token_counts(300) == [64, 128, 256]
    assert profiling.token_counts(128, min_tokens=16) == [16, 32, 64, 128]
    assert profiling.token_counts(10) == [10]


def test_live_tensor_bytes_counts_new_storages_once_and_frees_them():
    x = torch.ones(256, 256)  # made before counting: not counted, nor are its views
    with profiling.LiveTensorBytes() as counter:
        view = x.view(-1)
        assert counter.current == 0
        y = x * 2  # a new (256, 256) float32 storage
        assert counter.current == 256 * 256 * 4
        z = y.t()  # a view of it: no new bytes
        y.mul_(3)  # in place: no new bytes
        assert counter.current == 256 * 256 * 4
        del y
        assert counter.current == 256 * 256 * 4  # z still holds the storage
        del z
        assert counter.current == 0
        w = torch.empty(10, dtype=torch.float64)
    assert counter.peak == 256 * 256 * 4
    del view, w


def test_explicit_forward_holds_four_attention_matrices_at_its_peak_and_sdpa_none():
    b, h, d, t = 1, 4, 8, 256
    module = runs.build_module(runs.ModuleSpec(d_in=h * d, d_out=h * d, context_length=t, num_heads=h))
    x = torch.rand(b, t, h * d)
    formula = profiling.attention_matrix_bytes(b, h, t, "float32")
    calls = profiling.variant_calls(module, x)
    explicit = profiling.peak_bytes(calls["explicit"], x.device)
    traced = profiling.peak_bytes(calls["traced"], x.device)
    sdpa = profiling.peak_bytes(calls["sdpa"], x.device)
    # scores, masked scores, scaled scores and weights are alive together at the softmax
    assert 4 * formula <= explicit < 6 * formula
    assert traced >= explicit
    assert sdpa < formula  # the fused kernel never holds a (T, T) matrix


def test_measure_returns_every_variant_at_every_length_and_memory_grows_like_t_squared():
    seen = []
    report = profiling.measure(SMALL, progress=lambda done, text: seen.append((done, text)))
    assert report.tokens() == [32, 64, 128]
    assert not report.skipped
    assert {(p.variant, p.num_tokens) for p in report.points} == {
        (v, t) for v in profiling.VARIANTS for t in [32, 64, 128]
    }
    for point in report.points:
        assert point.seconds > 0 and point.peak_bytes > 0
        assert point.matrix_bytes == profiling.attention_matrix_bytes(2, 2, point.num_tokens, "float32")
    explicit = report.series("peak_bytes")["explicit"]
    assert explicit[2] > 3 * explicit[1] > 9 * explicit[0]  # ×4 per doubling, less the O(T) terms
    assert report.trace_bytes == dict.fromkeys(
        profiling.ATTENTION_STEPS, profiling.attention_matrix_bytes(2, 2, 128, "float32")
    )
    fractions = [done for done, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_measure_skips_lengths_beyond_the_time_budget():
    spec = profiling.CostSpec(num_heads=1, head_dim=2, max_tokens=1024, min_tokens=64, repeats=1, time_budget_s=0.0)
    report = profiling.measure(spec, variants=["sdpa"])
    assert report.tokens() == [64]  # the first length always runs
    assert report.skipped == [128, 256, 512, 1024]


def test_measure_rejects_unknown_variants():
    with pytest.raises(ValueError, match="unknown variants"):
        profiling.measure(SMALL, variants=["flash"])


def test_cost_view_builds_log_log_figures_and_rows():
    report = profiling.measure(SMALL, variants=["explicit", "sdpa"])
    memory = cost.memory_figure(report)
    assert memory.layout.xaxis.type == "log" and memory.layout.yaxis.type == "log"
    names = [trace.name for trace in memory.data]
    assert cost.FORMULA_SERIES in names and cost.SHORT_NAMES["explicit"] in names
    formula = next(t for t in memory.data if t.name == cost.FORMULA_SERIES)
    assert list(formula.y) == [profiling.attention_matrix_bytes(2, 2, t, "float32") / 2**20 for t in (32, 64, 128)]
    timing = cost.time_figure(report)
    assert timing.layout.xaxis.type == "log" and timing.layout.yaxis.type == "log"
    rows = cost.table_rows(report)
    assert [row["T"] for row in rows] == [32, 64, 128]
    assert all(row["equal"] for row in cost.trace_rows(report))


# --- the page -------------------------------------------------------------------------------------------------------


def page(**query: str) -> AppTest:
    return run_page(PAGE, timeout=180, **query)


def test_page_shows_the_formula_and_measures_nothing_until_asked():
    at = page(num_heads="2", d_out="8")
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "b · h · T² · bytes" in text
    assert not at.get(ELEMENT)
    assert any("Measure" in info.value for info in at.info)
    assert at.query_params["max_tokens"] == str(cost.DEFAULT_MAX_TOKENS)


def test_measure_button_draws_log_log_charts_and_the_table():
    at = page(num_heads="2", d_out="8", batch_size="1", max_tokens="128")
    at.button(key="cost_measure").click().run()
    assert not at.exception and not at.error
    charts = {key_of(c.proto): figure_of(c.proto) for c in at.get(ELEMENT)}
    assert set(charts) == {"chart_cost_memory", "chart_cost_time"}
    for spec in charts.values():
        assert spec["layout"]["xaxis"]["type"] == "log" and spec["layout"]["yaxis"]["type"] == "log"
    table = at.table[0].value  # HTML: its 9 columns all show at 1280 × 800 (a canvas scrolled them away)
    assert list(table["T"]) == [64, 128]
    assert "equal the formula" in "\n".join(m.value for m in at.markdown)
    places = chart_places(at)
    at.slider(key="w_batch_size").set_value(8).run(timeout=180)
    at.select_slider(key="cost_max_tokens").set_value(1024).run(timeout=180)
    assert any("nearest length that fits" in w.value for w in at.warning)  # over the budget, said above the figures
    assert chart_places(at) == places  # without moving them: each is updated in the browser, not drawn afresh


@pytest.mark.parametrize("raw", ["abc", "1e309", "-5", "99999999999999999999", "300", "<script>x</script>"])
def test_bad_max_tokens_in_the_url_is_explained_and_replaced(raw):
    at = page(max_tokens=raw)
    assert not at.exception
    assert any("max_tokens=" in w.value for w in at.warning)
    assert at.session_state.cost_max_tokens in profiling.TOKEN_STEPS


def test_over_budget_settings_are_measured_at_the_nearest_length_that_fits():
    at = page(num_heads="16", d_out="1024", d_in="1024", batch_size="8", max_tokens="1024")
    assert not at.exception
    # 4.3 × 8 · 16 · 256² cells × 4 B = 144 MiB, + 60 B × 1024² of weights + 12 MiB = 216 MiB is over the 200 MiB
    # budget; at 128 tokens, 108 MiB fits
    assert (
        budget.cost_bytes(8, 16, 64, 256, "float32") > budget.JOB_BYTES >= budget.cost_bytes(8, 16, 64, 128, "float32")
    )
    assert any("nearest length that fits" in w.value and "up to 128 tokens" in w.value for w in at.warning)
