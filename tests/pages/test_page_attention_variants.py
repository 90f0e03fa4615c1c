"""Issue 33: the Attention variants page through AppTest: its sections, its own URL values clamped with a notice,
and numbers that come from the modules (the table's measured caches equal the formula)."""

from __future__ import annotations

import pytest

from explorer.glue.cached import variant_runs
from explorer.views import attention_variants
from mha_core.variants.kv_memory import PRESETS

from ..apptest_helpers import charts, check_page, open_page

PAGE = "pages/9_Attention_variants.py"


def table_rows(at) -> list[dict]:
    frame = at.dataframe[0].value
    return frame.to_dict("records")


def test_the_heads_section_draws_groups_weights_and_k_v_and_a_table_from_the_modules():
    at = open_page(PAGE, {"num_heads": "4", "d_out": "16", "kv_groups": "2", "variant": "GQA"})
    check_page(at, [], "heads")
    assert attention_variants.intro_text() in [m.value for m in at.markdown]
    drawn = charts(at)
    assert {"variants_groups", "variants_weights", "variants_keys", "variants_values"} <= set(drawn)
    strip = drawn["variants_groups"]["data"][0]
    assert strip["z"] == [[0, 0, 1, 1]]  # 4 query heads, 2 K/V heads, in a row
    rows = {row["variant"].split()[0]: row for row in table_rows(at)}
    assert [rows[k]["K/V heads"] for k in ("MHA", "GQA", "MQA")] == [4, 2, 1]
    assert all(row["same"] for row in rows.values())
    assert rows["GQA"]["parameters"] < rows["MHA"]["parameters"]
    assert rows["MHA"]["measured"] == 2 * 2 * 6 * 16 * 4  # K,V × batch 2 × 6 tokens × d_out 16 × float32


def test_the_page_opens_on_a_shape_where_mha_gqa_and_mqa_differ():
    """At the book's 2 heads of head_dim 1, GQA was MQA ("2 query heads read 1 key/value head", the same 18
    parameters and 96 B), K and V one column, the cache's lines in pairs. Opened plainly, the page takes 8 query heads
    of head_dim 4 in 2 K/V groups, a 64-token context, the sidebar showing them, and says what to look at."""
    at = open_page(PAGE)
    check_page(at, [], "defaults")
    settings = at.session_state.settings
    assert (settings.num_heads, settings.head_dim, settings.context_length) == (8, 4, 64)
    assert at.session_state.w_num_heads == 8 and at.session_state.var_kv_groups == 2  # the sidebar shows them
    assert at.query_params["num_heads"] == "8" and at.query_params["d_out"] == "32"
    rows = {row["variant"].split()[0]: row for row in table_rows(at)}
    assert [rows[k]["K/V heads"] for k in ("MHA", "GQA", "MQA")] == [8, 2, 1]
    assert len({rows[k]["parameters"] for k in ("MHA", "GQA", "MQA")}) == 3
    assert len({rows[k]["measured"] for k in ("MHA", "GQA", "MQA", "MLA")}) == 4  # four different caches
    assert charts(at)["variants_groups"]["data"][0]["z"] == [[0, 0, 0, 0, 1, 1, 1, 1]]
    look = next(m.value for m in at.markdown if m.value.startswith("**What to look at:**"))
    assert "read 8 key/value heads under MHA, 2 under GQA and 1 under MQA" in look and "here GQA is MQA" not in look
    bytes_page = open_page(PAGE, {"section": "bytes"})
    check_page(bytes_page, [], "bytes")
    lines = {t["name"]: t["y"] for t in charts(bytes_page)["variants_bytes"]["data"] if "measured" not in t["name"]}
    assert len({round(ys[-1]) for ys in lines.values()}) == 5, lines  # at 64 tokens, five lines apart
    assert any("**What to look at:**" in m.value and "4× lower" in m.value for m in bytes_page.markdown)


def test_a_link_that_names_the_shape_keeps_it_and_the_book_shape_says_gqa_is_mqa():
    at = open_page(PAGE, {"num_heads": "2", "d_out": "2"})
    check_page(at, [], "the book's shape, named")
    assert (at.session_state.settings.num_heads, at.session_state.settings.d_out) == (2, 2)
    look = next(m.value for m in at.markdown if m.value.startswith("**What to look at:**"))
    assert "here GQA is MQA" in look


def test_mla_shows_its_latent():
    at = open_page(PAGE, {"variant": "MLA", "latent": "3"})
    check_page(at, [], "mla")
    assert "variants_latent" in charts(at)


@pytest.mark.parametrize(
    ("query", "notice"),
    [
        ({"num_heads": "4", "d_out": "16", "kv_groups": "3"}, "kv_groups=3 does not divide num_heads=4; using 2."),
        ({"latent": "0"}, "latent=`0` is outside 1–512; using 1."),
        ({"window": "99999"}, "window=`99999` is outside 1–64; using 64."),  # the page's own context, 64
        ({"window": "<script>"}, "is not a whole number"),
        ({"section": "decode", "new_tokens": "1e9"}, "new_tokens=`1e9` is not a whole number"),
        ({"variant": "XQA"}, "is not one of"),
        ({"section": "bytes", "config": "GPT-5"}, "is not one of"),
    ],
)
def test_hostile_page_values_are_clamped_with_a_notice(query, notice):
    at = open_page(PAGE, query)
    check_page(at, list(query.values()), str(query))
    assert any(notice in w.value for w in at.warning), [w.value for w in at.warning]


@pytest.mark.parametrize("choice", variant_runs.CONFIG_CHOICES)
def test_the_bytes_section_cites_each_config_and_draws_log_axes(choice):
    at = open_page(PAGE, {"section": "bytes", "config": choice})
    check_page(at, [], choice)
    figure = charts(at)["variants_bytes"]
    assert figure["layout"]["xaxis"]["type"] == "log" and figure["layout"]["yaxis"]["type"] == "log"
    names = [trace["name"] for trace in figure["data"]]
    assert all(any(name.startswith(kind) for name in names) for kind in ("MHA", "GQA", "MQA", "MLA", "SWA"))
    text = " ".join(m.value for m in at.markdown)
    if choice != variant_runs.CONFIG_CHOICES[0]:
        assert f"Source: {PRESETS[choice].source[:60]}" in text


@pytest.mark.parametrize("source", ["gpt", "variant"])
def test_the_decode_section_stacks_calls_and_shows_the_bottom_right_mask(source):
    at = open_page(PAGE, {"section": "decode", "source": source, "variant": "SWA", "window": "2", "new_tokens": "8"})
    check_page(at, [], source)
    drawn = charts(at)
    assert {"decode_stacked", "decode_rows", "decode_mask", "decode_growth", "decode_bytes", "decode_time"} <= set(
        drawn
    )
    summary = " ".join(m.value for m in at.markdown)
    assert "with the cache" in summary and "uncached forward's within" in summary
    growth = drawn["decode_growth"]["data"][0]["y"]
    tokens = [int(v) for v in growth]
    if source == "gpt":
        assert tokens == list(range(tokens[0], tokens[0] + 9))  # the prompt, then one token per call, 8 calls
    else:  # the book's six tokens, one at a time, into a window of 2: the cache holds 2, not 6 (issue 44)
        assert tokens == [min(n, 2) for n in range(1, 7)]
        assert "**2 tokens in" in summary and "(of 6 fed" in summary
