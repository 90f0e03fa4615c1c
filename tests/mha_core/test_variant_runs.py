"""Issue 33: the page's runs. Stacked decoding rows rebuild the uncached weights; what was not cached weighs 0."""

from __future__ import annotations

import pytest
import torch

from mha_core.gpt.training import load_shipped
from mha_core.variants.page_runs import KINDS, VariantSpec, build_variant, run_decoding, run_gpt_decoding, run_variants

SPEC = VariantSpec(d_in=3, d_out=8, num_heads=4, context_length=9, num_kv_groups=2, latent_dim=5, window=3)


@pytest.mark.parametrize("kind", KINDS)
def test_stacked_decoding_rows_are_the_uncached_weights(kind):
    x = torch.rand(2, 9, 3)
    run = run_decoding(build_variant(SPEC, kind), x, list("abcdefghi"), 3, kind)
    computed = torch.isfinite(run.weights)
    assert (run.weights[computed] - run.full_weights[computed]).abs().max() <= 1e-6
    assert torch.equal(run.full_weights[~computed], torch.zeros(int((~computed).sum())))  # never needed
    assert run.seen == (3, 4, 5, 6, 7, 8, 9)
    # the tokens held, counted on the cache: a window of 3 keeps 3 (issue 44: it used to report the positions)
    assert run.cached == tuple(min(n, SPEC.window) if kind == "SWA" else n for n in run.seen)
    if kind in ("MHA", "SWA"):  # K and V of every head: the bytes say the same as the count
        assert run.cache_bytes == tuple(n * 2 * 2 * SPEC.d_out * 4 for n in run.cached)
    row = 0
    for mask in run.masks:  # every key a call masked is grey (−∞), like the keys it did not have: never a 0
        t, s = mask.shape
        assert torch.isinf(run.weights[:, row : row + t, row + t - s : row + t][:, ~mask]).all()
        row += t
    assert len(run.seconds_cached) == len(run.seconds_uncached) == len(run.masks) == 7
    assert tuple(run.masks[0].shape) == (3, 3)
    # a window of 3 keeps 3 keys: each later call reads them and its own, the oldest masked; the others read all
    assert tuple(run.masks[-1].shape) == ((1, 4) if kind == "SWA" else (1, 9))


def test_run_variants_measures_what_the_formula_says_and_counts_parameters():
    x = torch.rand(2, 7, 3)
    run = run_variants(SPEC, x, list("abcdefg"))
    config = SPEC.cache_config()
    for kind, result in run.results.items():
        assert result.measured[-1][0] == 7
        for tokens, measured in result.measured:
            assert measured == config.bytes_of(kind, tokens, batch=2), (kind, tokens)
        assert result.parameters == sum(p.numel() for p in build_variant(SPEC, kind).parameters())
    params = {k: r.parameters for k, r in run.results.items()}
    assert params["MQA"] < params["GQA"] < params["MHA"] == params["SWA"]
    assert torch.equal(run.results["MHA"].trace.output, build_variant(SPEC, "MHA")(x))


def test_build_variant_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="kind 'XQA' is not one of MHA, GQA, MQA, MLA, SWA"):
        build_variant(SPEC, "XQA")


def test_gpt_decoding_on_the_shipped_model_matches_its_trace_and_leaves_it_untouched():
    model, tokenizer = load_shipped()
    prompt = tokenizer.encode("def f(x):")
    run = run_gpt_decoding(model, prompt, 6, layer=1, labels_of=lambda ids: [tokenizer.decode([i]) for i in ids])
    computed = torch.isfinite(run.weights)
    assert (run.weights[computed] - run.full_weights[computed]).abs().max() <= 1e-5
    assert run.cached == run.seen == tuple(range(len(prompt), len(prompt) + 7))
    layers = model.cfg["n_layers"]
    assert run.cache_bytes[-1] == run.cached[-1] * 2 * layers * model.cfg["emb_dim"] * 4  # K,V × layers × E × 4 B
    assert model.trf_blocks[1].att.cache_k is None
    with pytest.raises(ValueError, match=f"layer {layers} does not exist: this model has layers 0..{layers - 1}"):
        run_gpt_decoding(model, prompt, 1, layer=layers, labels_of=list)
