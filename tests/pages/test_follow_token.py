"""Follow one token, out_proj as a sum over heads, and the head view: numbers from the trace, checked."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer.glue.state.settings import Settings
from explorer.views import figures, follow_a_token, head_view
from mha_core.attention.book import PRINTED_OUTPUT
from mha_core.runs import forward as runs

from ..apptest_helpers import charts, run_page, texts

PAGE = "pages/7_Follow_a_token.py"


def explorer_run(settings: Settings) -> runs.ExplorerRun:
    module = runs.build_module(settings.module_spec())
    x, labels = runs.build_input(settings.input_spec())
    return runs.run_explorer(module, x, labels, train=settings.train, seed=settings.seed, dropout=settings.dropout)


def follow(settings: Settings, token: int, batch_index: int = 0):
    run = explorer_run(settings)
    view = follow_a_token.build_token_view(
        run, token=token, batch_index=batch_index, presenter=False, book_example=settings.is_book_example()
    )
    return run, view


def test_journey_ends_at_the_books_printed_row():
    run, view = follow(Settings(), token=1)
    assert view.label == "journey"
    assert view.output_text == "[0.2943, 0.3897]"
    assert PRINTED_OUTPUT[1] == (0.2943, 0.3897) == view.book_row
    assert view.matches_book


@pytest.mark.parametrize(
    ("settings", "token", "b"),
    [
        (Settings(), 1, 0),
        (Settings(d_out=8, num_tokens=6), 4, 1),
        (Settings(num_heads=4, d_out=16, num_tokens=20, context_length=20), 19, 0),
    ],
)
def test_every_number_is_the_traces(settings, token, b):
    run, view = follow(settings, token, b)
    trace = run.trace
    h = trace.info["queries_heads"].shape[1]
    assert len(view.heads) == h
    for head in view.heads:
        k = head.head
        assert head.query == follow_a_token.vector_text(trace.numpy("queries_heads")[b, k, token])
        assert head.context == follow_a_token.vector_text(trace.numpy("context_heads")[b, k, token])
        assert head.visible == token + 1  # causal: keys 0..token
        weights = trace.numpy("attn_weights")[b, k, token]
        for row in head.rows:
            j = row.position
            assert row.key == follow_a_token.vector_text(trace.numpy("keys_heads")[b, k, j])
            assert row.value == follow_a_token.vector_text(trace.numpy("values_heads")[b, k, j])
            assert row.dot == float(trace.numpy("attn_scores")[b, k, token, j])
            assert row.scaled == float(trace.numpy("scaled_scores")[b, k, token, j])
            assert row.weight == float(weights[j])
        assert len(head.rows) + head.hidden_keys == head.visible
        assert len(head.rows) <= follow_a_token.SHOW_KEYS
    np.testing.assert_array_equal(view.output, trace.numpy("output")[b, token])


@pytest.mark.parametrize(
    "settings",
    [
        Settings(),
        Settings(num_heads=4, d_out=16, qkv_bias=True),
        Settings(num_heads=3, d_out=12, d_in=7, input="random"),
    ],
)
def test_out_proj_is_the_sum_of_per_head_contributions(settings):
    run, view = follow(settings, token=settings.num_tokens - 1)
    assert view.contributions.shape == (settings.num_heads, settings.d_out)
    total = view.contributions.sum(0) + view.bias
    np.testing.assert_allclose(total, run.trace.numpy("output")[0, -1], rtol=1e-5, atol=1e-6)
    assert view.sum_error < 1e-5
    figure = view.panels[1].figure
    bars = [t for t in figure.data if t.type == "bar"]
    assert [t.name for t in bars] == [f"head {k}" for k in range(settings.num_heads)] + ["bias"]


def test_the_head_view_draws_every_kept_weight_and_stays_bounded():
    run = explorer_run(Settings())
    view = head_view.build_head_view(run, batch_index=0, focus=1, presenter=False)
    weights = run.trace.numpy("attn_weights")[0]
    kept = weights >= head_view.BANDS[0][0]  # (h, T, T)
    top3 = weights >= -np.sort(-weights, axis=-1)[..., 2:3]  # each row's three heaviest keys
    top3[:, 1] = True  # the followed query's row: every kept line
    assert view.window == range(6) and view.lines == int((kept & top3).sum())
    big = np.random.default_rng(0).dirichlet(np.ones(1024), size=(16, 1024)).astype(np.float32)  # (h, T, T)
    fig = head_view.head_view_figure(big, [f"t{i}" for i in range(1024)], focus=100)
    assert figures.figure_nbytes(fig) < 2_500_000
    line_traces = [t for t in fig.data if t.mode == "lines" and t.x != (None,)]
    assert len(line_traces) <= 16 * len(head_view.BANDS)


def test_beyond_32_tokens_the_head_view_draws_a_labelled_window_around_the_followed_token():
    """Issue 21: at 16 heads x 256 tokens the lines filled the top fifth of the frame, with no token labels."""
    weights = np.random.default_rng(1).dirichlet(np.full(256, 0.02), size=(16, 256)).astype(np.float32)  # peaked
    labels = [f"t{i}" for i in range(256)]
    fig = head_view.head_view_figure(weights, labels, focus=100)
    queries = next(t for t in fig.data if t.name == "queries")
    assert list(queries.text) == [f"t{p} ({p})" for p in range(76, 108)]  # 32 tokens, the followed one 3/4 down
    assert tuple(fig.layout.yaxis.range) == (31.5, -0.5)  # the rows span the plot's height
    assert "tokens 76–107 of 256, around 't100'" in fig.layout.title.subtitle.text.replace("<br>", " ")
    ys = [y for t in fig.data if t.mode == "lines" for y in t.y if y is not None]
    assert min(ys) < 1 and max(ys) > 30  # lines from the first row to the last
    assert head_view.token_window(256, 250, presenter=False) == range(224, 256)  # the window stays inside
    assert head_view.token_window(256, None, presenter=True) == range(10)
    assert head_view.token_window(6, 3, presenter=True) == range(6)


def test_the_head_views_legend_sits_beside_the_plot_clear_of_its_subtitle():
    """Seen in presenter mode: "line strength = attention weight" printed over the "head 0 / head 1" legend."""
    fig = head_view.build_head_view(explorer_run(Settings()), batch_index=0, focus=None, presenter=True).panel.figure
    assert "line strength" in fig.layout.title.subtitle.text  # above the plot, under the title
    assert fig.layout.legend.x >= 1 and fig.layout.legend.xanchor == "left" and fig.layout.legend.orientation != "h"


def test_new_builders_pass_plotlys_validation_unchanged():
    import plotly.graph_objects as go

    _, view = follow(Settings(num_heads=4, d_out=8), token=3)
    run = explorer_run(Settings())
    built = [p.figure for p in view.panels] + [
        head_view.build_head_view(run, batch_index=0, focus=None, presenter=True).panel.figure
    ]
    for fig in built:
        sent = json.loads(fig.to_json())
        assert json.loads(go.Figure(fig.to_dict()).to_json()) == sent


def test_the_page_follows_journey_to_the_books_row_by_default():
    at = run_page(PAGE)
    assert not at.exception and not at.error
    shown = texts(at)
    assert "journey" in shown and "[0.2943, 0.3897]" in shown
    assert "prints as the book's output row 1" in shown
    assert {"head_view", "token_weights", "token_contributions"} <= set(charts(at))


def test_the_token_comes_from_the_url_and_a_bad_one_gets_a_notice():
    at = run_page(PAGE, token="3")
    assert at.session_state.follow_token == 3 and "with" in texts(at)
    at = run_page(PAGE, token="99")
    assert at.session_state.follow_token == 5
    assert "token" in texts(at) and not at.exception


def test_token_text_is_escaped_where_markdown_renders_it():
    """A token ``__init__`` rendered as a bold "init" in the heading (markdown not escaped); every markdown place that
    names the followed token now holds it backslash-escaped, and nothing names it raw."""
    at = run_page(PAGE, input="text", text="__init__ calls $x$ :red[y]", num_tokens="9", token="0")
    assert not at.exception and not at.error
    markdown = [e.proto.body for e in [*at.header, *at.markdown, *at.caption]]
    named = [body for body in markdown if "init" in body]
    assert any(body.startswith("Query 0: “\\_\\_init\\_\\_”") for body in named), named
    assert not [body for body in named if "__init__" in body], named


def test_a_bad_followed_head_says_no_head_is_followed():
    at = run_page(PAGE, head="NaN")
    warnings = [w.value for w in at.warning]
    assert "head=`NaN` is not a whole number; no head is followed." in warnings, warnings
    assert not any("using -1" in w for w in warnings)
    at = run_page(PAGE, head="77")
    assert "head=`77` is outside 0–1; using 1." in [w.value for w in at.warning]
