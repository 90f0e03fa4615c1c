"""The Real heads page and the real-model links (issue 18, items 4-5), on a tiny random GPT (tests/tiny_gpt.py).

Every test checks the page's promises (apptest_helpers.check_page: no exception, no error box, charts drawn) and
then what it is about: every chart at the defaults, a top 5 that is the model's, a head link that opens exactly
``model.trace_layer(ids, L)`` in the Explorer and on Follow a token, GPT-2 offline, the sentence capped.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
import streamlit as st
import torch

from explorer.glue.cached import real_models
from explorer.glue.memory import budget
from explorer.glue.state import user_text
from mha_core.gpt import composition, generation, head_scores, knockout
from mha_core.gpt import download as gpt2_download
from mha_core.gpt import training as gpt_training

from ..apptest_helpers import charts, check_page, head_matrices, open_page, texts
from ..tiny_gpt import TINY_CONFIG, tiny_model

PAGE = "pages/8_Real_heads.py"
TEXT = "The for statement in Python iterates over the items of any sequence"
PANELS = {"top5", "model_view", "head_scores", "text_scores", "induction", "knockout_loss", "composition"}
PANELS |= {"position_text", "position_top", "position_attribution", "training_curve"}  # issue 46
PANELS |= {"milestones_induction", "milestones_copy"}  # the shipped record keeps its checkpoints' measurements


@pytest.fixture(autouse=True)
def tiny(monkeypatch, tmp_path):
    """The tiny GPT as the shipped model, an empty GPT-2 cache, no memory of an earlier failed download."""
    monkeypatch.setattr(gpt_training, "load_shipped", tiny_model)
    monkeypatch.setenv("MHA_GPT2_DIR", str(tmp_path / "gpt2"))
    real_models.forget_gpt2_failures()
    st.cache_resource.clear()
    yield tiny_model()
    st.cache_resource.clear()


def ids_of(text: str, limit: int = TINY_CONFIG["context_length"]) -> list[int]:
    return tiny_model()[1].encode(text)[:limit]


def download_buttons(at) -> list:
    return [button for button in at.get("button") if button.key == "w_rh_download"]


def links(at) -> list[str]:
    """The head links' URLs (a page run alone draws them as link buttons)."""
    return [button.proto.url for button in at.get("link_button")]


def test_the_page_draws_every_chart_at_its_defaults(tiny):
    model, tokenizer = tiny
    at = open_page(PAGE)
    check_page(at, [], PAGE)
    figures = charts(at)
    assert set(figures) == PANELS
    layers, heads = model.cfg["n_layers"], model.cfg["n_heads"]
    thumbs = head_matrices(figures["model_view"])
    ids = tokenizer.encode(real_models.DEFAULT_TEXT)
    assert len(thumbs) == layers * heads and thumbs[0].shape == (len(ids), len(ids))
    weights = model.attention_weights(torch.tensor([ids]))[:, 0].numpy()  # (L, 1, h, T, T) -> (L, h, T, T)
    np.testing.assert_allclose(np.stack(thumbs), weights.reshape(layers * heads, len(ids), len(ids)), atol=1e-6)
    layout = figures["model_view"]["layout"]
    assert layout["yaxis"]["range"][0] > layout["yaxis"]["range"][1], "row 0 (the first query) at the top"
    trace = figures["model_view"]["data"][0]
    assert trace["y"][0].endswith(tokenizer.labels(ids)[0]) and "query %{y}" in trace["hovertemplate"]
    scores = head_matrices(figures["head_scores"])
    assert [s.shape for s in scores] == [(layers, heads)] * 3
    written = texts(at)
    for kind in ("previous token", "first token", "induction"):
        assert f"{kind.capitalize()} head: L" in written or f"No {kind} head" in written
    assert "Mean loss" in written and "second copy" in written
    assert len(links(at)) == 2 * 3 + 3  # Explorer and Follow a token for each strongest head; and circuits, chosen


