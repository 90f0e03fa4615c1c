"""Hostile input on every page, part 1 of 3: Hypothesis writes the URL (test_fuzz_widgets moves the widgets and types
the sentence, test_fuzz_forged sends hand-made widget values; the inputs are in fuzz_inputs).

Pages are discovered (app.py and pages/*.py), so a page added later is fuzzed too; each page's own URL
parameters are read from its source (``url_int``, ``url_choice``, ``seed_int``, ``seed_choice``,
``sync_url(..., name=...)``). After every run, on every page:

* no exception reached Streamlit (the page boundary or the page itself must catch and explain);
* nothing from the URL or the sentence box can render as HTML: markdown-rendered text (markdown, captions,
  alerts, headings) holds no raw ``<script>``, ``<img>``, ``<iframe>``, ``<svg>`` or ``javascript:`` outside code
  spans, elements that allow HTML hold no user text at all, and no string in a figure's JSON holds such a tag;
* no NaN reaches the display unannounced: a NaN cell of a heatmap is covered by a "masked" or "nan" overlay
  (the figures' contract, see explorer.views.figures), and a printed "nan" comes with a notice that says NaN.

At least 300 examples run in total (more with more pages). Drawn sizes are bounded (b·h·T² ≤ 2²¹ attention cells),
so one example costs well under a second; the fixed set adds the largest link (2²⁷ cells in float64), which every
page fits to the byte budget; the peaks of the largest settings are tests/server/test_memory_budget.py's business.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from ..apptest_helpers import CODE_SPANS, DANGEROUS, PAGES, ROOT, check_page, open_page, strings, unannounced_nan
from .fuzz_inputs import (
    FUZZ,
    HOSTILE,
    MARKER,
    QUERY_EXAMPLES,
    SENTENCE_EXAMPLES,
    WIDGET_EXAMPLES,
    WORST_LINK,
    page_params,
    query_strategy,
    too_big,
    user_strings,
)

# --- 1. the URL -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
@settings(max_examples=QUERY_EXAMPLES, **FUZZ)
@given(data=st.data())
@example(data=None)  # the fixed hostile set below, on every page
def test_hostile_query_strings_render_safely_on_every_page(page, data):
    if data is None:
        queries = [
            {"seed": "1e309", "num_heads": "NaN", "d_in": "-inf", "num_tokens": "-5", "dropout": "1e309"},
            {"seed": "9" * 40, "batch_size": "-" + "9" * 40, "text": HOSTILE[27], "input": "text"},
            {"num_heads": ["1", "<script>alert(1)</script>"], "device": "cuda", "dtype": "bfloat16"},
            {name: f"<img src=x onerror=alert('{MARKER}')>" for name in sorted(page_params(page) | {"presenter"})},
            {"text": MARKER * 2000, "input": "text", MARKER: MARKER, "": ""},
            {"model": HOSTILE[27], "layer": "-1", "head": "٣", "text": HOSTILE[28]},  # a real model's link
            {"model": ["own", "gpt2"], "layer": "9" * 40, "head": "1e309", "text": HOSTILE[-1], "trained": "x"},
            WORST_LINK,  # over the fuzz budget: the page fits it to the byte budget, with a notice
        ]
    else:
        queries = [data.draw(query_strategy(page), label="query")]
    for query in queries:
        if data is not None:
            assume(not too_big(query))  # a drawn URL that is too big is redrawn (time); the fixed ones all run
        at = open_page(page, query)
        check_page(at, user_strings(query), f"{page}?{query}"[:500])
        at.run()  # the rerun after the URL was rewritten must hold too
        check_page(at, user_strings(query), f"{page} (rerun)")


def test_pages_are_discovered():
    assert PAGES[0] == "app.py"
    assert all((ROOT / page).is_file() for page in PAGES)
    assert QUERY_EXAMPLES * len(PAGES) + WIDGET_EXAMPLES + SENTENCE_EXAMPLES >= 300


def test_the_checks_catch_what_they_are_for():
    """The checker itself: a bare NaN, an unquoted tag, a tag in a figure; and no alarm on the safe forms."""
    from explorer.views import figures

    z = np.array([[[0.5, np.nan], [0.25, 0.75]]], dtype=np.float32)
    figure = json.loads(figures.heads_heatmap(z, ["a", "b"], ["a", "b"], title="t", kind="weights").to_json())
    assert unannounced_nan(figure) == []  # the NaN cell is covered by the magenta overlay, named in the legend
    bare = dict(figure, data=[t for t in figure["data"] if (t.get("meta") or {}).get("role") != "nan"])
    assert unannounced_nan(bare)
    assert not DANGEROUS.search(CODE_SPANS.sub("", "seed=`<script>alert(1)</script>` is not a whole number"))
    assert DANGEROUS.search(CODE_SPANS.sub("", "seed=<script>alert(1)</script> is not a whole number"))
    assert DANGEROUS.search(CODE_SPANS.sub("", "[x](javascript:alert(1))"))
    labels = json.loads(figures.heads_heatmap(z, ["<script>", "b"], ["a", "b"], title="t", kind="weights").to_json())
    assert not [s for s in strings(labels) if DANGEROUS.search(s)]  # token labels are escaped by the builders
