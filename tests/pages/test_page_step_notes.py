"""Step through's number-driven notes on the page (issue 22, items 3–4), and the Cost page's memory-vs-work note.

AppTest, opened by link: no error box, the charts drawn (read back from their spec), the link followed.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from ..apptest_helpers import charts, check_page, head_matrices, open_page, texts

STEP = "pages/1_Step_through.py"


pytestmark = pytest.mark.usefixtures("one_thread")


def test_step_5_explains_the_flat_scores_and_links_a_trained_previous_token_head():
    at = open_page(STEP, {"step": "5"}, timeout=60)
    check_page(at, [], "step 5")
    shown = texts(at)
    assert "Rank ≤ head_dim" in shown and "In head 0 every query is negative" in shown
    assert "step_attn_scores" in charts(at)
    button = next(b for b in at.get("link_button"))
    query = dict(parse_qsl(urlsplit(button.proto.url).query))
    assert query["trained"].startswith("previous_token.") and query["step"] == "5"
    trained = open_page(STEP, query, timeout=120)  # trains the first time (about 12 s on one core)
    check_page(trained, [], "the trained link")
    assert not trained.get("link_button")  # no link from a trained head to itself
    scores = np.stack(head_matrices(charts(trained)["step_attn_scores"]))  # (h, T, T), before the mask
    future = np.triu(np.ones(scores.shape[-2:], dtype=bool), k=1)
    tops = np.where(future, -np.inf, scores).argmax(-1)[:, 1:]  # each row's top visible key, rows 1…
    assert any((tops[k] == np.arange(tops.shape[1])).mean() > 0.8 for k in range(tops.shape[0]))  # previous token


def test_the_softmax_step_draws_the_sqrt_head_dim_charts():
    at = open_page(STEP, {"step": "7"}, timeout=60)
    check_page(at, [], "step 7")
    drawn = charts(at)
    assert {"scale_spread", "scale_top_weight", "step_attn_weights"} <= set(drawn)
    no_division = drawn["scale_top_weight"]["data"][0]
    assert no_division["name"] == "no division" and len(no_division["x"]) == 4


def test_cost_says_a_fused_kernel_saves_memory_not_work():
    at = open_page("pages/6_Cost.py", {}, timeout=60)
    check_page(at, [], "cost")
    shown = texts(at)
    assert "Memory and work are two things" in shown and "not sub-quadratic" in shown


def test_step_1_names_init_literally():
    """Step 1 read "the causal mask, built in **init**": markdown took ``__init__``'s underscores for bold. Rendered
    (markdown-it-py, CommonMark), every markdown string on the page that names it shows ``__init__`` as typed."""
    from markdown_it import MarkdownIt

    at = open_page(STEP, {"step": "1"}, timeout=60)
    check_page(at, [], "step 1")
    render = MarkdownIt("commonmark").render
    shown = [render(m.value) for m in at.markdown if "init" in m.value]
    assert any("built in <code>__init__</code>" in body for body in shown), shown
    assert not [body for body in shown if re.search(r"<(strong|em)>init", body)], shown
