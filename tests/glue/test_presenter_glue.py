"""Presenter mode's glue helpers: wrapped code keeps its indentation, tables printed as text keep their formats."""

from __future__ import annotations

import re

import pandas as pd

from explorer.glue.frame.boundary import formatted_cells
from explorer.glue.frame.code_css import HANGING, HANGING_SHARE, MOST_HANGING, hanging_indent_css


def widths(css: str) -> dict[int, int]:
    """Line number → hanging width (ch) of each per-line rule (each also capped at HANGING_SHARE of the box)."""
    found = re.findall(r"nth-child\((\d+)\)[^{]*\{ padding-left: min\((\d+)ch, (\d+)%\)", css)
    assert all(int(share) == HANGING_SHARE for _, _, share in found), found
    return {int(n): int(w) for n, w, _ in found}


def test_each_wrapped_line_continues_under_its_own_indentation_capped_in_a_narrow_column():
    code = " class A:\n+    def f(self, x):\n         return x\n\n" + " " * 30 + "deep"
    css = hanging_indent_css("listing", code, line_numbers=True, marker=1)
    # line 1: the diff marker only; 2: marker + 4 spaces; 3: marker + 8; 4: blank (no rule); 5: capped
    assert widths(css) == {1: 1 + HANGING, 2: 5 + HANGING, 3: min(9 + HANGING, MOST_HANGING), 5: MOST_HANGING}
    assert ".st-key-listing code > span:nth-child(2) > span:last-child" in css  # the line's text, not its number
    plain = hanging_indent_css("step", "x = (1,\n     2)", line_numbers=False)
    assert widths(plain) == {2: 5 + HANGING} and "nth-child(2) {" in plain


def test_tables_as_text_keep_their_printf_formats_in_each_shape_a_page_passes():
    columns = {"step": ["a", "b"], "diff": [0.0, 1.5e-7], "n": [3, 4]}
    assert formatted_cells(columns, {"diff": "%.3e"}) == {
        "step": ["a", "b"],
        "diff": ["0.000e+00", "1.500e-07"],
        "n": [3, 4],
    }
    rows = [{"T": 64, "ms": 1.23456, "equal": True}]
    assert formatted_cells(rows, {}) == [{"T": 64, "ms": "1.235", "equal": True}]
    frame = pd.DataFrame({"0": [15, 0.5]}, index=["token", "weight"])
    shown = formatted_cells(frame, {"0": "%.2f"})
    assert list(shown.index) == ["token", "weight"] and list(shown["0"]) == ["15.00", "0.50"]


def test_wrapped_code_breaks_at_spaces_and_punctuation_never_inside_a_name():
    """Seen: `context_lengt|h`, `cont|iguous()`. A line breaks at spaces and after Python's punctuation tokens (a
    zero-width space drawn by CSS, not added to the copied text), never inside a word (overflow-wrap normal)."""
    from explorer.glue.frame.sidebar import PRESENTER_CSS

    css = hanging_indent_css("listing", "x = 1", line_numbers=True)
    assert "overflow-wrap: normal" in css and "anywhere" not in css and "overflow-x" not in css
    assert '.st-key-listing code .token.punctuation::after { content: "\\200b"; }' in css
    assert "keep-all" not in PRESENTER_CSS and "pre { overflow-x" not in PRESENTER_CSS


def test_the_listings_marked_lines_are_tinted_by_position():
    """The listing is highlighted as Python (its tokens give the break points), so the step's lines are tinted here."""
    from explorer.glue.frame.code_css import lit_lines_css

    css = lit_lines_css("step_listing", "  a = 1\n+ b = 2\n  c\n+ d")
    assert [int(n) for n in re.findall(r"nth-child\((\d+)\)", css)] == [2, 4]


def test_figure_text_the_figures_leave_uncoloured_is_drawn_at_4_5_to_1_or_more():
    """Seen: tick labels and axis titles in Streamlit's #808495, 3.7:1 on white, where the theme promises contrast.
    The chart element's template (chart.js) draws them in its palette's faded colour on either theme."""
    from explorer.glue.frame.chart import CHART_JS

    def luminance(color: str) -> float:
        channels = [int(color[k : k + 2], 16) / 255 for k in (1, 3, 5)]
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    def contrast(a: str, b: str) -> float:
        high, low = sorted((luminance(a), luminance(b)), reverse=True)
        return (high + 0.05) / (low + 0.05)

    palette = dict(re.findall(r'(light|dark): \{ faded: "(#[0-9a-f]{6})"', CHART_JS))
    assert contrast(palette["light"], "#ffffff") >= 4.5 > contrast("#808495", "#ffffff")
    assert contrast(palette["dark"], "#0b0d12") >= 4.5  # the dark theme's background (.streamlit/config.toml)
