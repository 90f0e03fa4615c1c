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
    assert lines[-1]["y"][0] == pytest.approx(math.log(tokenizer.vocab_size))


def test_token_labels_are_escaped_in_every_figure():
    model, tokenizer = tiny_model()
    ids = tokenizer.encode("<script>alert(1)</script>")
    reading = model_heads.read_text(model, tokenizer, ids)
    figure = real_heads.model_view_figure(reading.weights, ["<script>"] * len(ids), title="t")
    assert "<script>" not in figure.to_json()


def test_about_lines_read_the_record_and_survive_a_missing_one():
    facts = type("Facts", (), dict(n_layers=2, n_heads=4, emb_dim=128, context_length=128, vocab_size=256))()
    record = {"recipe": {"steps": 150}, "heldout_loss": 1.48, "unigram_heldout_loss": 3.21}
    text = " ".join(real_heads.about_lines("own", record, facts))
    assert "1.48" not in text and "induction task" not in text  # no count of held-out bytes: no loss is quoted
    record |= {"heldout_tokens_scored": 35298}
    record["recipe"] |= {"induction_warmup": 400}
    text = " ".join(real_heads.about_lines("own", record, facts))
    assert "1.48" in text and "3.21" in text and "all 35,298 held-out bytes" in text and "150 AdamW steps" in text
    assert "The first 400 on random bytes" in text
    record["english_probe"] = {"sentences": 50, "best_induction": 0.59, "first_copy_loss": 2.59,
                               "second_copy_loss": 0.44, "second_copy_accuracy": 0.89,
                               "best_previous_token_on_text": 0.75, "knockouts": []}  # fmt: skip
    text = " ".join(real_heads.about_lines("own", record, facts))
    assert "On 50 English sentences it never saw" in text and "**0.59**" in text and "**89%**" in text
    assert real_heads.about_lines("own", {}, facts) and "GPT-2" in real_heads.about_lines("gpt2", {}, facts)[0]


def test_the_knockout_lines_quote_the_record():
    record = {"english_probe": {"sentences": 50, "second_copy_loss": 0.44, "second_copy_accuracy": 0.89,
              "knockouts": [{"kind": "previous-token heads", "heads": [[0, 2]], "mode": "zero",
                             "second_copy_loss": 3.21, "second_copy_accuracy": 0.16}]}}  # fmt: skip
    said = real_heads.knockout_record_lines(record)
    assert "previous-token heads (L0 H2) zeroed: **3.21** (16%)" in said and "0.44" in said
    assert real_heads.knockout_record_lines({}) == ""


def test_the_induction_sentence_stays_true_whatever_the_model_learned():
    copying = real_heads.induction_sentence(7.6, 2.1, 2048)  # ln 2048 = 7.62
    assert "falls to 2.10, 5.50 nats below the first copy" in copying and "confidently wrong" not in copying
    worse = real_heads.induction_sentence(9.1, 2.1, 256)  # a first copy 3.6 nats worse than uniform (ln 256 = 5.55)
    assert "3.45 nats below a uniform guess" in worse and "confidently wrong" in worse
    stuck = real_heads.induction_sentence(9.6, 9.5, 2048)
    assert "does not fall much" in stuck and "confidently wrong" in stuck
