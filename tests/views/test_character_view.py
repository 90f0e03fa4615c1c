"""explorer.views.character_view (issue 46): the text figures validate against plotly, mark each written token
against the copy by colour and by a ✗, escape token text, and say only what the reading's numbers say."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.views import character_view
from mha_core.gpt import model_heads

from ..tiny_gpt import tiny_model


def _reading(own: bool = False) -> model_heads.CharacterReading:
    model, tokenizer = tiny_model()
    ids = tokenizer.encode("Your journey starts with one step. Your journey starts with one step.")
    return model_heads.read_characters(model, tokenizer, ids, heads=((1, 2),), own=own)


def test_statuses_compare_position_by_position_and_stop_at_the_copys_end():
    assert character_view.statuses([1, 2, 3, 4], [1, 5, 3]) == ["match", "miss", "match", ""]
    assert character_view.first_miss(["match", "miss", "miss"]) == 1
    assert character_view.first_miss(["match", ""]) is None


def test_a_written_view_counts_and_marks_each_miss_with_a_cross():
    view = character_view.written_view(["a", "b", "<s>", "d"], [1, 2, 3, 4], [1, 9, 3, 8], ["a", "x", "<s>", "y"],
                                       who="With every head", key="w", presenter=False)  # fmt: skip
    assert (view.matched, view.first_miss, view.compared) == (2, 1, 4)
    figure = view.panel.figure.to_dict()
    go.Figure(figure)  # full validation
    crosses = [t for t in figure["data"] if t.get("text") and set(t["text"]) == {character_view.MISS_MARK}]
    assert len(crosses) == 1 and len(crosses[0]["text"]) == 2  # the shape cue, beside the colour
    assert "<s>" not in view.panel.figure.to_json()
    said = character_view.comparison_sentence(view, None, "")
    assert "**2 of 4** tokens match the copy (first differs at token 2)" in said


def test_every_position_panel_validates_and_the_attribution_adds_up():
    for own in (False, True):
        reading = _reading(own)
        for pos in (0, len(reading.ids) // 2, len(reading.ids) - 2):
            view = character_view.position_view(reading, pos, 1, own=own, presenter=own)
            for panel in (view.text, view.top, view.attribution):
                go.Figure(panel.figure.to_dict())
            bars = view.attribution.figure.to_dict()["data"][0]["y"]
            assert abs(float(np.sum(bars)) - float(reading.logit[pos])) < 1e-4
            assert f"At token {pos} (" in view.sentence
            best = float(reading.head_dla[:, :, pos].max())
            assert f"({best:+.2f} of {float(reading.logit[pos]):.2f})" in view.sentence
