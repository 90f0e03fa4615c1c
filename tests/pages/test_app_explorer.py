"""The Explorer page through AppTest: its widgets, its URL, and the numbers it shows."""

import numpy as np
import pytest
import torch

from explorer.glue.state.settings import Settings, parse_query, to_query
from mha_core.attention.book import PRINTED_OUTPUT
from mha_core.runs import forward as runs

from ..apptest_helpers import chart_elements, chart_places, charts, head_matrices, printed, run_page, texts

APP = "app.py"


def module_trace(settings: Settings):
    module = runs.build_module(settings.module_spec())
    x, labels = runs.build_input(settings.input_spec())
    return runs.run_trace(module, x, train=settings.train, seed=settings.seed), labels


def test_defaults_show_the_books_output_and_say_it_matches():
    at = run_page(APP)
    assert not at.exception
    shown = texts(at)
    assert "matches the book's printed output" in shown
    assert "[0.3190, 0.4858] … [0.2575, 0.4028]" in shown
    assert any("0.3190, 0.4858" in text and "0.2575, 0.4028" in text for text in printed(at))
    assert not at.code  # boundary.printed: st.code would load Streamlit's syntax highlighter for numbers
    assert at.session_state.settings == Settings()
    assert PRINTED_OUTPUT[0] == (0.3190, 0.4858)


def test_one_weight_heatmap_per_head_with_the_modules_own_values():
    at = run_page(APP, num_heads="4", d_out="8", num_tokens="9")
    assert not at.exception
    settings = at.session_state.settings
    assert (settings.num_heads, settings.d_out, settings.num_tokens) == (4, 8, 9)
    figures = charts(at)
    trace, _ = module_trace(settings)
    weights = head_matrices(figures["attn_weights"])
    assert len(weights) == 4
    for head, shown in enumerate(weights):
        np.testing.assert_array_equal(shown, trace.numpy("attn_weights")[0, head])
    scores = head_matrices(figures["attn_scores"])
    np.testing.assert_array_equal(np.stack(scores), trace.numpy("attn_scores")[0])
    masked = head_matrices(figures["masked_scores"])
    above = np.triu(np.ones((9, 9), dtype=bool), k=1)
    assert all(np.isnan(m[above]).all() and np.isfinite(m[~above]).all() for m in masked)  # −∞ drawn apart
    assert head_matrices(figures["masked_scores"], role="masked")  # ... by an overlay of its own


def test_captions_give_shapes_and_listing_lines():
    at = run_page(APP)
    captions = [c.value for c in at.caption]
    assert any("attn_weights" in c and "(2, 2, 6, 6)" in c and "torch.softmax" in c for c in captions)
    at = run_page(APP, section="reshapes")
    captions = [c.value for c in at.caption]
    assert any("`queries`" in c and "(2, 6, 2)" in c and "self.W_query(x)" in c for c in captions)
    assert any("context_heads" in c and "(2, 2, 6, 1)" in c for c in captions)


def test_only_the_open_section_is_drawn_and_sent():
    at = run_page(APP)
    attention = set(charts(at))
    assert {"attn_scores", "attn_weights", "masked_scores"} <= attention
    assert not attention & {"queries", "output", "out_proj"}
    at = run_page(APP, section="reshapes")
    reshapes = set(charts(at))
    assert {"queries", "context", "out_proj", "output"} <= reshapes
    assert not reshapes & attention
    assert at.query_params["section"] in ("reshapes", ["reshapes"])  # the open section stays in the link
    at = run_page(APP, section="downloads")
    assert not chart_elements(at)
    assert at.get("download_button")


def test_presentation_choices_reuse_the_computed_run(monkeypatch):
    """Presenter mode, the batch element, an enlarged head and the section redraw from the cached run."""
    from mha_core.runs import forward as runs

    calls = []
    original = runs.run_explorer
    monkeypatch.setattr(runs, "run_explorer", lambda *a, **k: calls.append(1) or original(*a, **k))
    query = dict(input="random", num_tokens="7", batch_size="2", seed="4242")
    run_page(APP, **query)
    assert len(calls) == 1
    for extra in ({"presenter": "true"}, {"view_batch": "1"}, {"head": "0"}, {"section": "reshapes"}):
        at = run_page(APP, **query, **extra)
        assert not at.exception and chart_elements(at)
    assert len(calls) == 1  # four presentations, one forward pass


@pytest.mark.parametrize(
    "query, expected_notice",
    [
        ({"seed": "1e309"}, "seed=`1e309` is not a whole number"),
        ({"seed": "-inf"}, "seed=`-inf` is not a whole number"),
        ({"num_heads": "abc"}, "num_heads=`abc` is not a whole number"),
        ({"num_heads": "99"}, "num_heads=`99` is outside 1–16; using 16"),
        ({"num_heads": "2", "d_out": "7"}, "d_out=7 is not divisible by num_heads=2; using d_out=8"),
        ({"num_heads": "8"}, "You set num_heads=8; the default d_out=2 cannot be split into 8 heads"),  # was d_out's
        ({"device": "cuda"} if not torch.cuda.is_available() else {"device": "tpu"}, "using cpu"),
        ({"dropout": "NaN"}, "dropout=`NaN` is not a number"),
        ({"num_tokens": "0"}, "num_tokens=`0` is outside 1–1024; using 1"),
    ],
)
def test_bad_url_values_are_replaced_with_a_notice(query, expected_notice):
    at = run_page(APP, **query)
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any(expected_notice in w for w in warnings), warnings
    places = chart_places(at)
    at.run()  # the notice is shown once: gone now, and no chart moved (each is updated in the browser, not redrawn)
    assert not at.warning and chart_places(at) == places


