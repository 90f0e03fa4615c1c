"""mha_core.gpt.knockout, composition, generation and the text head scores: each score against a hand computation.

Hand computations use plain loops or explicit matrices, a different route from the library's einsums, so equality
is within float rounding, never bitwise.
"""

from __future__ import annotations

import math

import pytest
import torch

from mha_core.gpt import composition, generation, head_scores, knockout
from mha_core.gpt.model import GPTModel

CFG = {"vocab_size": 40, "context_length": 24, "emb_dim": 16, "n_heads": 4, "n_layers": 2, "drop_rate": 0.0,
       "qkv_bias": False}  # fmt: skip


@pytest.fixture
def model():
    torch.manual_seed(3)
    gpt = GPTModel(CFG).eval()
    with torch.no_grad():  # LayerNorm scales away from 1, so folding them in is tested
        for module in gpt.modules():
            if hasattr(module, "scale"):
                module.scale.uniform_(0.5, 1.5)
    return gpt


def test_repeat_targets_on_a_sentence_typed_twice():
    ids = torch.tensor([5, 6, 7, 8, 9, 5, 6, 7, 8, 9])  # period 5, no stretch repeats inside one copy
    targets = head_scores.repeat_targets(ids, min_match=3)
    # the second copy's queries from its third token on (i = 7, 8, 9) read the key after the earlier copy's stretch
    assert targets.tolist() == [-1] * 7 + [3, 4, 5]
    assert head_scores.repeat_targets(ids, min_match=1).tolist() == [-1] * 5 + [1, 2, 3, 4, 5]


def test_repeat_targets_take_the_latest_earlier_match():
    ids = torch.tensor([1, 2, 3, 1, 2, 4, 1, 2])
    # query 7 (token 2 after 1): stretches "1 2" end at 1 and 4; the latest is 4, so the key is 5
    assert head_scores.repeat_targets(ids, min_match=2).tolist() == [-1, -1, -1, -1, 2, -1, -1, 5]


def test_induction_score_on_text_is_the_mean_weight_on_the_targets():
    weights = torch.rand(2, 3, 6, 6)  # (L, h, T, T)
    targets = torch.tensor([-1, -1, -1, 1, -1, 2])
    by_hand = (weights[..., 3, 1] + weights[..., 5, 2]) / 2
    torch.testing.assert_close(head_scores.induction_score_on_text(weights, targets), by_hand)
    assert torch.isnan(head_scores.induction_score_on_text(weights, torch.full((6,), -1))).all()


def test_even_spread_score_matches_the_mean_of_one_over_keys_seen():
    assert head_scores.even_spread_score(torch.tensor([1, 3])) == pytest.approx((1 / 2 + 1 / 4) / 2)
    assert math.isnan(head_scores.even_spread_score(torch.tensor([], dtype=torch.int64)))


