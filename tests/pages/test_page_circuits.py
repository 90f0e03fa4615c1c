"""Heads and references, part "circuits" (issue 22): W_QK and W_OV of one head, and the output as a sum over heads.

Opened by its link (?part=circuits&head=…&token=…) with AppTest: no error box, every chart drawn, and the numbers
in the charts are mha_core.attention.circuits' own, computed here.
"""

from __future__ import annotations

import numpy as np
import pytest

from explorer.glue.state.settings import Settings
from mha_core.attention import circuits
from mha_core.runs import forward as runs

from ..apptest_helpers import charts, check_page, decode, head_matrices, open_page, texts

PAGE = "pages/2_Heads_and_references.py"
PANELS = {"circuit_w_qk", "circuit_w_ov", "circuit_scores", "circuit_sum"}


pytestmark = pytest.mark.usefixtures("one_thread")


def circuits_page(**query) -> tuple:
    at = open_page(PAGE, {"part": "circuits", **{k: str(v) for k, v in query.items()}}, timeout=60)
    check_page(at, [], f"circuits {query}")
    return at, charts(at)


def test_the_books_module_head_1_its_w_qk_w_ov_and_the_sum_at_journey():
    at, drawn = circuits_page(head=1, token=1)
    assert set(drawn) >= PANELS
    module = runs.build_module(Settings().module_spec())
    c = circuits.circuits(module, [1])
    (w_qk,) = head_matrices(drawn["circuit_w_qk"])
    np.testing.assert_allclose(w_qk, c.w_qk[0].numpy(), rtol=1e-6)
    (w_ov,) = head_matrices(drawn["circuit_w_ov"])
    np.testing.assert_allclose(w_ov, c.w_ov[0].numpy(), rtol=1e-6)
    ours, traced = head_matrices(drawn["circuit_scores"])
    np.testing.assert_allclose(ours, traced, rtol=1e-5, atol=1e-6)
    shown = texts(at)
    assert "W_QK" in shown and "W_OV" in shown and "heads are independent, and they add" in shown
    assert "rank 1 ≤ head_dim = 1" in shown and "1/√head_dim is not inside W_QK" in shown
    bars = drawn["circuit_sum"]["data"]
    diamond = next(t for t in bars if t["type"] == "scatter")
    total = sum(np.asarray(decode(t["y"]) if isinstance(t["y"], dict) else t["y"]) for t in bars if t["type"] == "bar")
    np.testing.assert_allclose(
        total, decode(diamond["y"]) if isinstance(diamond["y"], dict) else diamond["y"], atol=1e-6
    )
    np.testing.assert_allclose(diamond["y"], [0.2943, 0.3897], atol=5e-5)  # the book's row for journey
    assert at.query_params["head"] in ("1", ["1"]) and at.query_params["token"] in ("1", ["1"])


def test_wider_heads_with_qkv_bias_and_a_bad_head_in_the_link():
    at, drawn = circuits_page(d_out=8, num_heads=2, d_in=6, qkv_bias="true", head=9)
    assert set(drawn) >= PANELS
    assert any("head=`9` is outside" in w.value for w in at.warning)
    (w_qk,) = head_matrices(drawn["circuit_w_qk"])
    assert w_qk.shape == (6, 6) and np.linalg.matrix_rank(w_qk.astype(np.float64), tol=1e-5) == 4
    assert "bias terms" in texts(at)
    assert all(float(m.value) < 1e-5 for m in at.metric)


def test_a_real_models_head_opened_by_its_link(monkeypatch):
    """?model=own&layer=1&head=2 on the tiny GPT of tests/tiny_gpt.py: that block's own head."""
    import streamlit as st

    from mha_core.gpt import training as gpt_training

    from ..tiny_gpt import tiny_model

    monkeypatch.setattr(gpt_training, "load_shipped", tiny_model)
    st.cache_resource.clear()
    try:
        at, drawn = circuits_page(model="own", layer=1, head=2, token=0, text="Your journey starts with one step.")
    finally:
        st.cache_resource.clear()
    model = tiny_model()[0]
    c = circuits.circuits(model.attention_module(1), [2])
    (w_qk,) = head_matrices(drawn["circuit_w_qk"])
    np.testing.assert_allclose(w_qk, c.w_qk[0].numpy(), rtol=1e-5, atol=1e-7)
    assert w_qk.shape == (32, 32) and "rank 8 ≤ head_dim = 8" in texts(at)
    assert all(float(m.value) < 1e-4 for m in at.metric)


def test_a_trained_layers_head_opened_by_its_link():
    """?trained=<previous-token spec>: the trained module's own head (trains the first time, about 12 s)."""
    from explorer.glue.state import trained_link
    from mha_core.toy import tiny_training

    spec = trained_link.previous_token_spec()
    at, drawn = circuits_page(trained=spec, head=1, token=3)
    config, layer = trained_link.parse_trained_spec(spec)
    module = tiny_training.explorer_module(tiny_training.train(config.task, **_keywords(config)), layer)[0]
    c = circuits.circuits(module, [1])
    (w_qk,) = head_matrices(drawn["circuit_w_qk"])
    np.testing.assert_allclose(w_qk, c.w_qk[0].numpy(), rtol=1e-5, atol=1e-6)
    assert w_qk.shape == (32, 32) and all(float(m.value) < 1e-4 for m in at.metric)


def _keywords(config) -> dict:
    """make_config's keywords of a TrainConfig (its task aside)."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(config).items() if k != "task"}
