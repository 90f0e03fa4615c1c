"""mha_core.gpt.attribution and writing with heads knocked out (issue 46, items 2 and 3).

The attribution's parts must add up to the logit; one head's part is recomputed by hand from its attention weights,
values and columns of out_proj (a loop, not the library's einsum); writing with heads out is the knocked-out forward
pass's argmax, step by step.
"""

from __future__ import annotations

import pytest
import torch

from mha_core.gpt import attribution, generation, knockout, model_heads
from mha_core.gpt.model import GPTModel

from ..tiny_gpt import tiny_tokenizer

CFG = {"vocab_size": 40, "context_length": 24, "emb_dim": 16, "n_heads": 4, "n_layers": 2, "drop_rate": 0.0,
       "qkv_bias": True}  # fmt: skip
IDS = [3, 7, 1, 9, 4, 12, 3, 7, 1, 9, 4, 12, 3, 7]


@pytest.fixture
def model():
    torch.manual_seed(5)
    gpt = GPTModel(CFG).eval()
    with torch.no_grad():  # LayerNorm scales and shifts away from 1 and 0, so both are in the sum
        for module in gpt.modules():
            if hasattr(module, "scale"):
                module.scale.uniform_(0.5, 1.5)
                module.shift.uniform_(-0.3, 0.3)
    return gpt


@pytest.mark.parametrize(("heads", "mode"), [((), "zero"), (((1, 2), (0, 1)), "zero"), (((1, 0),), "mean")])
def test_the_parts_add_up_to_the_logit_within_1e_4(model, heads, mode):
    ids = torch.tensor([IDS])
    logits = knockout.forward_knocked_out(model, ids, heads, mode).logits[0] if heads else model(ids)[0]  # (T, V)
    targets = IDS[1:] + [0]
    parts = attribution.residual_parts(model, IDS, heads, mode)
    dla = attribution.direct_logit_attribution(model, parts, targets)
    expected = logits[torch.arange(len(IDS)), torch.tensor(targets)]
    assert torch.allclose(dla.total(), expected, atol=1e-4), (dla.total() - expected).abs().max()
    assert torch.allclose(dla.logit, expected, atol=1e-5)
    assert set(dla.other) >= {"embeddings", "L0 MLP", "L1 MLP", "L0 attention bias", "final LayerNorm shift"}
    for layer, head in heads:
        if mode == "zero":
            assert torch.equal(dla.heads[layer, head], torch.zeros(len(IDS)))


def test_one_heads_attribution_by_hand(model):
    """Head 2 of layer 1 at position 9, from its weights, its values and its columns of out_proj, in a loop."""
    layer, head, t = 1, 2, 9
    ids = torch.tensor([IDS])
    x = model.residual_inputs(ids)[layer]  # (1, T, E) entering block 1
    block = model.trf_blocks[layer]
    att, d = block.att, block.att.head_dim
    xn = block.norm1(x)[0]  # (T, E)
    q = att.W_query(xn)[:, head * d : (head + 1) * d]  # (T, d)
    k = att.W_key(xn)[:, head * d : (head + 1) * d]
    v = att.W_value(xn)[:, head * d : (head + 1) * d]
    scores = torch.stack([q[t] @ k[j] for j in range(t + 1)]) / d**0.5  # (t + 1,) keys up to t
    w = torch.softmax(scores, dim=0)
    out = sum(w[j] * v[j] for j in range(t + 1)) @ att.out_proj.weight[:, head * d : (head + 1) * d].T  # (E,)
    stream = block(x)  # (1, T, E) the stream after the last block, what the final LayerNorm reads
    sigma = torch.sqrt(stream[0, t].var(unbiased=False) + model.final_norm.eps)
    target = IDS[t + 1]
    by_hand = model.out_head.weight[target] @ (model.final_norm.scale * (out - out.mean()) / sigma)
    dla = attribution.direct_logit_attribution(model, attribution.residual_parts(model, IDS), IDS[1:] + [0])
    assert torch.isclose(dla.heads[layer, head, t], by_hand, atol=1e-5), (dla.heads[layer, head, t], by_hand)


def test_writing_with_heads_out_is_the_knocked_out_argmax_each_step(model):
    heads = ((1, 0), (1, 3))
    prompt = torch.tensor([IDS[:8]])
    written = generation.generate(model, prompt, 6, CFG["context_length"], heads=heads, mode="mean")
    seq = prompt
    for _ in range(6):
        logits = knockout.forward_knocked_out(model, seq, heads, "mean").logits[0, -1]  # (V,)
        seq = torch.cat([seq, logits.argmax().view(1, 1)], dim=1)
    assert torch.equal(written, seq)
    intact = generation.generate(model, prompt, 6, CFG["context_length"])
    assert torch.equal(intact, generation.generate_text_simple(model, prompt, 6, CFG["context_length"]))
    with pytest.raises(ValueError, match="do not exist"):
        generation.generate(model, prompt, 1, CFG["context_length"], heads=((2, 0),))


def test_copy_start_prompt_and_the_copy_continuation():
    text = list(b"the cat sat. the cat sat.")
    assert attribution.copy_start(text) == 13  # "the cat sa" again at 13
    assert attribution.prompt_length(text) == 23
    assert bytes(attribution.copy_continuation(text[:16], 12)) == b" cat sat. th"  # then round again
    assert attribution.copy_continuation(list(b"abcd"), 3) == []  # nothing earlier matches the end
    assert attribution.prompt_length(list(b"abcdefgh")) == 4  # no repeat: half given


def test_a_character_reading_on_its_own_writes_after_the_given_start(model):
    tokenizer = tiny_tokenizer()
    ids = [i % CFG["vocab_size"] for i in IDS]
    own = model_heads.read_characters(model, tokenizer, ids, heads=((0, 1),), own=True)
    given = attribution.prompt_length(ids)
    assert own.given == given and own.ids[:given] == tuple(ids[:given])
    expected = generation.generate(model, torch.tensor([ids[:given]]), len(ids) - given, 24, heads=((0, 1),))
    assert own.ids == tuple(expected[0].tolist()) and own.true_ids == tuple(ids)
    total = own.head_dla.sum(axis=(0, 1)) + sum(own.other_dla.values())
    assert abs(total - own.logit).max() < 1e-4
    probs = torch.softmax(knockout.forward_knocked_out(model, expected, ((0, 1),)).logits[0], dim=-1)
    assert abs(own.right_prob - probs[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy()).max() < 1e-6
