"""Issue 44, item 4: the view of the trained GPT's conversions draws and says what the scores hold.

The scores here are made up (any numbers do): each test reads them back from the table, the scatter and the text.
"""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from explorer.views import attention_variants_trained as tview
from explorer.views.attention_variants import human_bytes
from mha_core.variants import trained_variants as tv

CFG = {"vocab_size": 256, "context_length": 128, "emb_dim": 128, "n_heads": 4, "n_layers": 2}
# (conversion, held-out loss, first copy, second copy, induction), invented
MADE_UP = [
    (tv.Conversion(kind="MHA", kv_heads=4), 1.4, 2.6, 0.4, 0.6),
    (tv.Conversion(kind="GQA", kv_heads=2), 2.1, 2.8, 2.7, 0.05),
    (tv.Conversion(kind="MQA", kv_heads=1), 2.8, 3.2, 3.1, 0.02),
    (tv.Conversion(kind="SWA", kv_heads=4, window=32), 1.6, 2.7, 3.0, 0.0),
    (tv.Conversion(kind="SWA", kv_heads=4, window=64), 1.5, 2.6, 0.3, 0.8),
]


def made_up(rows=MADE_UP, periods=(41, 50, 63)) -> tv.TrainedVariants:
    scores = tuple(
        tv.VariantScore(
            conversion=conversion,
            heldout_loss=heldout,
            first_copy_loss=first,
            second_copy_loss=second,
            copy_accuracy=0.5,
            best_induction=induction,
            cache_bytes_per_token=tv.cache_bytes_at(CFG, conversion, 1),
            cache_bytes_full=tv.cache_bytes_at(CFG, conversion, CFG["context_length"]),
        )
        for conversion, heldout, first, second, induction in rows
    )
    return tv.TrainedVariants(
        scores=scores, n_layers=2, n_heads=4, head_dim=32, context_length=128, heldout_windows=32,
        heldout_tokens=32 * 128, sentences=len(periods), periods=periods,
    )  # fmt: skip


def test_the_table_has_a_row_per_conversion_with_its_numbers():
    result = made_up()
    rows = tview.trained_table(result)
    assert [row["variant"] for row in rows] == [s.conversion.label for s in result.scores]
    assert len(rows[0]) <= 8  # a canvas table shows every column at 1280 × 800
    for row, score in zip(rows, result.scores, strict=True):
        assert row["K/V heads per layer"] == score.conversion.kv_heads
        assert row["cache per token"] == human_bytes(score.cache_bytes_per_token)
        assert row["cache at 128 tokens"] == human_bytes(score.cache_bytes_full)
        assert (row["held-out loss"], row["copy loss"], row["best induction"]) == (
            round(score.heldout_loss, 3), round(score.second_copy_loss, 3), round(score.best_induction, 3),
        )  # fmt: skip
    assert [row["window"] for row in rows] == ["every token"] * 3 + ["last 32", "last 64"]
    assert rows[0]["cache per token"] == human_bytes(2 * 2 * 4 * 32 * 4)  # K,V × layers × heads × head_dim × 4 B


@pytest.mark.parametrize("presenter", [False, True])
def test_the_scatter_puts_each_conversion_at_its_cache_with_both_losses_labelled(presenter):
    result = made_up()
    panel = tview.quality_figure(result, presenter)
    figure = panel.figure
    assert json.loads(go.Figure(figure.to_dict()).to_json()) == json.loads(figure.to_json())  # plotly's validation
    held, copy = figure.data
    assert (held.name, copy.name) == (tview.HELDOUT, tview.COPY)
    assert list(held.x) == list(copy.x) == [s.cache_bytes_full for s in result.scores]
    assert list(held.y) == [s.heldout_loss for s in result.scores]
    assert list(copy.y) == [s.second_copy_loss for s in result.scores]
    assert list(held.text) == ["MHA", "GQA 2", "MQA", "SWA 32", "SWA 64"] == list(copy.text)
    assert figure.layout.xaxis.type == "log"
    assert list(figure.layout.xaxis.ticktext) == [human_bytes(x) for x in sorted(set(held.x))]
    assert "128 tokens" in figure.layout.xaxis.title.text and "nats" in figure.layout.yaxis.title.text
    assert "no retraining" in figure.layout.title.text
    words = figure.layout.meta["description"]
    assert figure.layout.meta["filename"]  # the PNG's name is kept beside the description
    for score in result.scores:
        assert f"{score.conversion.label}: {human_bytes(score.cache_bytes_full)}" in words
        assert f"held-out {score.heldout_loss:.3f}, copy {score.second_copy_loss:.3f}" in words
    assert "32 windows of 128" in panel.caption and "3 English sentences" in panel.caption


def test_what_to_look_at_reads_every_number_from_the_scores():
    result = made_up()
    text = tview.trained_look(result)
    mha, gqa, mqa, swa32, swa64 = result.scores
    assert f"caches {human_bytes(mha.cache_bytes_full)} at 128 tokens" in text
    assert f"held-out loss {mha.heldout_loss:.2f} and copy loss {mha.second_copy_loss:.2f}" in text
    # SWA 64 keeps the copy (0.3 ≤ half of 2.6), at half of MHA's cache; SWA 32 does not (3.0 > 1.35)
    assert f"SWA, window 64 keeps the copy (copy loss {swa64.second_copy_loss:.2f}" in text
    assert f"in {swa64.cache_bytes_full / mha.cache_bytes_full:.0%} of the cache" in text
    assert "A window of 32 loses it: for 3 of the 3 sentences (41–63 tokens" in text
    assert f"copy loss {swa32.second_copy_loss:.2f}, best induction head {swa32.best_induction:.2f}" in text
    assert (
        f"GQA, 2 K/V heads, {gqa.heldout_loss:.2f} and {gqa.second_copy_loss:.2f}; MQA, {mqa.heldout_loss:.2f}" in text
    )
    assert "no retraining" in text


def test_what_to_look_at_counts_the_sentences_a_window_cannot_reach_back():
    """A window of 45 reaches back one sentence of 41 tokens (the key 40 back) but not those of 50 and 63."""
    rows = [MADE_UP[0], (tv.Conversion(kind="SWA", kv_heads=4, window=45), 1.5, 2.6, 2.0, 0.1)]
    text = tview.trained_look(made_up(rows))
    assert "A window of 45 loses it: for 2 of the 3 sentences" in text
    assert "keeps the copy" not in text and "Averaging" not in text
