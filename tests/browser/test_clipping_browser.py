"""Nothing cut, nothing on top of other text (issue 42, item 3): every page and every tab at 1280 × 800 in the light
and the dark theme, and in presenter mode at 1280 × 720 and 1920 × 1080; Step through's twelve steps in presenter
mode at 1280 × 720, each with its heading, main figure and first lines of explanation on the first screen.

What is read (tests/browser/layout_checks.py and page_checks.clipped_text): a tab past its tab list's edge, a
heading or caption wider than its box, any text of a chart outside the chart (titles, subtitles), and two texts of one
chart that overlap (subtitles, legend, colour-bar labels, cell numbers), and cell numbers smaller than the page's body
type. Screenshots of each first screen are saved
under artifacts/screenshots/clipping_*.png.
"""

from __future__ import annotations

import pytest

from .helpers import settle
from .layout_checks import STEP_FIRST_SCREEN_JS, layout_problems, small_cell_numbers
from .page_checks import PAGES, clipped_text, first_screen, joined, open_page, press_for_results

pytestmark = pytest.mark.browser

MODES = {  # name: (width, height, colour scheme, query)
    "1280x800": (1280, 800, "light", ""),
    "dark": (1280, 800, "dark", ""),
    "presenter-720p": (1280, 720, "light", "presenter=true"),
    "presenter-1080p": (1920, 1080, "light", "presenter=true"),
}


def page_problems(page, name: str) -> list[str]:
    """Every tab of the page in turn, each read as shown (a closed tab's charts are read when it opens)."""
    tabs = page.locator("[data-testid='stMain'] [role='tab']")
    problems = []
    for k in range(max(tabs.count(), 1)):
        if tabs.count():
            tabs.nth(k).click()
            settle(page)
        where = f"{name} tab {k}"
        first_screen(page, f"clipping_{where.replace(' ', '_')}")
        problems += [f"{where}: {p}" for p in layout_problems(page) + clipped_text(page) + small_cell_numbers(page)]
    return problems


@pytest.mark.parametrize("mode", list(MODES))
def test_no_text_is_cut_or_overlaps_on_any_page_or_tab(browser, app_url, mode):
    width, height, scheme, query = MODES[mode]
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = context.new_page()
    problems = []
    try:
        for slug, path, own in PAGES:
            open_page(page, app_url, path, joined(own, query))
            press_for_results(page, slug)
            problems += page_problems(page, f"{mode} {slug}")
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_each_step_fits_a_720p_projector_with_its_words(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    problems = []
    try:
        for step in range(1, 13):
            open_page(page, app_url, "Step_through", f"step={step}&presenter=true")
            first_screen(page, f"clipping_step_{step}_presenter_720p")
            place = page.evaluate(STEP_FIRST_SCREEN_JS)
            for part in ("heading", "figure", "sentence"):
                if place[part] is None or place[part] > place["height"]:
                    problems.append(f"step {step}: its {part} at y {place[part]} is below the first screen")
            problems += [f"step {step}: {p}" for p in layout_problems(page) + clipped_text(page)]
    finally:
        context.close()
    assert not problems, "\n".join(problems)


POSITION_LINKS = ["positions=alibi&num_heads=4&head_dim=4", "positions=rope&num_heads=2&head_dim=8&shuffle=1"]


@pytest.mark.parametrize("query", POSITION_LINKS, ids=["alibi", "rope"])
def test_the_position_knobs_side_by_side_figures_keep_their_labels_apart(browser, app_url, query):
    """The Positions tab draws each pair without | with in half the column: at 4 heads the panels once ran their
    titles and token labels together ("head 0head 1head 2head 3")."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        open_page(page, app_url, "", f"{query}&section=positions")
        problems = page_problems(page, f"explorer {query}")
    finally:
        context.close()
    assert not problems, "\n".join(problems)
