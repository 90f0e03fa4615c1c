"""The Real heads page in Chromium: it draws every chart, and a head's link opens that layer in the Explorer."""

from __future__ import annotations

import pytest

from .helpers import assert_charts, assert_no_exception, screenshot, wait_for_app

pytestmark = pytest.mark.browser

CHARTS = 4  # the top 5, the model view, the head scores, the induction probe


def test_real_heads_draws_its_charts_and_a_head_link_opens_the_explorer(page, app_url):
    page.goto(f"{app_url}/Real_heads")
    wait_for_app(page, timeout=120_000)
    assert_no_exception(page)
    assert_charts(page, minimum=CHARTS)
    assert page.locator(".mha-chart svg.main-svg").count() >= CHARTS
    screenshot(page, "page_real_heads_full")
    link = page.get_by_role("link", name="in Explorer").first
    href = link.get_attribute("href") or ""
    assert "model=own" in href and "layer=" in href and "head=" in href, href
    link.click()
    page.wait_for_url("**/?*model=own*", timeout=60_000)
    wait_for_app(page, timeout=120_000)
    assert_no_exception(page)
    assert_charts(page)
    assert page.get_by_text("of a real GPT").count() >= 1  # the explorer says whose layer it traces
    screenshot(page, "page_real_heads_explorer")


def test_typing_a_sentence_redraws_the_heads(page, app_url):
    page.goto(f"{app_url}/Real_heads?model=own&text=def%20f(x)%3A%20return%20x")
    wait_for_app(page, timeout=120_000)
    box = page.get_by_label("Type a sentence")
    box.fill("for item in items: print(item)")
    box.press("Enter")
    page.wait_for_function("() => location.search.includes('print')", timeout=60_000)
    wait_for_app(page, timeout=120_000)
    assert_no_exception(page)
    assert_charts(page, minimum=CHARTS)


def test_the_arrow_keys_step_the_position_read_character_by_character(page, app_url):
    """Issue 46: ?pos= opens that position; the right arrow on the slider reads the next one (URL and figure)."""
    page.goto(f"{app_url}/Real_heads?model=own&pos=20&text=The%20cat%20sat%20on%20the%20mat.%20The%20cat%20sat")
    wait_for_app(page, timeout=120_000)
    assert_no_exception(page)
    title = page.locator(".st-key-chart_position_text .gtitle")
    title.wait_for(timeout=60_000)
    assert "from token 20" in title.text_content()
    slider = page.locator("[data-testid='stSlider']").filter(has_text="token to read from").locator("input")
    slider.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => new URLSearchParams(location.search).get('pos') === '21'", timeout=60_000)
    wait_for_app(page, timeout=120_000)
    assert_no_exception(page)
    page.wait_for_function(
        "() => (document.querySelector('.st-key-chart_position_text .gtitle') || {}).textContent?.includes('token 21')",
        timeout=60_000,
    )
    screenshot(page, "page_real_heads_character")


def test_clicking_a_token_on_the_text_reads_from_it(page, app_url):
    """Issue 46, item 3: a click on a character of the sentence drawn as text chooses the position (URL and figure)."""
    page.goto(f"{app_url}/Real_heads?model=own&pos=20&text=The%20cat%20sat%20on%20the%20mat.%20The%20cat%20sat")
    wait_for_app(page, timeout=120_000)
    text = page.locator(".st-key-chart_position_text")
    text.locator(".gtitle").wait_for(timeout=60_000)
    glyphs = text.locator(".scatterlayer .textpoint text")
    assert glyphs.count() == 35, glyphs.count()  # every byte of "The cat sat on the mat. The cat sat", in order
    glyph = glyphs.nth(5)  # the "a" of the first "cat"
    glyph.evaluate("e => e.scrollIntoView({block: 'center'})")
    box = glyph.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)  # plotly's drag layer takes the pointer, and finds the point under it
    page.mouse.click(x, y)
    page.wait_for_function("() => new URLSearchParams(location.search).get('pos') === '5'", timeout=60_000)
    wait_for_app(page, timeout=120_000)
    assert_no_exception(page)
    assert "from token 5" in text.locator(".gtitle").text_content()
    slider = page.locator("[data-testid='stSlider']").filter(has_text="token to read from")
    assert "5 “a”" in slider.inner_text(), slider.inner_text()
