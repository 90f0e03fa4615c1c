"""The Real heads page's writing sections (issue 46, items 2 and 3), on the tiny random GPT (tests/tiny_gpt.py).

"Continue my sentence" must write with the chosen heads knocked out, beside the intact model, each token marked
against the copy; "Character by character" must show, for the chosen position (``?pos=``), the model's own top 5,
the layer's weights from that position, and attributions that add up to the logit. Every number is recomputed
here from the model.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from mha_core.gpt import attribution, generation, knockout

from ..apptest_helpers import charts, check_page, decode, open_page, texts
from .test_page_real_heads import tiny  # noqa: F401  (the tiny GPT as the shipped model, for every test here)

PAGE = "pages/8_Real_heads.py"
SENTENCE = "Your journey starts with one step."
TWICE = f"{SENTENCE} {SENTENCE[:12]}"  # the copy begun: the model should finish it
CORPUS_SENTENCE = "A function is defined with def; return gives its value back to the caller."


def values(trace: dict, key: str) -> list:
    found = trace[key]
    return list(decode(found)) if isinstance(found, dict) else list(found)


def glyphs(figure: dict) -> list[str]:
    """The tokens a text figure draws, in order (the first text trace with hover)."""
    trace = next(t for t in figure["data"] if t.get("mode") == "text" and "hovertext" in t)
    return list(trace["text"])


def cells(figure: dict, name: str) -> int:
    return sum(len(values(t, "x")) for t in figure["data"] if t.get("name") == name)


def test_continue_writes_with_the_heads_knocked_out_beside_every_head(tiny):  # noqa: F811
    model, tokenizer = tiny
    heads = [(0, 1), (1, 3)]
    at = open_page(PAGE, {"text": TWICE, "ablate": "0.1,1.3", "ablation": "mean"})
    at.number_input(key="w_rh_write").set_value(10)
    at.button(key="w_rh_continue").click().run()
    check_page(at, [TWICE], "continued without L0 H1, L1 H3")
    drawn = charts(at)
    ids = tokenizer.encode(TWICE)
    prompt = torch.tensor([ids])
    copy = attribution.copy_continuation(ids, 10)
    said = texts(at)
    for key, chosen in (("written_all", []), ("written_knocked", heads)):
        out = generation.generate(model, prompt, 10, model.cfg["context_length"], heads=tuple(chosen), mode="mean")
        written = out[0, len(ids) :].tolist()
        if chosen:  # the knocked-out run by hand: the argmax of forward_knocked_out, step by step
            seq = prompt
            for _ in range(10):
                step = knockout.forward_knocked_out(model, seq, chosen, "mean").logits[0, -1].argmax().view(1, 1)
                seq = torch.cat([seq, step], dim=1)
            assert seq[0, len(ids) :].tolist() == written
        labels = tokenizer.labels(written)
        assert glyphs(drawn[key]) == [label[:3] if len(label) <= 3 else label[:2] + "…" for label in labels]
        matched = sum(w == c for w, c in zip(written, copy, strict=False))
        assert cells(drawn[key], "matches the copy") == matched
        assert cells(drawn[key], "✗ differs from the copy") == min(len(copy), 10) - matched
        assert f"**{matched} of {min(len(copy), 10)}** tokens match the copy" in said
    assert "Without L0 H1, L1 H3:" in said


def test_the_model_writes_after_all_it_reads_though_the_page_draws_less(tiny, monkeypatch):  # noqa: F811
    """The grids read the page's cap; writing reads the model's whole context (the shipped model's 256 bytes hold a
    120-character sentence typed twice, over the 128 the page draws). Before, the prompt was cut to the page's cap."""
    from explorer.glue.cached import real_models

    model, tokenizer = tiny
    monkeypatch.setitem(real_models.PAGE_TOKEN_CAP, "own", 24)
    long_copy = f"{CORPUS_SENTENCE} {CORPUS_SENTENCE[:12]}"
    ids = tokenizer.encode(long_copy)
    assert 24 < len(ids) <= model.cfg["context_length"] - 10
    at = open_page(PAGE, {"text": long_copy})
    at.number_input(key="w_rh_write").set_value(10)
    at.button(key="w_rh_continue").click().run()
    check_page(at, [long_copy], "a sentence longer than the page draws, written")
    notices = [alert.value for alert in [*at.warning, *at.info]]
    said = (
        f"The sentence is {len(ids)} tokens long; this page reads the first 24; the model writes after all {len(ids)}."
    )
    assert said in notices, notices
    out = generation.generate(model, torch.tensor([ids]), 10, model.cfg["context_length"])
    written = out[0, len(ids) :].tolist()
    assert glyphs(charts(at)["written_all"]) == [
        label[:3] if len(label) <= 3 else label[:2] + "…" for label in tokenizer.labels(written)
    ]


