"""Issue 33: the KV-cache byte formulas reproduce the book's printed figures, and the modules' measured caches.

The printed figures are the outputs shown in rasbt/LLMs-from-scratch ch04/04_gqa, 05_mla and 06_swa README.md
(GB = 1000³ bytes, two decimals, as its ``convert_bytes`` prints them). In those estimators ``n_kv_groups`` is the
number of query heads per key/value head: 32 heads and n_kv_groups 4 give 8 key/value heads.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mha_core.attention.modules import MultiHeadAttention
from mha_core.variants.kv_memory import (
    PRESETS,
    VARIANTS,
    CacheConfig,
    book_head_dim,
    context_lengths,
    kv_bytes,
    latent_bytes,
    swa_bytes,
    swa_layer_split,
)
from mha_core.variants.layers import (
    GroupedQueryAttention,
    MultiHeadAttentionWithSWA,
    MultiHeadLatentAttention,
    cache_bytes,
)


def gb(n: int) -> str:
    return f"{n / 1000**3:,.2f} GB"


def test_the_gqa_estimators_printed_figures():
    """emb_dim 4096, 32 heads, 32 layers, context 32768, n_kv_groups 4, bf16: MHA 17.18 GB, GQA 4.29 GB."""
    head_dim = book_head_dim(4096, 32)
    common = {"batch": 1, "tokens": 32768, "layers": 32, "head_dim": head_dim, "bytes_per_elem": 2}
    mha = kv_bytes(n_kv_heads=32, **common)
    gqa = kv_bytes(n_kv_heads=32 // 4, **common)
    assert (head_dim, gb(mha), gb(gqa)) == (128, "17.18 GB", "4.29 GB")
    assert f"{mha / gqa:,.2f}x" == "4.00x" and f"{(1 - gqa / mha) * 100:,.2f}%" == "75.00%"


def test_the_mla_estimators_printed_figures():
    """context 8192, emb_dim 2048, 24 heads (head_dim 86, rounded up), 48 layers, n_kv_groups 4, latent 1024, bf16."""
    head_dim = book_head_dim(2048, 24)
    common = {"batch": 1, "tokens": 8192, "layers": 48, "head_dim": head_dim, "bytes_per_elem": 2}
    mha = kv_bytes(n_kv_heads=24, **common)
    gqa = kv_bytes(n_kv_heads=24 // 4, **common)
    mla = latent_bytes(batch=1, tokens=8192, layers=48, latent_dim=1024, bytes_per_elem=2)
    assert (head_dim, gb(mha), gb(gqa), gb(mla)) == (86, "3.25 GB", "0.81 GB", "0.81 GB")
    assert f"{mha / mla:,.2f}x" == "4.03x" and f"{(1 - mla / mha) * 100:,.2f}%" == "75.19%"


def test_the_swa_estimators_printed_figures():
    """The GQA config with window 1024 on 5 of every 6 layers: 27 SWA and 5 full layers, 3.14 GB and 0.78 GB."""
    assert swa_layer_split(32, 5, 1) == (27, 5)
    common = {"batch": 1, "tokens": 32768, "n_layers": 32, "head_dim": 128, "bytes_per_elem": 2, "window": 1024}
    mha = swa_bytes(n_kv_heads=32, pattern=(1, 0), **{**common, "window": 32768})
    mha_swa = swa_bytes(n_kv_heads=32, pattern=(5, 1), **common)
    gqa_swa = swa_bytes(n_kv_heads=8, pattern=(5, 1), **common)
    assert (gb(mha), gb(mha_swa), gb(gqa_swa)) == ("17.18 GB", "3.14 GB", "0.78 GB")


def test_layer_split_counts_every_layer_and_refuses_an_empty_pattern():
    for n_layers in range(1, 40):
        for pattern in [(1, 0), (0, 1), (5, 1), (1, 1), (2, 3)]:
            swa, full = swa_layer_split(n_layers, *pattern)
            assert swa + full == n_layers
    assert swa_layer_split(62, 5, 1) == (52, 10)  # Gemma 3 27B
    with pytest.raises(ValueError, match="got 0:0"):
        swa_layer_split(4, 0, 0)


def test_presets_order_the_variants_as_their_ideas_say():
    for preset in PRESETS.values():
        at = {v: preset.bytes_of(v, preset.context_length) for v in VARIANTS}
        assert at["MQA"] < at["GQA"] < at["MHA"], preset.name
        assert at["SWA"] < at["MHA"] and at["MLA"] < at["MHA"], preset.name
        assert preset.source and str(preset.n_layers) in preset.source, preset.name
    llama = PRESETS["Llama 3 8B"]
    assert llama.bytes_of("GQA", 8192) == 8192 * 32 * 2 * 8 * 128 * 2  # 1 GiB at its full context
    deepseek = PRESETS["DeepSeek V3 (MLA)"]
    assert deepseek.bytes_of("MLA", 1) == 61 * 576 * 2  # 70,272 bytes per token
    with pytest.raises(ValueError, match="'XYZ' is not one of MHA, GQA, MQA, MLA, SWA"):
        llama.bytes_of("XYZ", 1)


def test_context_lengths_double_up_to_the_longest():
    assert context_lengths(1000) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000]
    assert context_lengths(64, shortest=16) == [16, 32, 64]
    assert context_lengths(1) == [1]


# --- measured on the modules' own tensors -------------------------------------------------------------------------


def config(**changes) -> CacheConfig:
    base = {
        "name": "here", "n_layers": 1, "n_heads": 4, "head_dim": 4, "n_kv_heads": 2, "latent_dim": 5, "window": 3,
        "context_length": 16, "dtype": "float32",
    }  # fmt: skip
    return CacheConfig(**(base | changes))


MODULES = {
    "MHA": lambda: MultiHeadAttention(8, 16, 16, 0.0, 4),
    "GQA": lambda: GroupedQueryAttention(8, 16, 16, 0.0, 4, num_kv_groups=2),
    "MQA": lambda: GroupedQueryAttention(8, 16, 16, 0.0, 4, num_kv_groups=1),
    "MLA": lambda: MultiHeadLatentAttention(8, 16, 16, 0.0, 4, latent_dim=5),
    "SWA": lambda: MultiHeadAttentionWithSWA(8, 16, 16, 0.0, 4, sliding_window_size=3),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("tokens", [1, 2, 3, 7, 16])
def test_measured_cache_bytes_equal_the_formula(variant, tokens):
    module = MODULES[variant]().eval()
    with torch.no_grad():
        for _ in range(tokens):  # one token at a time, as decoding fills it
            module(torch.rand(2, 1, 8), use_cache=True)
    assert cache_bytes(module) == config().bytes_of(variant, tokens, batch=2)


# --- issue 44: every preset cited from its own config, and its what-ifs named -----------------------------------


def cited(preset: CacheConfig) -> dict:
    return dict(preset.cited)


def test_every_presets_numbers_are_its_cited_config_fields():
    for preset in PRESETS.values():
        fields = cited(preset)
        assert preset.config_file and preset.config_file in preset.source, preset.name
        assert all(f"{name} {value}" in preset.source for name, value in fields.items()), preset.name
        layers = fields.get("num_hidden_layers", fields.get("n_layer"))
        heads = fields.get("num_attention_heads", fields.get("n_head"))
        width = fields.get("hidden_size", fields.get("n_embd"))
        assert (preset.n_layers, preset.n_heads) == (layers, heads), preset.name
        assert preset.head_dim == fields.get("head_dim", fields.get("v_head_dim", (width or 0) // heads)), preset.name
        assert preset.context_length == fields.get("max_position_embeddings", fields.get("n_ctx")), preset.name
        assert preset.dtype == fields.get("torch_dtype", "float32"), preset.name
        kv_heads = fields.get("num_key_value_heads", heads)  # GPT-2: one K/V head per query head
        assert ("n_kv_heads" in preset.what_if) == (preset.n_kv_heads != kv_heads), preset.name
        has_latent = "kv_lora_rank" in fields
        assert ("latent_dim" in preset.what_if) != has_latent, preset.name
        if has_latent:
            assert preset.latent_dim == fields["kv_lora_rank"] + fields["qk_rope_head_dim"], preset.name
            assert preset.rope_dim == fields["qk_rope_head_dim"] and preset.own == "MLA", preset.name
        assert ("window" in preset.what_if) != ("sliding_window" in fields), preset.name
        if "sliding_window" in fields:
            assert preset.window == fields["sliding_window"] and preset.own == "SWA", preset.name
            every = fields.get("sliding_window_pattern")  # Gemma: a full layer after every 5 window layers
            assert preset.pattern == ((every - 1, 1) if every else (1, 0)), preset.name


def test_the_new_presets_cache_what_their_configs_say():
    llama2 = PRESETS["Llama 2 7B"]
    assert llama2.own == "MHA" and llama2.bytes_of("MHA", 1) == 512 * 1024  # 512 KiB per token
    mistral = PRESETS["Mistral 7B v0.1"]
    assert (mistral.own, mistral.kv_heads_of("SWA"), mistral.window, mistral.swa_layers()) == ("SWA", 8, 4096, (32, 0))
    assert mistral.bytes_of("SWA", 32768) == mistral.bytes_of("GQA", 4096)  # every layer keeps 4,096 tokens
    v2 = PRESETS["DeepSeek-V2"]
    assert v2.bytes_of("MLA", 1) == v2.n_layers * 576 * 2 and v2.latent_dim - v2.rope_dim == 512


def test_gemmas_window_sits_on_its_own_kv_heads_and_its_full_layers_keep_every_token():
    gemma = PRESETS["Gemma 3 27B (window)"]
    swa_layers, full_layers = gemma.swa_layers()
    assert (swa_layers, full_layers) == (52, 10)
    by_hand = (swa_layers * 1024 + full_layers * 131072) * 2 * 16 * 128 * 2
    assert gemma.bytes_of("SWA", 131072) == by_hand


def test_gemmas_source_names_the_fields_its_file_leaves_to_transformers_defaults():
    """gemma-3-27b's config.json has no sliding_window_pattern or max_position_embeddings: Gemma3TextConfig's."""
    gemma = PRESETS["Gemma 3 27B (window)"]
    assert "Gemma3TextConfig" in gemma.config_file
    assert "sliding_window_pattern and max_position_embeddings are not in the file" in gemma.source


def test_the_docs_cite_every_presets_config_fields():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "attention_variants.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in doc.splitlines() if line.startswith("| ")}
    for name, preset in PRESETS.items():
        row = rows[name]
        assert preset.config_file in row, name
        assert all(f"`{field}` {value}" in row for field, value in preset.cited), name
