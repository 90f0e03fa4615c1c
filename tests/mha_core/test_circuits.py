"""mha_core.attention.circuits: every head's W_QK and W_OV against the traced scores and output (allclose: two matmul
routes).

The scores x_i W_QK x_jᵀ equal the traced attn_scores before ÷ √head_dim; Σ_h Aʰ X W_OVʰᵀ + b equals the output.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.glue.state.settings import Settings
from explorer.views import follow_a_token
from mha_core.attention import circuits
from mha_core.attention.modules import MultiHeadAttention
from mha_core.gpt.model import GPTModel
from mha_core.runs import forward as runs


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)


def module_and_trace(d_in=8, d_out=8, heads=2, tokens=6, qkv_bias=False, train=False, dropout=0.0):
    module = MultiHeadAttention(d_in, d_out, tokens, dropout, heads, qkv_bias=qkv_bias).eval()
    if qkv_bias:  # nn.Linear draws small biases: make them matter
        with torch.no_grad():
            for linear in (module.W_query, module.W_key, module.W_value):
                linear.bias.uniform_(-1, 1)
    x = torch.rand(2, tokens, d_in)
    return module, runs.run_trace(module, x, train=train, seed=3)


def test_the_books_module_circuits_have_the_books_shapes_and_rank_one():
    settings = Settings()
    module = runs.build_module(settings.module_spec())
    c = circuits.circuits(module)
    assert c.w_qk.shape == (2, 3, 3) and c.w_ov.shape == (2, 2, 3) and c.heads == (0, 1)
    assert c.ranks == (1, 1)  # head_dim = 1: each W_QK is an outer product
    w_q, w_k = module.W_query.weight, module.W_key.weight  # (d_out, d_in)
    torch.testing.assert_close(c.w_qk[1], torch.outer(w_q[1], w_k[1]))  # W_Qʰᵀ W_Kʰ with head_dim 1
    torch.testing.assert_close(c.w_ov[0], torch.outer(module.out_proj.weight[:, 0], module.W_value.weight[0]))


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_x_w_qk_xt_is_the_traced_score_before_the_division(qkv_bias):
    module, trace = module_and_trace(d_in=12, d_out=8, heads=4, qkv_bias=qkv_bias)  # head_dim 2
    c = circuits.circuits(module)
    x = trace.steps["x"]
    scores = circuits.circuit_scores(c, x)  # (b, h, i, j)
    torch.testing.assert_close(scores, trace.steps["attn_scores"], rtol=1e-5, atol=1e-5)
    folded = circuits.circuit_scores(c, x) / c.head_dim**0.5  # the 1/√head_dim comes after, on the scores
    allowed = trace.steps["mask"]
    torch.testing.assert_close(folded.masked_fill(~allowed, -torch.inf), trace.steps["scaled_scores"])
    assert all(r <= c.head_dim for r in c.ranks) and c.ranks == (2, 2, 2, 2)


@pytest.mark.parametrize(("qkv_bias", "train"), [(False, False), (True, False), (True, True)])
def test_the_output_is_the_sum_over_heads_of_a_x_w_ov_plus_the_bias(qkv_bias, train):
    module, trace = module_and_trace(qkv_bias=qkv_bias, train=train, dropout=0.5 if train else 0.0)
    c = circuits.circuits(module)
    weights = trace.steps["attn_weights_dropped"]  # (b, h, i, j)
    if train:
        assert not torch.equal(weights, trace.steps["attn_weights"])  # dropout drew zeros
    torch.testing.assert_close(circuits.circuit_output(c, weights, trace.steps["x"]), trace.output)
    check = circuits.check_against_trace(module, trace)
    assert check.scores_diff < 1e-5 and check.output_diff < 1e-5


def test_each_heads_share_is_follow_a_tokens_contribution_bar():
    settings = Settings(d_in=6, d_out=6, num_heads=3, input="random", num_tokens=5, context_length=5)
    module = runs.build_module(settings.module_spec())
    x, labels = runs.build_input(settings.input_spec())
    run = runs.run_explorer(module, x, labels, train=settings.train, seed=settings.seed, dropout=settings.dropout)
    c = circuits.circuits(module)
    shares = circuits.head_outputs(c, run.trace.steps["attn_weights_dropped"], run.trace.steps["x"])  # (b, h, i, o)
    view = follow_a_token.build_token_view(run, token=3, batch_index=1, presenter=False, book_example=False)
    np.testing.assert_allclose(shares[1, :, 3].numpy(), view.contributions, rtol=1e-5, atol=1e-6)


def test_one_head_at_a_time_and_bad_input_names_the_numbers():
    module, trace = module_and_trace(heads=4)
    every = circuits.circuits(module)
    one = circuits.circuits(module, [2])
    assert one.heads == (2,) and torch.equal(one.w_qk[0], every.w_qk[2]) and torch.equal(one.w_ov[0], every.w_ov[2])
    with pytest.raises(ValueError, match=r"heads must be in 0–3 \(num_heads=4\), got \[4\]"):
        circuits.circuits(module, [4])
    with pytest.raises(ValueError, match=r"x must have shape \(batch, tokens, 8\).*\(2, 6, 5\)"):
        circuits.circuit_scores(every, torch.rand(2, 6, 5))


def test_a_gpt_blocks_heads_decompose_the_same_way():
    cfg = {
        "vocab_size": 50,
        "context_length": 8,
        "emb_dim": 16,
        "n_heads": 4,
        "n_layers": 2,
        "drop_rate": 0.0,
        "qkv_bias": True,
    }
    model = GPTModel(cfg).eval()
    ids = torch.randint(0, 50, (1, 8))
    trace = model.trace_layer(ids, 1)
    check = circuits.check_against_trace(model.attention_module(1), trace)
    assert check.scores_diff < 1e-4 and check.output_diff < 1e-4
