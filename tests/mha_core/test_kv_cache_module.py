"""Issue 33: the KV cache on Listing 3.5's MultiHeadAttention, and cached generation on the shipped GPT.

The cached path and the uncached one are two matmul routes (a 1-row query against the cache, a T-row query against
everything), so they are compared within rounding: 1e-6 on a module, 1e-5 (absolute and relative) on the GPT's logits.
"""

from __future__ import annotations

import pytest
import torch

from mha_core.attention import masks
from mha_core.attention.modules import MultiHeadAttention, trace_forward
from mha_core.gpt.training import load_shipped
from mha_core.variants.cached_generation import (
    cached_tokens,
    decode_module,
    decode_steps,
    forward_cached,
    generate_text_simple,
    generate_text_simple_cached,
    private_copy,
    reset_kv_cache,
    uncached_seconds,
    with_attention,
)
from mha_core.variants.layers import GroupedQueryAttention, cache_bytes


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def shipped():
    return load_shipped()


def make(d_in=6, d_out=8, heads=2, context=12, bias=False):
    return MultiHeadAttention(d_in, d_out, context, 0.0, heads, qkv_bias=bias).eval()


@pytest.mark.parametrize("prompt_len", [1, 3, 7])
@pytest.mark.parametrize("bias", [False, True])
def test_cached_outputs_joined_equal_the_uncached_forward(prompt_len, bias):
    module = make(bias=bias)
    x = torch.rand(2, 9, 6)
    full = module(x)
    traces = decode_module(module, x, prompt_len)
    assert [t.output.shape[1] for t in traces] == [prompt_len] + [1] * (9 - prompt_len)
    joined = torch.cat([t.output for t in traces], dim=1)
    assert (joined - full).abs().max() <= 1e-6
    assert module.ptr_current_pos == 9 and module.cache_k.shape == (2, 2, 9, 4)


def test_the_trace_records_the_cache_read_and_write_and_the_bottom_right_mask():
    module = make()
    x = torch.rand(1, 5, 6)
    traces = decode_module(module, x, 3)
    last = traces[-1]
    names = list(last.steps)
    assert names.index("keys_heads") < names.index("cache_keys_before") < names.index("cache_keys")
    assert names.index("cache_values") < names.index("mask") < names.index("attn_scores")
    assert last.info["cache_keys_before"].shape == (1, 2, 4, 4)  # four tokens cached before the fifth
    assert last.info["cache_keys"].shape == (1, 2, 5, 4)
    assert last.info["attn_weights"].shape == (1, 2, 1, 5)  # one new query row over every cached key
    # the cache holds the uncached keys: W_key(x) split into heads (a 1-row matmul per step: within rounding)
    full = trace_forward(make_copy(module), x)
    assert (last.steps["cache_keys"] - full.steps["keys_heads"]).abs().max() <= 1e-6
    assert torch.equal(last.steps["cache_keys"][:, :, :3], traces[0].steps["keys_heads"])  # the prompt's, as written
    for trace, (t, s) in zip(traces, [(3, 3), (1, 4), (1, 5)], strict=True):
        assert torch.equal(trace.steps["mask"], masks.causal_bottom_right(t, s))
    assert torch.equal(traces[0].steps["mask"], masks.causal(3))


def make_copy(module):
    copy = make()
    copy.load_state_dict(module.state_dict())
    return copy.eval()


def test_bottom_right_mask_is_the_masks_page_rule():
    """Key j is visible to query i when j ≤ i + src_len − tgt_len (explorer's Masks page note)."""
    for tgt, src in [(1, 1), (1, 6), (3, 6), (6, 6)]:
        mask = masks.causal_bottom_right(tgt, src)
        expected = torch.tensor([[j <= i + src - tgt for j in range(src)] for i in range(tgt)])
        assert torch.equal(mask, expected)
    with pytest.raises(ValueError, match="got 4 queries and 3 keys"):
        masks.causal_bottom_right(4, 3)


def test_the_uncached_forward_leaves_the_cache_alone_and_reset_empties_it():
    module = make()
    x = torch.rand(1, 4, 6)
    module(x[:, :2], use_cache=True)
    kept = module.cache_k.clone()
    module(x)  # a plain forward: shared modules are run this way, and it must change nothing
    assert torch.equal(module.cache_k, kept) and module.ptr_current_pos == 2
    module.reset_cache()
    assert module.cache_k is None and module.cache_v is None and module.ptr_current_pos == 0
    assert cache_bytes(module) == 0
    assert "cache_k" not in module.state_dict()  # not saved with the weights, as the book's bonus code


