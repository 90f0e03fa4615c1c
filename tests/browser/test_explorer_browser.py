"""The Explorer in headless Chromium: opened from a URL, driven with the keyboard, photographed."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from .helpers import assert_no_exception, screenshot, wait_for_app

pytestmark = pytest.mark.browser


def query_of(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_url_opens_the_view_and_a_keyboard_slider_move_reruns_and_updates_the_url(page, app_url):
    page.goto(f"{app_url}/?num_heads=4&num_tokens=8&d_out=8")
    wait_for_app(page)
    assert_no_exception(page)
    main = page.locator("[data-testid='stMain']")
    assert "4 heads × head_dim 2 = d_out 8, 8 tokens" in main.inner_text()
    page.locator(".js-plotly-plot").nth(4).wait_for(timeout=60_000)  # plotly draws after the script ends
    assert page.locator("[data-testid='stPlotlyChart']").count() >= 5
    screenshot(page, "explorer_4_heads_8_tokens")

    tokens_slider = page.locator("[data-testid='stSlider']").filter(has_text="num_tokens").locator("input")
    tokens_slider.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => new URLSearchParams(location.search).get('num_tokens') === '9'", timeout=60_000)
    wait_for_app(page)
    assert_no_exception(page)
    assert query_of(page)["num_tokens"] == "9"
    assert query_of(page)["num_heads"] == "4"
    assert "8 tokens" not in main.inner_text() and "9 tokens" in main.inner_text()


def test_book_defaults_show_the_books_numbers(page, app_url):
    page.goto(app_url)
    wait_for_app(page)
    assert_no_exception(page)
    text = page.locator("[data-testid='stMain']").inner_text()
    assert "[0.3190, 0.4858]" in text and "[0.2575, 0.4028]" in text
    assert "matches the book's printed output" in text
    screenshot(page, "explorer_default")


def test_bad_url_shows_notices_not_a_traceback(page, app_url):
    page.goto(f"{app_url}/?seed=1e309&num_heads=<script>alert(1)</script>&d_out=7&device=cuda")
    wait_for_app(page)
    assert_no_exception(page)
    alerts = page.locator("[data-testid='stAlert']").all_inner_texts()
    assert any("seed=1e309 is not a whole number" in a for a in alerts), alerts
    assert page.locator("script:text('alert(1)')").count() == 0