def test_url_text_is_never_rendered_as_html():
    at = run_page(APP, num_heads="<script>alert(1)</script>", input="text", text="<img src=x onerror=alert(1)> hi")
    assert not at.exception
    for element in list(at.markdown) + list(at.warning):
        body = str(element.value)
        assert "<script" not in body.replace("`<script", "")  # only ever inside a code span
    assert at.session_state.settings.num_heads == 2


def test_widgets_rerun_the_module_and_the_url_follows():
    at = run_page(APP)
    at.slider(key="w_num_heads").set_value(4).run()
    assert not at.exception
    settings = at.session_state.settings
    assert settings.num_heads == 4 and settings.d_out == 4  # head_dim 1 kept, d_out = 4 × 1
    assert at.query_params["num_heads"] == ["4"] or at.query_params["num_heads"] == "4"
    assert len(head_matrices(charts(at)["attn_weights"])) == 4
    at.slider(key="w_num_tokens").set_value(10).run()
    settings = at.session_state.settings
    assert settings.num_tokens == 10 and settings.context_length == 10  # context_length rose with a notice
    assert any("raised to 10" in w.value for w in at.warning)


def test_url_round_trip_reopens_the_same_view():
    wanted = parse_query(
        {
            "num_heads": "3",
            "d_out": "12",
            "num_tokens": "7",
            "input": "text",
            "text": "the cat sat on the mat .",
            "seed": "9",
            "dropout": "0.2",
            "train": "true",
            "batch_size": "3",
            "qkv_bias": "true",
        }
    )[0]
    at = run_page(APP, **to_query(wanted))
    assert not at.exception
    assert at.session_state.settings == wanted
    written = {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert {k: written[k] for k in to_query(wanted)} == to_query(wanted)
    figures = charts(at)
    assert "attn_weights_dropped" in figures  # dropout > 0 in train mode shows the dropped weights
    trace, labels = module_trace(wanted)
    assert labels[:3] == ["the", "cat", "sat"]
    np.testing.assert_array_equal(
        head_matrices(figures["attn_weights_dropped"])[1], trace.numpy("attn_weights_dropped")[0, 1]
    )


def test_batch_element_and_enlarged_head_are_selectable():
    at = run_page(APP, input="random", num_tokens="5", batch_size="3", view_batch="2", head="1")
    assert not at.exception
    figures = charts(at)
    assert "enlarged_head" in figures
    trace, _ = module_trace(at.session_state.settings)
    np.testing.assert_array_equal(head_matrices(figures["enlarged_head"])[0], trace.numpy("attn_weights")[2, 1])


def test_trained_weights_open_in_the_explorer():
    """?trained=<spec> shows a trained layer: its heads attend to the previous token."""
    spec = "previous_token.heads2.layers1.d32.vocab16.len16.steps200.batch64.lr1e-2.seed0.cpu.layer0"
    at = run_page(APP, trained=spec)
    assert not at.exception
    settings = at.session_state.settings
    assert (settings.trained, settings.num_heads, settings.d_in, settings.num_tokens) == (spec, 2, 32, 16)
    weights = head_matrices(charts(at)["attn_weights"])
    assert max(float(np.diag(w, k=-1).mean()) for w in weights) >= 0.8


def test_a_bad_trained_spec_falls_back_to_random_weights_with_a_notice():
    at = run_page(APP, trained="previous_token.<b>")
    assert not at.exception
    assert at.session_state.settings.trained == ""
    assert any("is not a trained model" in w.value for w in at.warning)


def test_the_front_page_says_where_to_start_with_links_to_real_pages():
    """Two paths (a first visit, a class), one row each, every link a page of pages/ in the path's order."""
    from pathlib import Path

    from explorer.glue.frame.sidebar import START_PATHS

    root = Path(__file__).resolve().parents[2]
    at = run_page(APP)
    assert not at.exception
    links = [link.proto for link in at.main.get("page_link")]
    assert [link.label for link in links] == [
        "Step through",
        "Follow a token",
        "Heads and references",
        "Real heads",
        "Step through",
        "Masks and cross-attention",
        "Knobs that teach",
        "Trained heads",
    ]
    scripts = [script for _, _, path in START_PATHS for script in path]
    for link, script in zip(links, scripts, strict=True):
        assert (root / script).is_file(), script
        assert script.endswith(f"_{link.page}.py"), (link.page, script)  # the URL path opens that file
    assert {m.value for m in at.markdown} >= {"**Start here:**", "**With a class:**"}
    presenter = run_page(APP, presenter="true")
    assert not presenter.main.get("page_link")  # a projector shows the module, not the menu
