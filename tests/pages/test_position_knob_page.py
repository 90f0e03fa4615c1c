"""Issue 44, item 3: the Explorer's Positions section and the position knob in the sidebar and the URL.

Each kind draws its charts with no error; every number a sentence says is recomputed here from the module; "none"
(and any kind) leaves the Explorer's own output as it was; hostile ``?positions=`` and ``?rope_base=`` values are
corrected with a notice, through the one strict parser.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from explorer.glue.state.settings import parse_query
from mha_core.attention.positions import alibi_slopes
from mha_core.runs import forward as runs
from mha_core.runs.token_order import run_positions, shuffled_order

from ..apptest_helpers import charts, open_page, printed, texts

APP = "app.py"
WIDE = {"num_heads": "4", "d_out": "64"}  # head_dim 16: room for RoPE's pairs
EXPECTED = {
    "none": {"positions_logits_without", "positions_weights_without"},
    "learned": {"positions_logits_without", "positions_logits_with", "positions_weights_without",
                "positions_weights_with"},
    "rope": {"positions_queries_plain", "positions_queries_rotated", "positions_keys_plain", "positions_keys_rotated",
             "rope_distance", "rope_rotation"},
    "alibi": {"positions_alibi_bias"},
}  # fmt: skip
EXPECTED["sinusoidal"] = EXPECTED["learned"]
EXPECTED["rope"] |= EXPECTED["learned"]
EXPECTED["alibi"] |= EXPECTED["learned"]


def open_positions(kind: str, **more: str):
    return open_page(APP, {"section": "positions", "positions": kind, **WIDE, **more})


def recomputed(kind: str, shuffle: int):
    """The run the page's sentences describe, made here from the module the settings build."""
    settings, _ = parse_query({"positions": kind, **WIDE})
    module = runs.build_module(settings.module_spec())
    x, labels = runs.build_input(settings.input_spec())
    return run_positions(module, x, labels, kind=kind, rope_base=10_000, seed=settings.seed, shuffle=shuffle)


def gap(before: np.ndarray, after: np.ndarray, order: list[int]) -> float:
    """The largest weight change once the shuffled weights are put back, written out with explicit indices."""
    h, t, _ = before.shape
    return max(
        abs(after[k, order.index(i), order.index(j)] - before[k, i, j])
        for k in range(h)
        for i in range(t)
        for j in range(t)
    )


@pytest.mark.parametrize("kind", ["none", "learned", "sinusoidal", "rope", "alibi"])
def test_each_kind_draws_its_charts_without_an_error(kind):
    at = open_positions(kind)
    assert not at.exception and not at.error, (at.exception, at.error)
    assert set(charts(at)) == EXPECTED[kind]
    at.button(key="shuffle_tokens").click().run()
    assert not at.exception and not at.error
    assert at.query_params["shuffle"] == "1"
    assert set(charts(at)) == EXPECTED[kind]


@pytest.mark.parametrize("kind", ["none", "rope", "alibi", "learned"])
def test_the_shuffle_sentence_says_the_recomputed_numbers(kind):
    at = open_positions(kind, shuffle="3")
    run = recomputed(kind, 3)
    assert run.order == shuffled_order(6, 3)
    sentence = next(m.value for m in at.markdown if m.value.startswith("Shuffled:"))
    assert " ".join(run.labels[i] for i in run.order) in sentence
    without = gap(run.without["weights"], run.shuffled_without["weights"], run.order)
    assert f"by at most {without:.1e}." in sentence
    assert without <= 1e-6  # merely permuted
    if kind == "none":
        assert "Choose a kind of positions" in sentence
    else:
        changed = gap(run.with_positions["weights"], run.shuffled_with["weights"], run.order)
        assert changed > 1e-3
        assert f"they changed: by up to {changed:.3g}." in sentence


def test_alibis_sentence_lists_the_papers_slopes_and_ropes_caption_its_pairs():
    shown = texts(open_positions("alibi"))
    assert "The heads' slopes: 0.25, 0.0625, 0.01562, 0.003906." in shown
    assert np.allclose(alibi_slopes(4).numpy(), [0.25, 0.0625, 0.015625, 0.00390625])
    rope = texts(open_positions("rope"))
    assert "(8 pairs here)" in rope
    assert f"pair 7 by {10_000 ** (-14 / 16):.3g}" in rope  # the slowest pair's turn per position