def test_nothing_knocked_out_gives_the_model_s_logits(model):
    ids = torch.randint(0, CFG["vocab_size"], (2, 10))
    result = knockout.forward_knocked_out(model, ids)
    torch.testing.assert_close(result.logits, model(ids), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(result.weights, model.attention_weights(ids), atol=1e-6, rtol=1e-6)


def test_zero_ablation_equals_zeroing_out_proj_s_columns(model):
    """Knocking head (1, 2) out is the same as deleting that head's columns of out_proj: a second route."""
    ids = torch.randint(0, CFG["vocab_size"], (1, 12))
    knocked = knockout.forward_knocked_out(model, ids, [(1, 2)]).logits
    edited = GPTModel(CFG).eval()
    edited.load_state_dict(model.state_dict())
    d = CFG["emb_dim"] // CFG["n_heads"]
    with torch.no_grad():
        edited.trf_blocks[1].att.out_proj.weight[:, 2 * d : 3 * d] = 0.0
    torch.testing.assert_close(knocked, edited(ids), atol=1e-5, rtol=1e-5)
    assert (knocked - model(ids)).abs().max() > 1e-3  # and it changed something


def test_mean_ablation_writes_the_head_s_average(model):
    """Mean ablation of head (0, 1) equals out_proj's bias-free write of the head's mean context, added at every
    position: checked by giving out_proj a bias equal to that write and zeroing the head's columns."""
    ids = torch.randint(0, CFG["vocab_size"], (1, 9))
    d = CFG["emb_dim"] // CFG["n_heads"]
    from mha_core.attention.modules import trace_forward

    block = model.trf_blocks[0]
    context = trace_forward(block.att, block.norm1(model.embed(ids))).steps["context"]  # (1, T, h·d)
    mean = context[0, :, d : 2 * d].mean(dim=0)  # (d,)
    edited = GPTModel(CFG).eval()
    edited.load_state_dict(model.state_dict())
    with torch.no_grad():
        out = edited.trf_blocks[0].att.out_proj
        out.bias += out.weight[:, d : 2 * d] @ mean
        out.weight[:, d : 2 * d] = 0.0
    torch.testing.assert_close(
        knockout.forward_knocked_out(model, ids, [(0, 1)], mode="mean").logits, edited(ids), atol=1e-5, rtol=1e-5
    )


def test_knockout_rejects_heads_and_modes_that_do_not_exist(model):
    ids = torch.zeros(1, 3, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"\(2, 0\).*layers 0..1"):
        knockout.forward_knocked_out(model, ids, [(2, 0)])
    with pytest.raises(ValueError, match="mode"):
        knockout.forward_knocked_out(model, ids, [], mode="half")


def test_parse_heads():
    assert knockout.parse_heads("0.1, 1.3,") == [(0, 1), (1, 3)]
    assert knockout.parse_heads("") == []
    for bad in ("0", "a.b", "1.-2", "0.1.2", "99999.1"):
        with pytest.raises(ValueError, match="layer.head"):
            knockout.parse_heads(bad)


def _folded_by_hand(model, layer, head):
    """W_QK and W_OV of one head with norm1's γ folded in, from the module's weights by explicit slicing."""
    att, gamma = model.trf_blocks[layer].att, model.trf_blocks[layer].norm1.scale.detach()
    d = att.head_dim
    rows = slice(head * d, (head + 1) * d)
    w_q, w_k, w_v = (lin.weight.detach()[rows] * gamma for lin in (att.W_query, att.W_key, att.W_value))  # (d, e)
    w_o = att.out_proj.weight.detach()[:, rows]  # (e, d)
    return w_q.T @ w_k, w_o @ w_v


def test_composition_scores_match_a_hand_computation(model):
    comp = composition.composition(model)
    fro = torch.linalg.matrix_norm
    for h1 in range(CFG["n_heads"]):
        qk1, ov1 = _folded_by_hand(model, 1, h1)
        for h0 in range(CFG["n_heads"]):
            _, ov0 = _folded_by_hand(model, 0, h0)
            expected = {
                "Q": fro(ov0.T @ qk1) / (fro(qk1) * fro(ov0)),
                "K": fro(qk1 @ ov0) / (fro(qk1) * fro(ov0)),
                "V": fro(ov1 @ ov0) / (fro(ov1) * fro(ov0)),
            }
            for kind, value in expected.items():
                assert comp.scores[kind][h1, h0].item() == pytest.approx(value.item(), rel=1e-4)
    assert all(0 < v < 1 for v in comp.random.values())


def test_composition_is_one_for_aligned_rank_one_heads():
    """A layer-1 key that reads exactly the direction a layer-0 head writes: rank-one matrices u vᵀ and v wᵀ give
    ‖u vᵀ v wᵀ‖ = ‖u‖‖v‖²‖w‖ = ‖u vᵀ‖‖v wᵀ‖, a score of 1."""
    u, v, w = torch.randn(6), torch.randn(6), torch.randn(6)
    a, b = torch.outer(u, v), torch.outer(v, w)
    assert composition.composition_score(a @ b, a, b).item() == pytest.approx(1.0, rel=1e-5)


def test_ov_token_circuit_and_copying_score(model):
    matrix = composition.ov_token_circuit(model, 1, 3)
    _, ov = _folded_by_hand(model, 1, 3)
    embed, unembed = model.tok_emb.weight.detach(), model.out_head.weight.detach() * model.final_norm.scale.detach()
    for s in (0, 7):  # row s: attend to token s, read every logit
        torch.testing.assert_close(matrix[s], unembed @ (ov @ embed[s]), atol=1e-5, rtol=1e-4)
    assert composition.copying_score(torch.eye(5) * 2) == pytest.approx(1.0)
    assert composition.copying_score(-torch.eye(5)) == pytest.approx(-1.0)
    assert composition.copying_score(torch.diag(torch.tensor([3.0, -1.0]))) == pytest.approx(0.5)
    scores = composition.copying_scores(model)
    assert scores.shape == (2, 4)
    assert scores[1, 3].item() == pytest.approx(composition.copying_score(matrix))


def test_generate_greedy_is_generate_text_simple_and_sampling_is_seeded(model):
    idx = torch.tensor([[1, 2, 3]])
    greedy = generation.generate_text_simple(model, idx, 5, CFG["context_length"])
    assert greedy.shape == (1, 8)
    assert torch.equal(generation.generate(model, idx, 5, CFG["context_length"]), greedy)
    step = model(idx)[0, -1].argmax()  # the first new token by hand
    assert greedy[0, 3] == step

    def sampled(seed):
        gen = torch.Generator().manual_seed(seed)
        return generation.generate(model, idx, 8, CFG["context_length"], temperature=1.5, top_k=3, generator=gen)

    assert torch.equal(sampled(1), sampled(1))
    first = model(idx)[0, -1]
    assert int(sampled(2)[0, 3]) in torch.topk(first, 3).indices.tolist()  # top-k keeps only the 3 likeliest


def test_generate_crops_to_the_context_and_checks_its_numbers(model):
    idx = torch.randint(0, CFG["vocab_size"], (1, CFG["context_length"] + 5))  # longer than the model reads
    assert generation.generate_text_simple(model, idx, 2, CFG["context_length"]).shape == (1, CFG["context_length"] + 7)
    with pytest.raises(ValueError, match="temperature"):
        generation.generate(model, idx, 1, 4, temperature=-1.0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generation.generate(model, idx, -1, 4)


@pytest.mark.parametrize("temperature", [1e-40, 1e-38, generation.MIN_TEMPERATURE / 2, math.nan, math.inf])
def test_generate_refuses_a_temperature_whose_logits_overflow(model, temperature):
    """1e-38 divided the logits to inf and torch.multinomial failed ("probability tensor contains either inf,
    nan or element < 0"): the library names the least temperature instead."""
    idx = torch.zeros(1, 3, dtype=torch.int64)
    with pytest.raises(ValueError, match=f"at least {generation.MIN_TEMPERATURE}"):
        generation.generate(model, idx, 1, 4, temperature=temperature)
    at_least = generation.generate(
        model, idx, 2, 4, temperature=generation.MIN_TEMPERATURE, generator=torch.Generator()
    )
    assert at_least.shape == (1, 5)
