"""The reviewer's list on the Real heads page (issue 46, item 5), each sentence against a recomputation, on the tiny
random GPT as the shipped model (its record's sentences are checked against the shipped model in
tests/views/test_real_record.py)."""

from __future__ import annotations

import re

import numpy as np
import torch

from explorer.glue.cached import real_models
from explorer.views import head_kinds, real_heads
from mha_core.gpt import composition, data, head_scores, model_heads

from ..apptest_helpers import chart_places, charts, check_page, head_matrices, open_page, texts
from .test_page_real_heads import tiny  # noqa: F401  (the tiny GPT as the shipped model, for every test here)

PAGE = "pages/8_Real_heads.py"
TEXT = "Your journey starts with one step. Your journey starts with one step."


def test_the_probe_is_drawn_from_the_trained_bytes_and_says_so(tiny):  # noqa: F811
    model, tokenizer = tiny
    at = open_page(PAGE, {"text": TEXT})
    check_page(at, [], PAGE)
    allowed = model_heads.corpus_bytes(data.corpus()[0], real_models.PROBE_MIN_COUNT)  # by hand: the text's bytes
    recorded = real_models.shipped_record()["probe"]
    numbers = {key: recorded[key] for key in ("period", "batch_size", "seed")}
    probe = model_heads.probe_heads(model, tokenizer, model_heads.Probe(**numbers, allowed=allowed))
    said = texts(at)
    assert f"drawn from {len(allowed):,} values (the bytes of its training text" in said
    assert f"Mean loss **{probe.first_copy_loss:.2f}** nats on the first copy, **{probe.second_copy_loss:.2f}**" in said
    assert f"ln {len(allowed):,} = {np.log(len(allowed)):.2f}" in said
    lines = {t["name"]: t["y"] for t in charts(at)["induction"]["data"]}
    np.testing.assert_allclose(lines[f"a uniform guess, ln {len(allowed)}"][0], np.log(len(allowed)), rtol=1e-6)


def test_each_kinds_verdict_and_its_printed_score_fall_on_the_same_side_of_the_bar(tiny):  # noqa: F811
    at = open_page(PAGE, {"text": TEXT})
    said = texts(at)
    headlines = re.findall(
        r"\*\*(No \w[\w ]* head|[\w ]+ head: L\d H\d)\*\* \([^)]*?(\d\.\d+), (at least|under) (\d\.\d\d)\)", said
    )
    assert len(headlines) == 3, said[:2000]
    for name, score, side, bar in headlines:
        assert (float(score) >= float(bar)) == (side == "at least") == (not name.startswith("No "))
    assert head_kinds.printed_against(0.2998, 0.3) == "0.2998" and head_kinds.printed_against(0.31, 0.3) == "0.31"
    assert head_kinds.printed_against(0.3, 0.3) == "0.30"


def test_the_model_view_caption_names_the_offsets_the_scores_read(tiny):  # noqa: F811
    model, tokenizer = tiny
    at = open_page(PAGE, {"text": TEXT})
    said = texts(at)
    assert real_heads.MODEL_VIEW_TEXT in said
    assert "itself and the earlier ones" in said and "key i − P + 1" in said and "key i − P," in said
    thumbs = np.stack(head_matrices(charts(at)["model_view"]))  # (L·h, T, T)
    assert (np.diagonal(thumbs, axis1=1, axis2=2) > 0).all(), "a token reads itself"
    assert not np.triu(thumbs, k=1).any(), "and nothing later"
    period, total = 5, 10
    at_offset = torch.zeros(1, total, total)
    duplicate = torch.zeros(1, total, total)
    for i in range(period, total):
        at_offset[0, i, i - period + 1] = 1.0
        duplicate[0, i, i - period] = 1.0
    assert float(head_scores.induction_score(at_offset, period)) == 1.0  # the induction stripe: key i − P + 1
    assert float(head_scores.induction_score(duplicate, period)) == 0.0  # one period back is another head


def test_composition_is_said_with_every_pairs_range_after_the_knockout(tiny):  # noqa: F811
    model, _ = tiny
    at = open_page(PAGE, {"text": TEXT})
    said = texts(at)
    comp = composition.composition(model)
    for kind, matrix in comp.scores.items():
        low, high = float(matrix.min()), float(matrix.max())
        assert f"{kind}-composition {low:.2f}–{high:.2f} (random heads {comp.random[kind]:.2f})" in said
    assert "The knock-out above is the test of the circuit" in said
    headers = [h.value for h in at.header]
    assert headers.index("Knock heads out") < headers.index("The induction circuit")


def test_the_score_heatmaps_take_the_page_width_and_print_their_values(tiny):  # noqa: F811
    at = open_page(PAGE, {"text": TEXT, "ablate": "1.0"})
    places = chart_places(at)
    for key in ("text_scores", "head_scores", "knockout_scores"):
        assert len(places[key]) == len(places["model_view"]), f"{key} sits in a column"
        figure = charts(at)[key]
        assert all("text" in trace for trace in figure["data"]), f"{key}: values not printed"
    assert "make it complete the copy" not in texts(at)


def test_score_grids_stay_readable_at_1280_px_for_larger_models():
    for heads, side in ((4, True), (8, False), (12, False)):
        shape = (3, heads)
        names = ["previous token", "first token", "induction"]
        plan = head_kinds.score_grid(names, shape, presenter=False)
        assert plan["side"] is side and plan["cell"] >= head_kinds.readable_cell_px(False), (heads, plan["cell"])
        boxes = plan["boxes"]
        for (xa, ya), (xb, yb) in zip(boxes, boxes[1:], strict=False):
            assert xa[1] <= xb[0] or ya[0] >= yb[1], "panels overlap"
        figure = head_kinds.scores_figure({n: np.full(shape, 0.5) for n in names}).to_dict()
        assert all("text" in trace for trace in figure["data"])