def test_without_knockouts_one_continuation_and_the_way_to_compare(tiny):  # noqa: F811
    tokenizer = tiny[1]
    at = open_page(PAGE, {"text": SENTENCE})
    at.button(key="w_rh_copy").click().run()
    check_page(at, [], "start the copy")
    begun = f"{SENTENCE} {tokenizer.decode(tokenizer.encode(SENTENCE)[: attribution.COPY_GIVEN])}"
    assert at.session_state.settings.text == begun
    at.button(key="w_rh_copy").click().run()  # pressed again: the copy is cut to its start, not begun a third time
    assert at.session_state.settings.text == begun
    at.button(key="w_rh_continue").click().run()
    drawn = charts(at)
    assert "written_all" in drawn and "written_knocked" not in drawn
    assert "Choose heads to knock out above" in texts(at)


def position_numbers(at, model, ids, pos: int, layer: int, true_ids=None):
    """The position's top 5, attribution and weights as the page draws them, against the model read on ``ids``
    (the right next token is ``true_ids``', the text's, when the model reads its own writing)."""
    drawn = charts(at)
    true_ids = true_ids or ids
    logits = model(torch.tensor([ids]))[0]  # (T, V)
    probs = torch.softmax(logits[pos], dim=-1)
    top = torch.topk(probs, 5)
    bars = drawn["position_top"]["data"][0]
    np.testing.assert_allclose(values(bars, "y"), top.values.numpy(), rtol=1e-5)
    parts = values(drawn["position_attribution"]["data"][0], "y")
    assert abs(sum(parts) - float(logits[pos, true_ids[pos + 1]])) < 1e-4
    weights = model.attention_weights(torch.tensor([ids]))[layer, 0, :, pos, : pos + 1]  # (h, pos + 1)
    strips = [t for t in drawn["position_text"]["data"] if str(t.get("name", "")).startswith("head ")]
    shown = np.stack([values(t["marker"], "opacity")[: pos + 1] for t in strips])
    np.testing.assert_allclose(shown, weights.numpy(), atol=1e-6)
    return drawn


@pytest.mark.parametrize("pos", [3, 17])
def test_a_position_link_shows_that_positions_guesses_weights_and_attribution(tiny, pos):  # noqa: F811
    model, tokenizer = tiny
    at = open_page(PAGE, {"text": TWICE, "pos": str(pos)})
    check_page(at, [], f"?pos={pos}")
    ids = tokenizer.encode(TWICE)
    assert at.select_slider(key="w_rh_pos").value == pos
    layer = at.selectbox(key="w_rh_char_layer").value
    position_numbers(at, model, ids, pos, layer)
    assert at.query_params["pos"] in (str(pos), [str(pos)])
    guess = tokenizer.labels([int(torch.argmax(model(torch.tensor([ids]))[0, pos]))])[0]
    assert f"At token {pos} (with the true text given) the model's first guess is" in texts(at)
    assert re.search(rf"first guess is “{re.escape(guess)}”", texts(at).replace("\\", ""))
    at.select_slider(key="w_rh_pos").set_value(pos + 1).run()  # the next token, as the right arrow key does
    check_page(at, [], f"pos {pos + 1}")
    position_numbers(at, model, ids, pos + 1, layer)


@pytest.mark.parametrize(("raw", "said"), [("abc", "is not a whole number"), ("999", "is outside")])
def test_a_bad_position_link_is_corrected_with_a_notice(tiny, raw, said):  # noqa: F811
    at = open_page(PAGE, {"text": TWICE, "pos": raw})
    check_page(at, [], f"?pos={raw}")
    assert any(said in w.value and "pos=" in w.value for w in at.warning), [w.value for w in at.warning]
    assert "position_text" in charts(at)


def test_writing_on_its_own_reads_the_models_own_text(tiny):  # noqa: F811
    model, tokenizer = tiny
    text = f"{SENTENCE} {SENTENCE}"
    at = open_page(PAGE, {"text": text, "reading": "own"})
    check_page(at, [], "?reading=own")
    ids = tokenizer.encode(text)
    given = attribution.prompt_length(ids)
    assert given == attribution.copy_start(ids) + attribution.COPY_GIVEN < len(ids) - 2  # the copy's first tokens
    out = generation.generate(model, torch.tensor([ids[:given]]), len(ids) - given, model.cfg["context_length"])
    fed = out[0].tolist()
    shown = glyphs(charts(at)["position_text"])
    assert shown == [label if len(label) <= 3 else label[:2] + "…" for label in tokenizer.labels(fed)]
    pos = at.select_slider(key="w_rh_pos").value
    assert pos == given  # the first token it writes on its own
    assert f"Given the first {given} tokens (grey), the model wrote the other {len(ids) - given} on its own" in texts(
        at
    )
    position_numbers(at, model, fed, pos, at.selectbox(key="w_rh_char_layer").value, true_ids=ids)
    assert at.query_params["reading"] in ("own", ["own"])