def test_a_full_cache_raises_naming_the_numbers():
    module = make(context=4)
    module(torch.rand(1, 3, 6), use_cache=True)
    with pytest.raises(ValueError, match=r"cache holds 3 and input has 2 tokens.*context_length=4.*\(5\)"):
        module(torch.rand(1, 2, 6), use_cache=True)
    with pytest.raises(ValueError, match="input has 5 tokens, more than context_length=4"):
        module(torch.rand(1, 5, 6))


def test_the_cache_holds_what_the_formula_says():
    module = make(d_out=12, heads=3)
    module(torch.rand(2, 7, 6), use_cache=True)
    assert cache_bytes(module) == 2 * 2 * 7 * 12 * 4  # K and V × batch × tokens × d_out × float32


# --- the shipped GPT ---------------------------------------------------------------------------------------------


def test_cached_logits_equal_the_uncached_forward_at_every_step(shipped):
    model, tokenizer = shipped
    private = private_copy(model)
    prompt = torch.tensor([tokenizer.encode("The for statement")])
    steps = decode_steps(private, prompt, new_tokens=12, trace_layer=1)
    ids = list(prompt[0].tolist())
    for number, step in enumerate(steps):
        if number:
            ids.append(step.token_ids[0])
        reference = model(torch.tensor([ids]))[:, -len(step.token_ids) :]  # (1, T, V)
        # float32 logits of size ~13 carry ~1e-6 relative rounding: the bound scales with them (1.1e-5 seen on EPYC)
        torch.testing.assert_close(step.logits, reference, rtol=1e-5, atol=1e-5, msg=f"step {number}")
        assert step.cached == len(ids)
        assert step.trace.info["attn_weights"].shape[-2:] == (len(step.token_ids), len(ids))
    per_token = 2 * model.cfg["n_layers"] * model.cfg["emb_dim"] * 4  # K and V, every layer, float32
    assert [s.cache_bytes for s in steps] == [s.cached * per_token for s in steps]
    assert model.trf_blocks[0].att.cache_k is None  # the shared model was never filled


def test_cached_generation_gives_the_chapter_4_tokens(shipped):
    model, tokenizer = shipped
    prompt = torch.tensor([tokenizer.encode("for item in")])
    plain = generate_text_simple(model, prompt, 16, context_size=model.cfg["context_length"])
    cached = generate_text_simple_cached(private_copy(model), prompt, 16)
    assert torch.equal(plain, cached)


def test_forward_cached_refuses_to_pass_the_context_and_continues_positions(shipped):
    model = private_copy(shipped[0])
    context = model.cfg["context_length"]
    reset_kv_cache(model)
    forward_cached(model, torch.zeros(1, context - 1, dtype=torch.long))
    assert cached_tokens(model) == context - 1
    with pytest.raises(ValueError, match=f"cache holds {context - 1} tokens and 2 more would pass"):
        forward_cached(model, torch.zeros(1, 2, dtype=torch.long))


def test_uncached_seconds_times_one_call_per_new_token(shipped):
    ticks = iter(range(100))
    times = uncached_seconds(shipped[0], [1, 2, 3, 4, 5], prompt_len=2, clock=lambda: next(ticks))
    assert times == [1, 1, 1, 1]  # steps at 2, 3, 4 and 5 tokens: one clock pair each


def test_a_gpt_with_grouped_query_attention_decodes_like_its_uncached_forward():
    cfg = {"vocab_size": 40, "context_length": 16, "emb_dim": 16, "n_heads": 4, "n_layers": 2, "drop_rate": 0.0}
    cfg["qkv_bias"] = False
    model = with_attention(
        cfg, lambda c: GroupedQueryAttention(c["emb_dim"], c["emb_dim"], c["context_length"], 0.0, c["n_heads"], 2)
    )
    steps = decode_steps(private_copy(model), torch.tensor([[3, 1, 4]]), new_tokens=6)
    ids = [3, 1, 4] + [s.token_ids[0] for s in steps[1:]]
    full = model(torch.tensor([ids]))  # (1, 9, V)
    for number, step in enumerate(steps[1:], start=1):
        position = 2 + number
        torch.testing.assert_close(step.logits[:, -1], full[:, position], rtol=1e-5, atol=1e-5)
    assert (
        steps[-1].cache_bytes == 2 * 2 * 2 * 9 * 4 * 4
    )  # K,V × layers × 2 K/V heads × 9 tokens × head_dim 4 × float32
