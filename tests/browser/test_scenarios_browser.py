"""Every page at 8 heads × 64 tokens and the pages that run the module itself at the largest settings, and every page
in dark mode, at 1600 × 1000: photographed, no text cut, and dark figures on the dark theme. (The defaults at this
size: test_pages_browser's walk through the navigation.)"""

from __future__ import annotations

import pytest

from .helpers import screenshot
from .page_checks import (
    DARK_FIGURE_JS,
    DRAWS_AT_ONCE,
    MAIN_FIGURE_PAGES,
    PAGES,
    clipped_text,
    first_screen,
    joined,
    open_page,
)

pytestmark = pytest.mark.browser

SCENARIOS = {
    "8x64": "num_heads=8&d_out=64&num_tokens=64&context_length=64",
    "largest": "num_heads=16&d_out=1024&num_tokens=1024&context_length=1024&batch_size=1",
}
LARGEST_PAGES = {"explorer", "step_through"}  # the largest settings are slow: the pages that run the module itself


@pytest.mark.parametrize("scenario", ["8x64", "largest"])
def test_every_page_at_each_setting_is_photographed_with_no_text_cut(browser, app_url, scenario):
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    problems = []
    try:
        for slug, path, query in PAGES:
            if slug not in MAIN_FIGURE_PAGES or (scenario == "largest" and slug not in LARGEST_PAGES):
                continue
            name = f"{scenario}_{slug}"
            open_page(page, app_url, path, joined(query, SCENARIOS[scenario]))
            problems += [f"{name}: {p}" for p in clipped_text(page)]
            screenshot(page, name)
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_dark_mode_draws_figures_on_the_dark_theme(browser, app_url):
    """The visitor's system asks for dark: the app and its figures are dark, their text light (and nothing cut)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    problems = []
    try:
        for slug, path, query in PAGES:
            if slug not in MAIN_FIGURE_PAGES:
                continue
            name = f"dark_{slug}"
            open_page(page, app_url, path, query)
            problems += [f"{name}: {p}" for p in clipped_text(page)]
            if slug in DRAWS_AT_ONCE:
                problems += [f"{name}: {p}" for p in page.evaluate(DARK_FIGURE_JS)]
            screenshot(page, name)
            first_screen(page, f"{name}_first_screen")
    finally:
        context.close()
    assert not problems, "\n".join(problems)
