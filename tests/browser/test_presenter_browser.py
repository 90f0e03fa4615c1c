"""Presenter mode in headless Chromium at 1280 × 720 (every page) and 1920 × 1080: the checks a projector needs.

A check fails when a page's main figure is not entirely on the first screen (Trained heads after a 10-step training,
Cost after measuring up to 128 tokens), when a table's text is not larger than the same page's text in normal mode
(or the table is drawn on a canvas, which CSS cannot enlarge), or when any text is clipped (a heading, caption,
metric, button, table header, sidebar page name or figure title wider than its box, or a slider's value on its knob).
Each page is opened once per size; Step through's steps are walked in test_steps_browser. Every screenshot is saved
under artifacts/screenshots/ (see helpers.SCREENSHOTS).
"""

from __future__ import annotations

import pytest

from .helpers import assert_charts, screenshot
from .page_checks import (
    BOOK_TOKENS,
    DRAWS_AT_ONCE,
    MAIN_FIGURE_PAGES,
    PAGES,
    PANEL_TICKS_JS,
    TABLE_FONTS_JS,
    TABLE_PAGES,
    check_presenter_page,
    first_screen,
    joined,
    open_page,
    press_for_results,
    table_font_problems,
)

pytestmark = pytest.mark.browser


def normal_mode_text_px(page, app_url: str, path: str, query: str, slug: str) -> float:
    """The largest text of the page in normal mode (its tables, on a canvas or in HTML, are no larger)."""
    open_page(page, app_url, path, query)
    press_for_results(page, slug)
    fonts = page.evaluate(TABLE_FONTS_JS)
    return max([fonts["text"], *fonts["cells"]])


def presenter_problems(page, app_url: str, slug: str, path: str, query: str, name: str) -> list[str]:
    """Open one page in presenter mode and read it: the sidebar folded, the first screen, the whole page."""
    open_page(page, app_url, path, joined(query, "presenter=true"))
    press_for_results(page, slug)
    if slug in DRAWS_AT_ONCE:
        assert_charts(page)
    problems = []
    if page.locator("[data-testid='stSidebar']").get_attribute("data-collapsed") != "true":
        problems.append(f"{name}: the sidebar is open")
    first_screen(page, name)
    problems += check_presenter_page(page, slug, name)
    screenshot(page, f"{name}_full")
    return problems


def test_presenter_mode_at_1280x720_fits_every_page_and_enlarges_its_tables(browser, app_url):
    """Every page but Step through (its twelve steps: test_steps_browser), each opened once in presenter mode; the
    pages with tables once more in normal mode, to compare their text size; the Explorer's heatmaps label all six
    keys (issue 21: presenter heatmaps labelled only "Your")."""
    context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
    page = context.new_page()
    problems = []
    try:
        for slug, path, query in PAGES:
            if slug == "step_through":
                continue
            name = f"presenter_1280x720_{slug}"
            problems += presenter_problems(page, app_url, slug, path, query, name)
            if slug == "explorer":
                panels = [ticks for ticks in page.evaluate(PANEL_TICKS_JS) if "Your" in ticks]
                assert panels, "Explorer: no panel labels its keys with the book's tokens"
                assert all(ticks == BOOK_TOKENS for ticks in panels), panels
            if slug in TABLE_PAGES:  # tables grow (at one size: the CSS is the same)
                fonts = page.evaluate(TABLE_FONTS_JS)
                problems += table_font_problems(fonts, name, normal_mode_text_px(page, app_url, path, query, slug))
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_presenter_mode_at_1920x1080_puts_each_main_figure_on_the_first_screen(browser, app_url):
    context = browser.new_context(viewport={"width": 1920, "height": 1080}, device_scale_factor=1)
    page = context.new_page()
    problems = []
    try:
        for slug, path, query in PAGES:
            if slug in MAIN_FIGURE_PAGES:
                problems += presenter_problems(page, app_url, slug, path, query, f"presenter_1920x1080_{slug}")
    finally:
        context.close()
    assert not problems, "\n".join(problems)
