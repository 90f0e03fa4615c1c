"""Issue 44, item 4: the Attention variants page's section 4, the shipped GPT converted with no retraining.

The section draws its scatter and table with no error, and every number in what it says agrees with a recomputation
made here, outside the page's caches: the conversions scored again, the original's copy loss read from the shipped
record, the cache bytes from the model's shape.
"""

from __future__ import annotations

import re

import pytest

from explorer.views import attention_variants_trained as tview
from explorer.views.attention_variants import human_bytes
from mha_core.gpt.training import load_record, load_shipped
from mha_core.variants import trained_variants

from ..apptest_helpers import charts, check_page, open_page

PAGE = "pages/9_Attention_variants.py"
NUMBER = re.compile(r"\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def recomputed() -> trained_variants.TrainedVariants:
    model, tokenizer = load_shipped()
    return trained_variants.score_all(model, tokenizer)


@pytest.fixture(scope="module")
def page():
    at = open_page(PAGE, {"section": "trained"}, timeout=300)
    check_page(at, [], "trained")
    return at


def look_of(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**What to look at:**"))


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;])\s+(?=[A-Z])", text) if s]


def test_the_section_draws_quality_against_cache_bytes_and_the_table(page, recomputed):
    drawn = charts(page)
    assert set(drawn) >= {"trained_quality"}
    held, copy = drawn["trained_quality"]["data"]
    assert held["x"] == [s.cache_bytes_full for s in recomputed.scores]
    assert held["y"] == pytest.approx([s.heldout_loss for s in recomputed.scores], abs=1e-6)
    assert copy["y"] == pytest.approx([s.second_copy_loss for s in recomputed.scores], abs=1e-6)
    rows = page.dataframe[0].value.to_dict("records")
    assert [row["variant"] for row in rows] == [s.conversion.label for s in recomputed.scores]
    assert any("no retraining" in m.value for m in page.markdown)


def test_every_number_in_what_to_look_at_agrees_with_a_recomputation(page, recomputed):
    shown, again = sentences(look_of(page)), sentences(tview.trained_look(recomputed))
    assert len(shown) == len(again) >= 4
    for said, expected in zip(shown, again, strict=True):
        numbers, wanted = NUMBER.findall(said), NUMBER.findall(expected)
        assert len(numbers) == len(wanted), (said, expected)
        assert [float(n) for n in numbers] == pytest.approx([float(n) for n in wanted], abs=0.011), said


def test_the_originals_numbers_are_the_models_own(page):
    """The first sentence, against the shipped record's copy loss and the cache the model's shape gives."""
    cfg, record = load_shipped()[0].cfg, load_record()
    head_dim = cfg["emb_dim"] // cfg["n_heads"]
    cache = 2 * cfg["n_layers"] * cfg["n_heads"] * head_dim * cfg["context_length"] * 4  # K,V × layers × … × float32
    first = sentences(look_of(page))[0]
    assert f"caches {human_bytes(cache)} at {cfg['context_length']} tokens" in first
    copy = float(re.search(r"copy loss (\d+\.\d+)", first).group(1))
    assert copy == pytest.approx(record["english_probe"]["second_copy_loss"], abs=0.006)


def test_presenter_mode_draws_the_section_too():
    at = open_page(PAGE, {"section": "trained", "presenter": "true"}, timeout=300)
    check_page(at, [], "trained, presenter")
    assert "trained_quality" in charts(at)
