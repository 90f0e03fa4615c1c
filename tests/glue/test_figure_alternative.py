"""A chart's text alternative in the glue: described and tabled once per figure object, the user's token text
escaped in the table's HTML, and the contrast CSS every page gets (explorer/glue/frame/contrast.py)."""

from __future__ import annotations

import gc
import re

import numpy as np

from explorer.glue.frame import boundary, contrast
from explorer.views import figures


def token_figure():
    weights = np.full((1, 2, 2), 0.5, dtype=np.float32)
    labels = ["<s>", "ok"]
    return figures.heads_heatmap(weights, labels, labels, title="Weights", kind="weights", head_names=["head 0"])


def test_a_figure_is_described_and_tabled_once_and_forgotten_with_it():
    figure = token_figure()
    first = boundary.alternative(figure, "Attention weights")
    assert boundary.alternative(figure, "Attention weights") is first  # the cache's own tuple: nothing made again
    words, table, note = first
    assert words.startswith("Attention weights. Heatmap of 2 rows (query) by 2 columns (key).") and note == ""
    assert "<s>" not in table and table.count("<td>&lt;s&gt;</td>") == 1  # the token as typed, escaped once
    assert table.count("<th>&lt;s&gt;</th>") == 1
    assert table.count("<td>0.5</td>") == 4
    key = id(figure)
    del figure
    gc.collect()
    assert key not in boundary._ALTERNATIVE_OF


def test_every_code_colour_is_mixed_towards_the_text_and_dark_buttons_get_dark_text():
    light, dark = contrast.contrast_css("light"), contrast.contrast_css("dark")
    mixed = re.findall(r"color-mix\(in srgb, (#[0-9a-f]{6}) (\d+)%, currentColor\)", light)
    assert sorted(colour for colour, _ in mixed) == sorted(contrast.CODE_TOKENS.values())
    assert {int(share) for _, share in mixed} == {100 - contrast.TOWARDS_INK}
    assert "stBaseButton-primary" in dark and "stBaseButton-primary" not in light
    assert contrast.DISABLED_LABEL["light"] in light and contrast.DISABLED_LABEL["dark"] in dark
