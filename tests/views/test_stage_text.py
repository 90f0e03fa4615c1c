"""Presenter mode's stage prints cell values once its drawn cells hold them (issue 21, must-hold 1): the plan for
a 2 × 6 × 6 weights figure gives 50 px cells, too small for "0.00" at presenter type, but a 1920 × 1080 stage draws
them 73 px. The figure leaves what the stage needs (layout.meta.stage_text), heatmap_layout.stage_cell_text prints
the values on a copy and says from which stage size (width, height) the drawn cells hold them."""

from __future__ import annotations

import numpy as np

from explorer.views import figures as F
from explorer.views.figures import style
from explorer.views.figures.heatmap_layout import cell_text_px

WEIGHTS = np.random.default_rng(0).random((2, 6, 6)).astype(np.float32)
TOKENS = ["Your", "journey", "starts", "with", "one", "step"]


def _figure(presenter: bool = True, kind: str = "weights", values=WEIGHTS):
    return F.heads_heatmap(values, TOKENS, TOKENS, title="attn_weights", kind=kind, presenter=presenter)


def _drawn_cell(layout: dict, stage: tuple[float, float]) -> float:
    """A square cell's side in a figure stretched to ``stage`` (width, height) px: the smaller one the plot allows."""
    margin, (width, height) = layout["margin"], stage
    x_domain, y_domain = layout["xaxis"]["domain"], layout["yaxis"]["domain"]
    across = (width - margin["l"] - margin["r"]) * (x_domain[1] - x_domain[0]) / 6
    down = (height - margin["t"] - margin["b"]) * (y_domain[1] - y_domain[0]) / 6
    return min(across, down)


def _values_templates(figure) -> list:
    return [t.texttemplate for t in figure.data if (t.meta or {}).get("role") == "values"]


def test_a_stage_prints_the_values_from_the_size_whose_drawn_cells_hold_them():
    figure = _figure()
    assert _values_templates(figure) == [None, None]  # the planned cells do not hold "0.00"
    staged, min_width, min_height = F.stage_cell_text(figure)
    assert _values_templates(staged) == ["%{z:.2f}", "%{z:.2f}"]
    body = style.cell_font_size(True)  # the page's body type in presenter mode
    assert all(t.textfont.size == body for t in staged.data if (t.meta or {}).get("role") == "values")
    assert _values_templates(figure) == [None, None]  # the (cached, shared) figure is left as it was
    need = max(cell_text_px("0.00", presenter=True))
    layout = figure.layout.to_plotly_json()
    assert _drawn_cell(layout, (min_width, min_height)) >= need - 1e-9
    assert _drawn_cell(layout, (min_width, min_height - 2)) < need  # the least height: 2 px less and they spill
    assert _drawn_cell(layout, (min_width - 2, min_height + 500)) < need  # and the least width
    assert _drawn_cell(layout, (1230, 850)) >= need  # the Explorer's stage at 1920 × 1080 prints them


def test_no_stage_text_where_the_plan_prints_them_or_nothing_is_printed():
    assert F.stage_cell_text(_figure(presenter=False)) is None  # normal mode: only the planned size counts
    assert F.stage_cell_text(_figure(kind="mask", values=WEIGHTS > 0.5)) is None  # a mask prints no numbers
    two = F.heads_heatmap(WEIGHTS[:, :2, :2], TOKENS[:2], TOKENS[:2], title="t", kind="weights", presenter=True)
    assert _values_templates(two) == ["%{z:.2f}", "%{z:.2f}"] and F.stage_cell_text(two) is None  # printed already


def test_a_stage_that_prints_values_prints_minus_infinity_in_the_masked_cells():
    """Masked scores: the page prints "−∞" in the grey cells wherever it prints values; the stage did not (1080p
    step 6 printed 42 values and left 30 grey cells blank). "−∞" is shorter than any value, so it fits with them."""
    scores = np.random.default_rng(1).normal(size=(2, 6, 6)).astype(np.float32)
    scores[:, np.triu(np.ones((6, 6), dtype=bool), k=1)] = -np.inf
    staged = F.stage_cell_text(_figure(kind="scores", values=scores))[0]
    masked = [t for t in staged.data if (t.meta or {}).get("role") == "masked"]
    assert len(masked) == 2
    for layer in masked:
        text = np.asarray(layer.text)
        assert (text == "−∞").sum() == 15 and (text == "").sum() == 21  # the 15 cells above the diagonal only
        assert np.array_equal(text == "−∞", np.triu(np.ones((6, 6), dtype=bool), k=1))
        assert layer.texttemplate == "%{text}"
    assert len("−∞") < len("-0.00")
