"""Issue 20: figures carry the margins plotly.js's automargin would push, so plotly lays each out and draws it once.

The pinned numbers are plotly's own margins for the Explorer's defaults, read in headless Chromium with Streamlit's
Source Sans (``gd._fullLayout._size``): the held margins must reach them (else plotly draws again) and exceed them by
a few pixels at most (else the plot shrinks visibly).
"""

from __future__ import annotations

import numpy as np

from explorer.views import attention_explorer
from explorer.views import figures as F
from explorer.views.figures import heatmap_layout, margins
from tests.views.test_figure_speed import run_at

# title → plotly's (l, r, b) at the defaults (2 heads × 6 tokens, normal mode, 1600 × 1000 window)
PLOTLY_MARGINS = {
    "attn_scores": (98, 134, 109),
    "mask buffer": (57, 160, 52),
    # plotly needed b = 95 here (its square cells left the turned labels room inside the plot area); 113 is held, so
    # this figure is 18 px taller, with the same plot
    "mask[:T, :T]": (98, 160, 113),
    "masked_scores": (98, 136, 109),
    "attn_weights · batch": (98, 115, 109),
}


def test_the_defaults_figures_hold_plotlys_own_margins_within_a_few_pixels():
    view = attention_explorer.build_view(run_at(), section="attention", batch_index=0, enlarge=None, presenter=False)
    checked = 0
    for panel in view.figures():
        layout = panel.figure.layout
        for start, expected in PLOTLY_MARGINS.items():
            if layout.title.text.replace("<b>", "").startswith(start):
                held = (layout.margin.l, layout.margin.r, layout.margin.b)
                for side, have, want in zip("lrb", held, expected, strict=True):
                    assert want - 1 <= have <= want + 10, (start, side, have, want)
                checked += 1
    assert checked == len(PLOTLY_MARGINS)


def test_label_widths_are_estimated_from_above_for_digits_and_the_measured_words():
    # Chromium, Source Sans at 15 px: "0" 7.5, "-0.268" 38.2, "journey" 47.9, "may attend" 71.0
    for text, measured in (("0", 7.5), ("-0.268", 38.2), ("journey", 47.9), ("may attend", 71.0)):
        assert measured <= margins._label_px([text], 15) <= measured * 1.08, text


def test_a_margin_only_grows_and_a_phone_layout_gives_the_bar_room_back():
    layout = {"margin": {"l": 300, "r": 10, "t": 50, "b": 10}, "font": {"size": 15}}
    layout["yaxis"] = {"ticktext": ["a"], "title": {"text": "q"}}
    margins.hold_margins(layout, [])
    assert layout["margin"]["l"] == 300
    wide = F.heads_heatmap(
        np.random.default_rng(0).random((2, 6, 6)), list("abcdef"), list("abcdef"), title="w", kind="weights"
    )
    assert wide.layout.margin.r > 100
    assert heatmap_layout.one_column(wide).layout.margin.r == 10