def test_the_top_5_is_the_models_prediction(tiny):
    model, tokenizer = tiny
    at = open_page(PAGE, {"text": TEXT})
    check_page(at, [TEXT], PAGE)
    bars = charts(at)["top5"]["data"][0]
    shown = np.asarray(bars["y"], dtype=float)
    probs = torch.softmax(model(torch.tensor([ids_of(TEXT)]))[0, -1], dim=-1)  # (V,)
    top = torch.topk(probs, 5)
    np.testing.assert_allclose(shown, top.values.numpy(), rtol=1e-5)
    assert shown.sum() <= 1 + 1e-6 and list(shown) == sorted(shown, reverse=True)
    assert bars["customdata"] == [f"“{label}”" for label in tokenizer.labels(top.indices.tolist())]


def test_a_head_link_opens_that_layer_in_the_explorer(tiny):
    model, _ = tiny
    at = open_page(PAGE, {"text": TEXT})
    url = next(u for u in links(at) if u.startswith("./?"))
    query = dict(parse_qsl(urlsplit(url).query))
    layer, head = int(query["layer"]), int(query["head"])
    assert query["model"] == "own" and query["text"] == TEXT
    trace = model.trace_layer(torch.tensor([ids_of(TEXT, real_models.TOKEN_CAP["own"])]), layer)
    explorer = open_page("app.py", query)
    check_page(explorer, [TEXT], f"app.py?{query}")
    figures = charts(explorer)
    weights = trace.steps["attn_weights"][0].numpy()  # (h, T, T)
    np.testing.assert_array_equal(np.stack(head_matrices(figures["attn_weights"])), weights)
    np.testing.assert_array_equal(head_matrices(figures["enlarged_head"])[0], weights[head])
    settings = explorer.session_state.settings
    assert (settings.model, settings.layer, settings.num_heads, settings.d_in) == ("own", layer, 4, 32)
    explorer = open_page("app.py", query | {"section": "reshapes"})
    check_page(explorer, [], "app.py, reshapes")
    figures = charts(explorer)
    for step in ("queries", "keys", "values", "context", "output"):
        np.testing.assert_array_equal(head_matrices(figures[step])[0], trace.steps[step][0].numpy(), err_msg=step)


def test_a_head_link_opens_that_head_first_on_follow_a_token(tiny):
    at = open_page(PAGE, {"text": TEXT})
    url = next(u for u in links(at) if u.startswith("./Follow_a_token?"))
    query = dict(parse_qsl(urlsplit(url).query))
    follow = open_page("pages/7_Follow_a_token.py", query)
    check_page(follow, [TEXT], f"Follow a token?{query}")
    assert follow.expander[0].label.startswith(f"head {query['head']} ")
    assert follow.session_state.settings.layer == int(query["layer"])
    assert follow.query_params["head"] in (query["head"], [query["head"]])


def test_gpt2_offline_says_so_and_the_shipped_model_serves(monkeypatch):
    monkeypatch.setenv("MHA_SERVER_MB", "2700")  # Community Cloud's largest app: GPT-2 would fit, but cannot come

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    at = open_page(PAGE, {"model": "gpt2", "text": TEXT})
    check_page(at, [TEXT], PAGE)
    assert set(charts(at)) == PANELS and model_radio(at).value == "own"  # the shipped model serves meanwhile
    at.button(key="w_rh_download").click().run()
    check_page(at, [TEXT], "after Download")
    assert any("GPT-2 cannot be fetched from this server" in info.value for info in at.info)
    said = [re.search(r"It tries again in (\d+) s \(failed 1 time\)", info.value) for info in at.info]
    assert any(m and 0 < int(m.group(1)) <= real_models.RETRY_FIRST_S for m in said), [i.value for i in at.info]
    assert set(charts(at)) == PANELS and not download_buttons(at)  # no second try before then
    explorer = open_page("app.py", {"model": "gpt2", "layer": "0", "text": TEXT})
    check_page(explorer, [TEXT], "app.py?model=gpt2")
    assert explorer.session_state.settings.model == "own"
    assert any("GPT-2 cannot be fetched" in warning.value for warning in explorer.warning)