def test_no_kind_changes_the_explorers_own_output_or_its_link():
    default = open_page(APP)
    for kind in ("none", "rope", "alibi"):
        at = open_page(APP, {"positions": kind})
        assert printed(at) == printed(default), kind
        assert charts(at) == charts(default), kind
        assert "matches the book's printed output" in texts(at)
    assert "positions" not in default.query_params and "rope_base" not in default.query_params
    assert "shuffle" not in default.query_params


def test_rope_on_the_books_head_dim_of_one_says_why_and_still_teaches():
    at = open_page(APP, {"section": "positions", "positions": "rope"})
    assert not at.exception and not at.error
    assert "this module's head_dim is 1" in texts(at)
    assert set(charts(at)) == {"rope_distance", "rope_rotation"}


@pytest.mark.parametrize(
    ("query", "notice"),
    [
        ({"positions": "ROPE"}, "positions=`ROPE` is not one of none, learned, sinusoidal, rope, alibi; using none."),
        ({"positions": "%00"}, "positions=`%00` is not one of"),
        ({"positions": "\x00"}, "is not one of none, learned, sinusoidal, rope, alibi; using none."),
        ({"rope_base": "-1"}, "rope_base=`-1` is not one of 100, 1000, 10000, 100000, 1000000; using 10000."),
        ({"rope_base": "nan"}, "rope_base=`nan` is not one of"),
        ({"rope_base": "1e4"}, "rope_base=`1e4` is not one of"),
        ({"shuffle": "-3"}, "shuffle=`-3` is outside 0–999999; using 0."),
    ],
)
def test_hostile_knob_values_are_corrected_with_a_notice(query, notice):
    at = open_page(APP, {"section": "positions", **query})
    assert not at.exception and not at.error
    assert any(notice in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.session_state.settings.positions == "none"
    assert at.session_state.settings.rope_base == 10_000


def test_the_knob_is_in_the_explorers_sidebar_and_rope_base_only_with_rope():
    labels = {w.label for w in open_page(APP).sidebar.selectbox}
    assert "positions" in labels
    assert "rope_base" not in {w.label for w in open_page(APP).sidebar.select_slider}
    at = open_page(APP, {"positions": "rope", "rope_base": "1000000", **WIDE})
    assert [w.value for w in at.sidebar.select_slider if w.label == "rope_base"] == [1_000_000]
    at.sidebar.selectbox(key="w_positions").set_value("alibi").run()
    assert at.session_state.settings.positions == "alibi"
    assert at.query_params["positions"] == "alibi"
    heads = open_page("pages/2_Heads_and_references.py")
    assert "positions" not in {w.label for w in heads.sidebar.selectbox}


def test_a_kind_moved_in_the_sidebar_redraws_the_section():
    at = open_positions("none")
    at.sidebar.selectbox(key="w_positions").set_value("rope").run()
    assert set(charts(at)) == EXPECTED["rope"]
    base = re.escape("base 100,000")
    at.sidebar.select_slider(key="w_rope_base").set_value(100_000).run()
    assert any(re.search(base, str(figure)) for figure in charts(at).values())


@pytest.mark.parametrize("kind", ["rope", "alibi", "sinusoidal"])
def test_step_through_sets_the_scores_beside_the_same_scores_with_positions(kind):
    plain = open_page("pages/1_Step_through.py", {"step": "5", **WIDE})
    at = open_page("pages/1_Step_through.py", {"step": "5", "positions": kind, **WIDE})
    assert not at.exception and not at.error
    assert set(charts(at)) == set(charts(plain)) | {"positions_logits_without", "positions_logits_with"}
    assert "The same scores with positions" in texts(at)
    other = open_page("pages/1_Step_through.py", {"step": "6", "positions": kind, **WIDE})
    assert "positions_logits_with" not in charts(other)  # only on the scores step
    assert "The same scores with positions" not in texts(plain)
