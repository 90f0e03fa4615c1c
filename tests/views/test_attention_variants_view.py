"""Issue 33: the Attention variants views draw what the runs hold: groups, K/V widths, bytes, decoding calls."""

from __future__ import annotations

import pytest
import torch

from explorer.views import attention_variants as av
from explorer.views import attention_variants_decoding as dv
from explorer.views.figures import decode_array
from mha_core.variants.kv_memory import PRESETS, VARIANTS, context_lengths, swa_layer_split
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
    assert view.tokens_last == (SPEC.window if kind == "SWA" else 7) and view.seen_last == 7
    assert view.bytes_last == view.tokens_last * 2 * SPEC.d_out * 4  # K and V of every head, float32: the count holds
    assert ("of 7 fed" in summary) == (kind == "SWA")


@pytest.mark.parametrize("kind", ["MHA", "SWA"])
def test_the_decoding_growth_has_tokens_and_bytes_on_their_own_axes_and_grey_says_not_read(kind):
    torch.manual_seed(2)
    decoding = run_decoding(build_variant(SPEC, kind), torch.rand(1, 8, 3), [f"t{i}" for i in range(8)], 2, kind)
    panels = {p.key: p for p in dv.build_decoding_view(decoding, step=0, presenter=False).panels}
    growth, size = panels["decode_growth"], panels["decode_bytes"]
    assert [t.name for t in growth.figure.data] == ["tokens cached", "tokens fed"]
    assert list(growth.figure.data[0].y) == list(map(float, decoding.cached))
    assert [t.name for t in size.figure.data] == ["kB cached"]
    assert list(size.figure.data[0].y) == [b / 1000 for b in decoding.cache_bytes]
    assert growth.figure.layout.yaxis.title.text == "tokens" and size.figure.layout.yaxis.title.text == "kB"
    capped = max(decoding.cached) < decoding.seen[-1]
    assert capped == (kind == "SWA") and ("up to its window" in growth.title) == capped
    if capped:
        assert f"{SPEC.window} tokens held, while {decoding.seen[-1]} were fed" in growth.caption
    for key in ("decode_stacked", "decode_rows"):  # the prompt's call masks keys inside its cache: grey, named so
        names = [t.name or "" for t in panels[key].figure.data]
        assert not any("masked (−∞)" in n for n in names), key
        assert any(dv.NOT_READ in n for n in names), key


def test_the_intro_says_what_mla_and_the_windows_are_from_the_presets_configs():
    text = av.intro_text()
    v2, mistral, gemma = (dict(PRESETS[n].cited) for n in ("DeepSeek-V2", "Mistral 7B v0.1", "Gemma 3 27B (window)"))
    latent, rope = v2["kv_lora_rank"], v2["qk_rope_head_dim"]
    assert f"{latent}-wide latent and a {rope}-wide RoPE key" in text and f"= {latent + rope} numbers" in text
    assert "folds the up-projections W_UK and W_UV into the query and output projections" in text
    assert f"Mistral 7B v0.1 on every layer (window {mistral['sliding_window']:,})" in text
    every = gemma["sliding_window_pattern"]
    windowed, _ = swa_layer_split(gemma["num_hidden_layers"], every - 1, 1)
    assert f"Gemma 3 on {every - 1} of every {every} layers (window {gemma['sliding_window']:,}; {windowed} of" in text
    assert "(Gemma 3, Mistral)" not in text


def test_gemmas_swa_row_names_its_own_kv_heads_and_the_layers_that_keep_every_token(run):
    choice = "Gemma 3 27B (window)"
    gemma = PRESETS[choice]
    rows = {row["variant"].split()[0]: row for row in av.bytes_table(choice, run)}
    swa, full = swa_layer_split(gemma.n_layers, *gemma.pattern)
    kv_heads = dict(gemma.cited)["num_key_value_heads"]
    expected = f"2 × {kv_heads} × {gemma.head_dim}, last {gemma.window} tokens on {swa} layers, every token on {full}"
    assert rows["SWA"]["cached per token and layer"] == expected
    tokens = gemma.context_length
    by_hand = (swa * min(tokens, gemma.window) + full * tokens) * 2 * kv_heads * gemma.head_dim * 2
    assert rows["SWA"][f"bytes at {tokens:,} tokens"] == av.human_bytes(by_hand)
    assert rows["SWA"]["variant"].endswith("· its own") and rows["MQA"]["variant"].endswith("· what-if")
    deepseek = {row["variant"].split()[0]: row for row in av.bytes_table("DeepSeek-V2", run)}
    assert deepseek["MLA"]["cached per token and layer"] == "576 (latent 512 + shared RoPE key 64)"


@pytest.mark.parametrize("choice", [c for c in av.CONFIG_CHOICES if c != av.THIS_CONFIG])
def test_the_swa_sentence_matches_the_line_and_what_ifs_are_labelled(run, choice):
    config = PRESETS[choice]
    caption = av.bytes_figure(choice, run, presenter=False).caption
    _, full = swa_layer_split(config.n_layers, *config.pattern)
    far = [t for t in context_lengths(config.context_length) if t >= 2 * config.window][-2:]  # past the window
    growth = config.bytes_of("SWA", far[1]) / config.bytes_of("SWA", far[0])
    if full:  # the line keeps rising with the tokens
        assert "bends" in caption and f"its {full} full layers of {config.n_layers} keep every token" in caption
        assert growth > 1.2
    else:  # flat
        assert "SWA flattens once the window" in caption and growth == 1.0
    text = av.preset_text(choice, run)
    labels = {"n_kv_heads": f"{config.n_kv_heads} K/V heads", "latent_dim": f"latent {config.latent_dim}"}
    pattern = f" on {config.pattern[0]} of every {sum(config.pattern)} layers" if full else ""
    labels["window"] = f"window {config.window}{pattern}"
    for field, label in labels.items():
        assert (f"{label} (what-if)" in text) == (field in config.what_if), (choice, field)
        assert label in text, (choice, field)


@pytest.mark.parametrize("choice", av.CONFIG_CHOICES)
def test_the_bytes_axis_reads_in_decimal_units_not_powers_of_ten(run, choice):
    axis = av.bytes_figure(choice, run, presenter=False).figure.layout.yaxis
    assert axis.ticktext and not any("e+" in t or "e-" in t for t in axis.ticktext)
    for value, text in zip(axis.tickvals, axis.ticktext, strict=True):
        number, unit = text.split()
        assert float(number) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[unit] == pytest.approx(value)
