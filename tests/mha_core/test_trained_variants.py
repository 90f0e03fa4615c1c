"""Issue 44, item 4: a trained GPT converted to GQA, MQA and sliding windows with no retraining.

The conversions that change nothing (a K/V group per head, a window as long as the context) give the original's
logits; mean-pooling is checked against slices taken by hand and against Listing 3.5 with the pooled rows repeated
per head; the cache's bytes are measured on the converted model's own tensors; the given model is never changed.
"""

from __future__ import annotations

import pytest
import torch

from mha_core.attention.modules import MultiHeadAttention
from mha_core.gpt import english_probe
from mha_core.gpt.evaluation import mean_loss
from mha_core.gpt.model import GPTModel
from mha_core.gpt.text_tokenizer import ByteTokenizer
from mha_core.gpt.training import load_shipped
from mha_core.variants import trained_variants as tv
from mha_core.variants.cached_generation import forward_cached, reset_kv_cache
from mha_core.variants.layers import GroupedQueryAttention, MultiHeadAttentionWithSWA, cache_bytes

# Bytes in, 128 tokens of context: the repeated-English probe's doubled sentences fit, as in the shipped model.
SMALL = {"vocab_size": 256, "context_length": 128, "emb_dim": 16, "n_heads": 4, "n_layers": 2, "drop_rate": 0.0}


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def small_model(qkv_bias: bool = False, **changes) -> GPTModel:
    return GPTModel(SMALL | {"qkv_bias": qkv_bias} | changes).eval()


def ids_for(model: GPTModel, batch: int = 2) -> torch.Tensor:
    return torch.randint(0, model.cfg["vocab_size"], (batch, model.cfg["context_length"]))  # (b, T)


def unchanged(model: GPTModel) -> tuple[GPTModel, GPTModel]:
    """The conversions that must be the model itself: a K/V group per head, and a window of the whole context."""
    heads, context = model.cfg["n_heads"], model.cfg["context_length"]
    return (
        tv.convert(model, tv.Conversion(kind="MHA", kv_heads=heads)),
        tv.convert(model, tv.Conversion(kind="SWA", kv_heads=heads, window=context)),
    )


@pytest.mark.parametrize("bias", [False, True])
def test_a_group_per_head_and_a_window_of_the_whole_context_are_the_original(bias):
    model = small_model(bias)
    ids = ids_for(model)
    grouped, windowed = unchanged(model)
    assert isinstance(grouped.trf_blocks[0].att, GroupedQueryAttention)  # converted, not the original module kept
    assert isinstance(windowed.trf_blocks[1].att, MultiHeadAttentionWithSWA)
    with torch.no_grad():
        expected = model(ids)  # (b, T, V)
        for converted in (grouped, windowed):
            assert torch.allclose(converted(ids), expected, rtol=0, atol=1e-6)
        # the oracle: a real conversion changes the logits
        fewer = tv.convert(model, tv.Conversion(kind="GQA", kv_heads=2))(ids)
        shorter = tv.convert(model, tv.Conversion(kind="SWA", kv_heads=4, window=8))(ids)
    assert (fewer - expected).abs().max() > 1e-3 and (shorter - expected).abs().max() > 1e-3