def test_a_long_sentence_is_capped_with_a_notice(tiny):
    long_text = "the for loop and the while loop " * 40
    at = open_page(PAGE, {"text": long_text})
    check_page(at, [], PAGE)
    cap = min(real_models.PAGE_TOKEN_CAP["own"], tiny[0].cfg["context_length"])
    cut = [w.value for w in at.warning if "tokens long" in w.value]
    assert len(cut) == 1 and f"reads the first {cap}" in cut[0], cut  # one warning, not two
    assert head_matrices(charts(at)["model_view"])[0].shape == (cap, cap)
    explorer = open_page("app.py", {"model": "own", "layer": "0", "text": long_text})
    check_page(explorer, [], "app.py, long text")
    assert explorer.session_state.settings.num_tokens == cap
    assert any("showing the first" in warning.value for warning in explorer.warning)


def test_typing_a_sentence_and_the_way_back(tiny):
    at = open_page(PAGE)
    at.text_input(key="w_rh_text").set_value("def main():").run()
    check_page(at, [], "typed")
    assert at.session_state.settings.text == "def main():" and at.query_params["model"] in ("own", ["own"])
    explorer = open_page("app.py", {"model": "own", "layer": "1", "text": TEXT})
    explorer.sidebar.selectbox(key="w_layer").set_value(0).run()
    check_page(explorer, [], "layer chosen in the sidebar")
    assert explorer.session_state.settings.layer == 0
    explorer.sidebar.button(key="w_forget_model").click().run()
    check_page(explorer, [], "back to seeded random weights")
    assert explorer.session_state.settings.model == "" and "model" not in explorer.query_params


def test_views_are_json_and_name_no_html(tiny):
    at = open_page(PAGE, {"text": "<script>alert(1)</script> <img src=x>"})
    check_page(at, ["<script>alert(1)</script>"], PAGE)
    for figure in charts(at).values():
        assert "<script" not in json.dumps(figure)


def test_presenter_mode_keeps_every_chart_and_drops_the_small_print(tiny):
    at = open_page(PAGE, {"presenter": "true"})
    check_page(at, [], f"{PAGE}?presenter=true")
    assert set(charts(at)) == PANELS
    assert not any("shape (L, h, T, T)" in caption.value for caption in at.caption)
    figure = charts(at)["model_view"]
    assert figure["layout"]["font"]["size"] > 15  # presenter fonts (figures.PRESENTER_SCALE)


@pytest.fixture
def gpt2_on_disk(monkeypatch):
    """GPT-2 "downloaded": a stand-in for mha_core.gpt.download serving the tiny GPT with bfloat16 storage."""
    import copy
    import types

    model, tokenizer = tiny_model()
    stored = copy.deepcopy(model).to(torch.bfloat16).eval()
    loads = []
    api = types.SimpleNamespace(
        gpt2_cached=lambda: True,
        load_gpt2=lambda: loads.append(1) or (stored, tokenizer),
        gpt2_bytes=gpt2_download.gpt2_bytes,
        GPT2Unavailable=OSError,
    )
    monkeypatch.setattr(real_models, "_gpt2_api", lambda: api)
    monkeypatch.setenv("MHA_SERVER_MB", "2700")  # Community Cloud's largest app
    return stored, loads


def model_radio(at):
    return next(radio for radio in at.radio if radio.key == "w_rh_model")


