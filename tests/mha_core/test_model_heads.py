"""mha_core.gpt.model_heads (a real GPT's readings) and the Real heads view's figures, without Streamlit.

The numbers are the model's own: the weights are ``attention_weights``, the top 5 its softmax, the scores
``head_scores`` on the probe, and the shipped model's probe gives back the head scores its record holds.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from explorer.views import real_heads
from mha_core.gpt import head_scores, model_heads
from mha_core.gpt import training as gpt_training

from ..tiny_gpt import tiny_model

TEXT = "for item in items: print(item)"


@pytest.fixture(scope="module")
def readings():
    model, tokenizer = tiny_model()
    ids = tokenizer.encode(TEXT)
    return (
        model,
        tokenizer,
        ids,
        model_heads.read_text(model, tokenizer, ids),
        model_heads.probe_heads(model, tokenizer),
    )


def test_a_reading_is_the_models_weights_and_prediction(readings):
    model, tokenizer, ids, reading, _ = readings
    batch = torch.tensor([ids])
    np.testing.assert_array_equal(reading.weights, model.attention_weights(batch)[:, 0].numpy())
    probs = torch.softmax(model(batch)[0, -1], dim=-1)
    assert list(reading.top_ids) == torch.topk(probs, 5).indices.tolist()
    assert sum(reading.top_probs) <= 1 and list(reading.top_probs) == sorted(reading.top_probs, reverse=True)
    assert reading.labels == tuple(tokenizer.labels(ids)) and reading.text == tokenizer.decode(ids)
    with pytest.raises(ValueError, match="read-only"):
        reading.weights[0, 0, 0, 0] = 1.0  # shared by every session: read-only


def test_the_probe_scores_are_head_scores_on_the_repeated_sequence(readings):
    model, _, _, _, probe = readings
    ids = model_heads.probe_tokens(model)  # (b, 2P)
    assert torch.equal(ids[:, : probe.period], ids[:, probe.period :])
    weights = model.attention_weights(ids)  # (L, b, h, 2P, 2P)
    expected = head_scores.induction_score(weights, probe.period).mean(dim=1)  # (L, h)
    np.testing.assert_allclose(probe.scores["induction"], expected.numpy(), rtol=1e-6)
    assert probe.strongest["induction"][:2] == head_scores.strongest(expected)[:2]
    assert probe.loss.shape == (2 * probe.period - 1,)
    assert probe.first_copy_loss == pytest.approx(float(probe.loss[: probe.period - 1].mean()), rel=1e-6)
    assert probe.second_copy_loss == pytest.approx(float(probe.loss[probe.period :].mean()), rel=1e-6)
    assert int(ids.max()) < model.cfg["vocab_size"] - 1  # never the last id (GPT-2's end of text)


def test_the_shipped_models_probe_gives_its_recorded_head_scores():
    model, tokenizer = gpt_training.load_shipped()
    record = gpt_training.load_record()
    numbers = {key: record["probe"][key] for key in ("period", "batch_size", "seed")}
    probe = model_heads.probe_heads(model, tokenizer, model_heads.Probe(**numbers, whole_vocabulary=True))
    for kind in head_scores.KINDS:
        np.testing.assert_allclose(probe.scores[kind], np.array(record["head_scores"][kind]), atol=1e-5)


def test_every_figure_passes_plotlys_validation_and_reads_like_a_printed_matrix(readings):
    model, tokenizer, _, reading, probe = readings
    text = model_heads.text_scores(reading.weights, reading.ids)
    view = real_heads.build_view(
        reading, probe, text, label="a tiny GPT", vocab_size=tokenizer.vocab_size, presenter=False
    )
    for panel in (view.model_view, view.scores, view.text_scores, view.top5, view.induction):
        go.Figure(panel.figure.to_dict())  # full validation (production skips it)
    layout = view.model_view.figure.to_dict()["layout"]
    layers, heads = model.cfg["n_layers"], model.cfg["n_heads"]
    thumbs = [key for key in layout if key.startswith("yaxis")]
    assert len(thumbs) == layers * heads
    assert all(layout[key]["range"][0] > layout[key]["range"][1] for key in thumbs), "row 0 at the top"
    assert all(layout[key]["scaleanchor"] for key in thumbs), "square thumbnails"
    scores = view.scores.figure.to_dict()
    assert scores["layout"]["yaxis"]["range"][0] > scores["layout"]["yaxis"]["range"][1], "layer 0 at the top"
    lines = view.induction.figure.to_dict()["data"]
    assert {trace["name"] for trace in lines} >= {"first copy", "second copy"}
    assert lines[-1]["y"][0] == pytest.approx(math.log(probe.drawn)) and probe.drawn == tokenizer.vocab_size - 1 - 75


def test_token_labels_are_escaped_in_every_figure():
    model, tokenizer = tiny_model()
    ids = tokenizer.encode("<script>alert(1)</script>")
    reading = model_heads.read_text(model, tokenizer, ids)
    figure = real_heads.model_view_figure(reading.weights, ["<script>"] * len(ids), title="t")
    assert "<script>" not in figure.to_json()


def test_the_induction_sentence_stays_true_whatever_the_model_learned():
    copying = real_heads.induction_sentence(7.6, 2.1, 2048)  # ln 2048 = 7.62
    assert "falls to 2.10, 5.50 nats below the first copy and 5.52 below a uniform guess" in copying
    assert "confidently wrong" not in copying
    worse = real_heads.induction_sentence(9.1, 2.1, 256, "bytes")  # 3.55 nats worse than uniform (ln 256 = 5.55)
    assert "worse than that, by 3.55" in worse and "confidently wrong" in worse and "from 256 values (bytes)" in worse
    stuck = real_heads.induction_sentence(9.6, 9.5, 2048)
    assert "does not fall much" in stuck and "confidently wrong" in stuck


def test_the_probe_draws_only_the_allowed_ids_and_counts_them():
    model, tokenizer = tiny_model()
    allowed = tuple(range(97, 123))  # a to z
    probe = model_heads.Probe(period=8, batch_size=3, seed=1, allowed=allowed)
    ids = model_heads.probe_tokens(model, probe)  # (b, 2P)
    assert set(ids.flatten().tolist()) <= set(allowed) and torch.equal(ids[:, :8], ids[:, 8:])
    assert model_heads.probe_heads(model, tokenizer, probe).drawn == 26
    assert model_heads.corpus_bytes("aab\u00e9", min_count=2) == (97,)  # é is two bytes, each once