def test_the_shipped_gpt_converted_to_its_own_shape_gives_its_logits():
    model, tokenizer = load_shipped()
    ids = torch.tensor([tokenizer.encode(english_probe.doubled(english_probe.SENTENCES[0]))])  # (1, T)
    with torch.no_grad():
        expected = model(ids)
        for converted in unchanged(model):
            assert torch.allclose(converted(ids), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("bias", [False, True])
def test_each_groups_keys_and_values_are_the_mean_of_its_heads_rows(bias):
    model = small_model(bias, n_layers=1)
    att = model.trf_blocks[0].att
    d = att.head_dim  # 4 heads of 4: groups {0, 1} and {2, 3}
    new = tv.convert(model, tv.Conversion(kind="GQA", kv_heads=2)).trf_blocks[0].att
    for name in ("W_key", "W_value"):
        old, pooled = getattr(att, name), getattr(new, name)
        assert pooled.weight.shape == (2 * d, att.d_in)
        for group, (first, second) in enumerate(((0, 1), (2, 3))):
            rows = slice(group * d, (group + 1) * d)
            by_hand = (old.weight[first * d : (first + 1) * d] + old.weight[second * d : (second + 1) * d]) / 2
            assert torch.allclose(pooled.weight[rows], by_hand, rtol=0, atol=1e-7)
            if bias:
                by_hand = (old.bias[first * d : (first + 1) * d] + old.bias[second * d : (second + 1) * d]) / 2
                assert torch.allclose(pooled.bias[rows], by_hand, rtol=0, atol=1e-7)
    assert torch.equal(new.W_query.weight, att.W_query.weight) and torch.equal(new.out_proj.weight, att.out_proj.weight)


def test_gqa_reads_each_query_head_with_its_own_groups_mean():
    """Listing 3.5 whose K/V rows are each head's group mean (heads 0, 1 read the mean of 0 and 1) gives the
    converted attention's output: the pooled rows sit where ``GroupedQueryAttention`` repeats them."""
    model = small_model(True, n_layers=1)
    att = model.trf_blocks[0].att
    new = tv.convert(model, tv.Conversion(kind="GQA", kv_heads=2)).trf_blocks[0].att
    reference = MultiHeadAttention(att.d_in, att.d_out, att.context_length, 0.0, 4, qkv_bias=True).eval()
    reference.load_state_dict(att.state_dict())
    d = att.head_dim
    with torch.no_grad():
        for name in ("W_key", "W_value"):
            layer = getattr(reference, name)
            for head in range(4):
                group = [head - head % 2, head - head % 2 + 1]  # its group's two heads
                layer.weight[head * d : (head + 1) * d] = (
                    sum(getattr(att, name).weight[g * d : (g + 1) * d] for g in group) / 2
                )
                layer.bias[head * d : (head + 1) * d] = (
                    sum(getattr(att, name).bias[g * d : (g + 1) * d] for g in group) / 2
                )
        x = torch.randn(2, 10, att.d_in)
        assert torch.allclose(new(x), reference(x), rtol=0, atol=1e-6)
        assert (new(x) - att(x)).abs().max() > 1e-4  # and pooling changed it


@pytest.mark.parametrize(
    "conversion",
    [
        tv.Conversion(kind="MHA", kv_heads=4),
        tv.Conversion(kind="GQA", kv_heads=2),
        tv.Conversion(kind="MQA", kv_heads=1),
        tv.Conversion(kind="SWA", kv_heads=4, window=16),
    ],
    ids=lambda c: c.label,
)
def test_the_cache_bytes_are_what_the_converted_model_caches(conversion):
    """Measured on the converted model's tensors after one token and after the whole context (a window's cache
    stops at its window), against the formula the table prints."""
    model = small_model()
    converted = tv.convert(model, conversion)
    ids = ids_for(model, batch=1)
    reset_kv_cache(converted)
    forward_cached(converted, ids[:, :1])
    one = cache_bytes(converted)
    forward_cached(converted, ids[:, 1:])
    full = cache_bytes(converted)
    cfg = model.cfg
    assert (
        one == tv.cache_bytes_at(cfg, conversion, 1) == 2 * 2 * conversion.kv_heads * 4 * 4
    )  # K,V × layers × g·d × 4 B
    assert full == tv.cache_bytes_at(cfg, conversion, cfg["context_length"])
    expected_tokens = min(cfg["context_length"], conversion.window or cfg["context_length"])
    assert full == one * expected_tokens


def test_converting_never_changes_the_given_model():
    model = small_model(True)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    for conversion in tv.conversions(model.cfg):
        converted = tv.convert(model, conversion)
        with torch.no_grad():
            for parameter in converted.parameters():
                parameter.add_(1.0)  # even a change to the copy does not reach the original
    after = model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert all(type(block.att) is MultiHeadAttention for block in model.trf_blocks)


def test_score_measures_the_converted_model_with_the_records_routines():
    """MHA's scores are the original's, read by the same routines; a window shorter than every sentence hides the
    key an induction head reads (i − period + 1), so its induction score is exactly 0."""
    model, tokenizer = small_model(), ByteTokenizer()
    held = tv.heldout(tokenizer, model.cfg["context_length"], max_windows=4)
    assert held.windows.shape == (4, 129) and held.tokens_scored == 4 * 128
    chosen = (tv.Conversion(kind="MHA", kv_heads=4), tv.Conversion(kind="SWA", kv_heads=4, window=4))
    sentences = english_probe.SENTENCES[:6]
    result = tv.assemble(
        model, tokenizer, tuple(tv.score(model, tokenizer, c, held, sentences) for c in chosen), held, sentences
    )
    full, windowed = result.of("MHA"), result.of("SWA, window 4")
    probe = english_probe.score_repeats(model, tokenizer, sentences)
    assert full.heldout_loss == pytest.approx(mean_loss(model, held.windows), abs=1e-6)
    assert full.second_copy_loss == pytest.approx(probe.second_copy_loss, abs=1e-6)
    assert full.first_copy_loss == pytest.approx(probe.first_copy_loss, abs=1e-6)
    assert full.best_induction == pytest.approx(probe.best_induction, abs=1e-6) and full.best_induction > 0
    assert windowed.best_induction == 0.0
    assert windowed.cache_bytes_full == full.cache_bytes_full * 4 // 128
    assert (result.heldout_windows, result.sentences, result.head_dim) == (4, 6, 4)
    assert result.periods == tuple(len(sentence.encode()) + 1 for sentence in sentences)  # bytes, and the space


def test_the_page_set_and_the_checks():
    cfg = SMALL | {"n_heads": 12, "qkv_bias": False}
    labels = [c.label for c in tv.conversions(cfg)]
    assert labels == [
        "MHA", "GQA, 6 K/V heads", "GQA, 4 K/V heads", "GQA, 3 K/V heads", "GQA, 2 K/V heads", "MQA",
        "SWA, window 16", "SWA, window 32", "SWA, window 64",
    ]  # fmt: skip
    model = small_model()
    for conversion, words in [
        (tv.Conversion(kind="GQA", kv_heads=3), "n_heads=4 must be a multiple of kv_heads=3"),
        (tv.Conversion(kind="MQA", kv_heads=2), "MQA on this model has kv_heads=1, got 2"),
        (tv.Conversion(kind="SWA", kv_heads=4), "a window belongs to SWA alone"),
        (tv.Conversion(kind="MLA", kv_heads=4), "kind 'MLA' is not one of"),
    ]:
        with pytest.raises(ValueError, match=words):
            tv.convert(model, conversion)