def test_gpt2_is_not_loaded_where_it_would_not_fit_beside_a_class(gpt2_on_disk, monkeypatch):
    """On Community Cloud's smallest app GPT-2 (257 MB kept) does not fit beside a warm server, full caches and one
    heavy job: even on disk it is not loaded, the shipped model serves and the radio says so. The notice said "this
    server's 690 MB leave 49 MB … (no MHA_SERVER_MB and no cgroup memory limit) … at least 898 MB"; now it says what
    GPT-2 needs, what the server has, and what to do, with a link to the deploy guide."""
    stored, loads = gpt2_on_disk
    monkeypatch.setenv("MHA_SERVER_MB", "690")
    at = open_page(PAGE, {"model": "gpt2", "text": TEXT})
    check_page(at, [TEXT], f"{PAGE}?model=gpt2 on 690 MB")
    assert set(charts(at)) == PANELS and not loads and not download_buttons(at)
    assert model_radio(at).value == "own"  # the model that serves, not the one the link asked for
    notice = next(info.value for info in at.info if "GPT-2 needs" in info.value)
    kept = gpt2_download.gpt2_bytes(real_models.TOKEN_CAP["gpt2"]).kept
    besides = budget.WARM_BYTES + budget.CACHE_BYTES + budget.JOB_BYTES  # a warm server, full caches, one heavy job
    needs = -(-(besides + kept) // (10 * budget.MB)) * 10  # MB, rounded up to tens
    assert notice.startswith(f"GPT-2 needs about {needs} MB; this server has 690 MB (set by MHA_SERVER_MB)."), notice
    assert f"]({real_models.DEPLOY_DOC})" in notice and "Our own model serves instead." in notice, notice
    assert not re.search(r"cgroup|leave \d+ MB|\d+ MB in bfloat16", notice), notice  # no jargon
    model_radio(at).set_value("gpt2").run()  # choosing GPT-2 again: the radio comes back, the notice stays
    check_page(at, [TEXT], "GPT-2 chosen on 690 MB")
    assert model_radio(at).value == "own" and not loads
    assert any("GPT-2 needs" in info.value for info in at.info)
    explorer = open_page("app.py", {"model": "gpt2", "layer": "0", "text": TEXT})
    check_page(explorer, [TEXT], "app.py?model=gpt2 on 690 MB")
    assert explorer.session_state.settings.model == "own" and not loads


def test_gpt2_once_here_serves_the_page_and_its_links_in_float32_from_bfloat16(gpt2_on_disk):
    stored, loads = gpt2_on_disk
    at = open_page(PAGE, {"model": "gpt2", "text": TEXT})
    check_page(at, [TEXT], f"{PAGE}?model=gpt2")
    record_only = {"training_curve", "milestones_induction", "milestones_copy"}  # the shipped model's record
    assert set(charts(at)) == PANELS - record_only and "GPT-2" in texts(at) and model_radio(at).value == "gpt2"
    query = dict(parse_qsl(urlsplit(next(u for u in links(at) if u.startswith("./?"))).query))
    assert query["model"] == "gpt2"
    explorer = open_page("app.py", query)
    check_page(explorer, [TEXT], f"app.py?{query}")
    trace = stored.trace_layer(torch.tensor([ids_of(TEXT, real_models.TOKEN_CAP["gpt2"])]), int(query["layer"]))
    weights = np.stack(head_matrices(charts(explorer)["attn_weights"]))
    np.testing.assert_array_equal(weights, trace.steps["attn_weights"][0].numpy())
    assert stored.trf_blocks[0].att.W_query.weight.dtype == torch.bfloat16  # the shared model was not touched
    assert loads == [1], "loaded once for every page and session"


def test_the_chosen_heads_circuits_link_opens_its_w_qk(tiny):
    from mha_core.attention import circuits

    model, _ = tiny
    at = open_page(PAGE, {"text": TEXT})
    url = next(u for u in links(at) if u.startswith("./Heads_and_references?"))
    query = dict(parse_qsl(urlsplit(url).query))
    assert query["part"] == "circuits" and query["model"] == "own"
    page = open_page("pages/2_Heads_and_references.py", query)
    check_page(page, [TEXT], f"circuits?{query}")
    layer, head = int(query["layer"]), int(query["head"])
    expected = circuits.circuits(model.attention_module(layer), [head]).w_qk[0].numpy()
    np.testing.assert_allclose(head_matrices(charts(page)["circuit_w_qk"])[0], expected, rtol=1e-5, atol=1e-7)


# the student's own sentence: scores, repeat, writing, knock-outs, composition (issue 32) ------------------------


def test_repeat_my_sentence_doubles_it_and_the_induction_score_reads_the_copy(tiny):
    model, tokenizer = tiny
    sentence = "def main():"
    at = open_page(PAGE, {"text": sentence})
    assert "induction" not in [t["meta"]["kind"] for t in charts(at)["text_scores"]["data"]]  # nothing repeats yet
    at.button(key="w_rh_repeat").click().run()
    check_page(at, [], "repeated")
    doubled = f"{sentence} {sentence}"
    assert at.session_state.settings.text == doubled and at.text_input(key="w_rh_text").value == doubled
    ids = tokenizer.encode(doubled)
    weights = model.attention_weights(torch.tensor([ids]))[:, 0]  # (L, h, T, T)
    targets = [(i, j) for i, j in enumerate(head_scores.repeat_targets(torch.tensor(ids), 3).tolist()) if j >= 0]
    by_hand = sum(weights[:, :, i, j] for i, j in targets) / len(targets)  # (L, h), a loop, not the library's
    figure = charts(at)["text_scores"]
    kinds = [t["meta"]["kind"] for t in figure["data"]]
    induction = head_matrices(figure)[kinds.index("induction")]
    np.testing.assert_allclose(induction, by_hand.numpy(), rtol=1e-5, atol=1e-6)


def test_continue_my_sentence_writes_the_books_greedy_text(tiny):
    model, tokenizer = tiny
    at = open_page(PAGE, {"text": TEXT})
    at.number_input(key="w_rh_write").set_value(12)
    at.button(key="w_rh_continue").click().run()
    check_page(at, [], "continued")
    ids = torch.tensor([tokenizer.encode(TEXT)])
    written = generation.generate_text_simple(model, ids, 12, model.cfg["context_length"])[0, ids.shape[1] :]
    expected = user_text.quote(tokenizer.decode(written.tolist()), limit=400)  # as the page prints user-facing text
    assert any(expected in m.value for m in at.markdown), expected


def test_a_knockout_link_silences_those_heads_and_the_loss_is_the_models(tiny):
    model, tokenizer = tiny
    at = open_page(PAGE, {"text": TEXT, "ablate": "0.1,1.3", "ablation": "mean"})
    check_page(at, [], "?ablate=0.1,1.3")
    assert at.multiselect(key="w_rh_ablate").value == ["L0 H1", "L1 H3"]
    ids = torch.tensor([tokenizer.encode(TEXT)])
    expected = head_scores.loss_per_position(
        knockout.forward_knocked_out(model, ids, [(0, 1), (1, 3)], "mean").logits, ids
    )
    series = {t["name"]: t["y"] for t in charts(at)["knockout_loss"]["data"]}
    np.testing.assert_allclose(series["without L0 H1, L1 H3"], expected[0].numpy(), rtol=1e-5, atol=1e-6)
    intact = head_scores.loss_per_position(model(ids), ids)[0].numpy()
    np.testing.assert_allclose(series["every head"], intact, rtol=1e-5, atol=1e-6)
    assert at.query_params["ablate"] in ("0.1,1.3", ["0.1,1.3"])
    weights = knockout.forward_knocked_out(model, ids, [(0, 1), (1, 3)], "mean").weights[:, 0]  # (L, h, T, T)
    rows = torch.arange(1, ids.shape[1])
    previous = weights[..., rows, rows - 1].mean(-1)  # (L, h) by hand: query i on key i - 1
    figure = charts(at)["knockout_scores"]
    kinds = [t["meta"]["kind"] for t in figure["data"]]
    np.testing.assert_allclose(head_matrices(figure)[kinds.index("previous token")], previous, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("raw", "said"),
    [("9.9", "no head 9.9"), ("0.x", "not layer.head"), ("1.1," * 200, "too long")]
    + [(raw, "not layer.head") for raw in ("².1", "١.١", "１.1", "0.−1", "\u00a00.1")],  # ASCII digits only
)
def test_a_bad_knockout_link_is_corrected_with_a_notice(tiny, raw, said):
    at = open_page(PAGE, {"text": TEXT, "ablate": raw})
    check_page(at, [], f"?ablate={raw[:20]}")
    assert any(said in warning.value for warning in at.warning), [w.value for w in at.warning]
    assert "knockout_loss" in charts(at)


def test_the_composition_heatmaps_are_the_library_s_scores(tiny):
    model, _ = tiny
    at = open_page(PAGE, {"text": TEXT})
    figure = charts(at)["composition"]
    expected = composition.composition(model).scores
    kinds = [trace["meta"]["kind"].split("-")[0] for trace in figure["data"]]
    assert kinds == ["Q", "K", "V"]
    for kind, matrix in zip(kinds, head_matrices(figure), strict=True):
        np.testing.assert_allclose(matrix, expected[kind].numpy(), rtol=1e-5, atol=1e-7)
    assert "K-composition" in texts(at) or "is not in layer 0" in texts(at)
