"""Issue 20: figures carry the margins plotly.js's automargin would push, so plotly lays each out and draws it once.

The pinned numbers are plotly's own margins for the Explorer's defaults, read in headless Chromium with Streamlit's
Source Sans (``gd._fullLayout._size``): the held margins must reach them (else plotly draws again) and exceed them by
a few pixels at most (else the plot shrinks visibly).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer.views import attention_explorer
from explorer.views import figures as F
from explorer.views.figures import heatmap_layout, margins, text_width
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


def test_margins_size_labels_by_the_one_text_width_estimate_the_layout_uses():
    """The margins and the layout (labels turned, ticks thinned) once estimated widths apart (0.48 against 0.55 em a
    lower-case letter); both read ``text_width`` now, so a y axis's margin is its widest label by that estimate."""
    labels = ["mmm", "journey", "&lt;|endoftext|&gt;", "<b>ab</b>"]
    for font in (15, 24):
        layout = {"margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "font": {"size": font}, "yaxis": {"ticktext": labels}}
        need = max(text_width.text_px(label, font) for label in labels) + 1.35 * font
        assert margins.hold_margins(layout, [])["l"] == math.ceil(need) + margins.MARGIN_SLACK_PX
        assert heatmap_layout.tick_text_px(labels, True, font == 24) == pytest.approx(need - 0.75 * font)


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
