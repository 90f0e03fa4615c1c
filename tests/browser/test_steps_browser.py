"""Step through's twelve steps, walked once per viewport as a presenter walks them: Page Down / Page Up (a clicker)
on a 1280 × 720 projector, the Next button at 1280 × 800. On every step no code breaks inside a name or number and
no code box scrolls (issue 21: `context_lengt|h`, `transpose(2|, 3)`); at step 7 every key of each head is labelled
(issue 21: presenter heatmaps labelled only "Your" of six keys); in presenter mode the steps' figures sit on the
first screen and the folded sidebar opens with nothing cut.
"""

from __future__ import annotations

import pytest

from .helpers import screenshot, settle
from .page_checks import (
    BOOK_TOKENS,
    BROKEN_WORD_JS,
    CUT_CODE_JS,
    PANEL_TICKS_JS,
    check_presenter_page,
    first_screen,
    open_page,
    open_sidebar,
)

pytestmark = pytest.mark.browser

STEPS = 12
# Presenter mode's keys and the step each leads to: forward, back one (Page Up), then forward to the last step.
KEYS = [("PageDown", 2), ("PageDown", 3), ("PageUp", 2), *[("PageDown", step) for step in range(3, STEPS + 1)]]
FIGURE_STEPS = {2, 3, 5}  # read for a main figure off the first screen (the rest: test_layout_browser's stages)


def code_problems(page, step: int) -> list[str]:
    problems = [f"step {step}: broken inside a word: {w}" for w in page.evaluate(BROKEN_WORD_JS)]
    return problems + [f"step {step}: {cut}" for cut in page.evaluate(CUT_CODE_JS)]


def labelled_keys(page, where: str) -> None:
    """Every panel that labels its keys with the book's tokens labels all six (read from the rendered SVG)."""
    panels = [ticks for ticks in page.evaluate(PANEL_TICKS_JS) if "Your" in ticks]
    assert panels, f"{where}: no panel labels its keys with the book's tokens"
    for ticks in panels:
        assert ticks == BOOK_TOKENS, f"{where}: {ticks}"


def arrived(page, step: int) -> None:
    """The step is in the URL, its run is over (a step may queue behind a training: at most its 60 s budget) and the
    step slider shows it (presenter mode's title too: "5/12 ...")."""
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('step') === '{step}'", timeout=150_000)
    settle(page, 150_000)
    assert page.locator(".st-key-step_number input[type='range']").input_value() == str(step)


def test_a_clicker_walks_the_steps_in_presenter_mode_and_each_fits_the_projector(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
    page = context.new_page()
    problems, seen = [], set()
    try:
        open_page(page, app_url, "Step_through", "step=1&presenter=true")
        problems += code_problems(page, 1)
        for key, step in KEYS:
            page.locator("h1").first.click()  # focus the page, not a widget
            page.keyboard.press(key)
            arrived(page, step)
            assert page.locator("h1").first.inner_text().startswith(f"{step}/{STEPS}"), key
            name = f"presenter_1280x720_step_through_{step}"
            if step in FIGURE_STEPS:
                problems += check_presenter_page(page, "step_through", f"step {step} after {key}")
            if step in seen:
                continue
            seen.add(step)
            problems += code_problems(page, step)
            if step == 5:
                sidebar = page.locator("[data-testid='stSidebar']").get_attribute("data-collapsed")
                problems += [] if sidebar == "true" else [f"{name}: the sidebar is open"]
                first_screen(page, name)
                screenshot(page, f"{name}_full")
                problems += open_sidebar(page, f"{name}_sidebar")  # reachable, and nothing in it cut
            if step == 7:
                labelled_keys(page, "Step through, presenter")
                screenshot(page, "labels_presenter_step7")
        assert seen == set(range(2, STEPS + 1)), seen
        first_screen(page, "presenter_1280x720_step_through_after_page_keys")
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_next_walks_the_steps_at_1280x800_with_every_key_labelled_and_no_code_cut(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
    page = context.new_page()
    problems = []
    try:
        open_page(page, app_url, "", "")
        labelled_keys(page, "Explorer")
        open_page(page, app_url, "Step_through", "step=1")
        problems += code_problems(page, 1)
        for step in range(2, STEPS + 1):
            page.get_by_role("button", name="Next").click()
            arrived(page, step)
            problems += code_problems(page, step)
            if step == 7:
                labelled_keys(page, "Step through")
                screenshot(page, "labels_normal_step7")
        assert page.get_by_role("button", name="Next").is_disabled()  # the last step
    finally:
        context.close()
    assert not problems, "\n".join(problems)
