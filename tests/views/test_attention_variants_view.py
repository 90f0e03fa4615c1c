"""Issue 33: the Attention variants views draw what the runs hold: groups, K/V widths, bytes, decoding calls."""

from __future__ import annotations

import pytest
import torch

from explorer.views import attention_variants as av
from explorer.views import attention_variants_decoding as dv
from explorer.views.figures import decode_array
from mha_core.variants.kv_memory import PRESETS, VARIANTS
from mha_core.variants.page_runs import VariantSpec, build_variant, run_decoding, run_variants

SPEC = VariantSpec(d_in=3, d_out=12, num_heads=6, context_length=10, num_kv_groups=2, latent_dim=4, window=3)


@pytest.fixture(scope="module")
def run():
    torch.manual_seed(0)
    return run_variants(SPEC, torch.rand(2, 8, 3), [f"t{i}" for i in range(8)])


def test_heads_are_grouped_in_a_row_and_k_has_one_band_per_kv_head(run):
    assert [av.group_of(run, "GQA", k) for k in range(6)] == [0, 0, 0, 1, 1, 1]
    assert [av.group_of(run, "MQA", k) for k in range(6)] == [0] * 6
    assert [av.group_of(run, "MHA", k) for k in range(6)] == list(range(6))
    panels = {p.key: p for p in av.heads_panels(run, "GQA", 1, presenter=False)}
    assert decode_array(panels["variants_groups"].figure.data[0].z).tolist() == [[0, 0, 0, 1, 1, 1]]
    assert "(2, 8, 4)" in panels["variants_keys"].caption  # (b, T, g·head_dim): 2 K/V heads of 2
    names = [trace.name for trace in panels["variants_weights"].figure.data if trace.type == "heatmap"]
    assert "head 4 · K/V 1" in names
    keys = decode_array(panels["variants_keys"].figure.data[0].z)
    assert keys.shape == (8, 4)  # T rows, g·d columns
    assert abs(keys - run.results["GQA"].trace.numpy("keys")[1]).max() <= 1e-4  # batch element 1, as drawn


def test_the_table_holds_every_variant_with_measured_equal_to_formula(run):
    rows = av.variants_table(run)
    assert [row["variant"].split()[0] for row in rows] == list(VARIANTS)
    assert all(row["same"] for row in rows)
    by_kind = {row["variant"].split()[0]: row for row in rows}
    assert by_kind["MLA"]["measured"] == 2 * 8 * 4 * 4  # batch × T × latent × float32
    assert by_kind["SWA"]["measured"] == 2 * 2 * 3 * 12 * 4  # K,V × batch × window × d_out × float32


@pytest.mark.parametrize("choice", av.CONFIG_CHOICES)
def test_the_bytes_figure_has_five_formula_lines_on_log_axes(run, choice):
    panel = av.bytes_figure(choice, run, presenter=False)
    figure = panel.figure
    assert figure.layout.xaxis.type == "log" and figure.layout.yaxis.type == "log"
    formula = [t for t in figure.data if "measured" not in t.name]
    assert len(formula) == 5
    measured = [t for t in figure.data if "measured" in t.name]
    assert len(measured) == (5 if choice == av.THIS_CONFIG else 0)
    if choice != av.THIS_CONFIG:
        assert any(t.name.endswith("(its own)") for t in formula)
        assert PRESETS[choice].source in av.preset_text(choice, run)
    rows = av.bytes_table(choice, run)
    assert rows[0]["of MHA's"] == "100.0%"


def test_human_bytes_uses_the_books_decimal_units():
    assert av.human_bytes(17_179_869_184) == "17.18 GB"
    assert av.human_bytes(999) == "999 B"


@pytest.mark.parametrize("kind", ["MHA", "SWA"])
def test_the_decoding_view_shows_each_calls_rows_and_its_bottom_right_mask(kind):
    torch.manual_seed(1)
    x = torch.rand(1, 7, 3)
    decoding = run_decoding(build_variant(SPEC, kind), x, [f"t{i}" for i in range(7)], 2, kind)
    view = dv.build_decoding_view(decoding, step=3, presenter=False)
    assert view.calls == 6 and view.step == 3 and view.agreement <= 1e-6
    panels = {p.key: p for p in view.panels}
    expected_keys = 5 if kind == "MHA" else 4  # call 3 is query t4; a window of 3 keeps 3 keys, read with the new one
    assert f"shape (t, s) = (1, {expected_keys})" in panels["decode_mask"].caption
    assert decode_array(panels["decode_mask"].figure.data[0].z).shape == (1, expected_keys)
    assert dv.build_decoding_view(decoding, step=99, presenter=False).step == 5  # clamped to the last call
    summary = dv.decoding_summary(view)
    assert f"{view.tokens_last} tokens in {view.bytes_last:,} bytes" in summary
