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
