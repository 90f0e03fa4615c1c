"""Every page in the navigation, in headless Chromium: no exception box, a screenshot in both modes."""

from __future__ import annotations

import pytest

from explorer.glue.sidebar import PAGES as NAVIGATION

from .helpers import assert_charts, assert_no_exception, screenshot, wait_for_app

pytestmark = pytest.mark.browser


def navigation_links(page, app_url) -> list[tuple[str, str]]:
    """(label, absolute url) of every link in the app's own sidebar navigation."""
    page.goto(app_url)
    wait_for_app(page)
    selector = "[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']"
    links = page.locator(selector)
    # The sidebar fills link by link while the page's script runs on: under load the first look counted two of nine.
    # Wait for every page the app lists, then read them.
    page.wait_for_function(
        "([selector, expected]) => document.querySelectorAll(selector).length >= expected",
        arg=[selector, len(NAVIGATION)],
        timeout=60_000,
    )
    found = []
    for i in range(links.count()):
        label = links.nth(i).inner_text().strip().splitlines()[-1]  # the icon's ligature name comes first
        href = links.nth(i).get_attribute("href") or ""
        found.append((label, f"{app_url}/{href}"))
    return found


def test_every_page_in_the_navigation_renders_without_an_exception(page, app_url):
    links = navigation_links(page, app_url)
    names = [name for name, _ in links]
    assert len(links) == len(NAVIGATION), names
    for expected in (
        "Explorer",
        "Step through",
        "Heads and references",
        "Masks and cross-attention",
        "Knobs that teach",
        "Trained heads",
        "Cost",
        "Follow a token",
        "Real heads",
        "Attention variants",
    ):
        assert expected in names, names
    for name, href in links:
        slug = name.lower().replace(" ", "_").replace("-", "_")
        for presenter in (False, True):
            url = href if not presenter else f"{href}{'&' if '?' in href else '?'}presenter=true"
            page.goto(url)
            wait_for_app(page)
            page.wait_for_timeout(1500)  # plotly draws after the script ends
            assert_no_exception(page)
            if name not in ("Trained heads", "Cost"):  # those draw after a Train or Measure click
                assert_charts(page)
            screenshot(page, f"page_{slug}{'_presenter' if presenter else ''}")


HOSTILE_LINKS = [  # issue 10's repros, as a stranger would post them
    "Step_through?step=--1",
    "Masks_and_cross_attention?mask=sliding%20window&src_len=1",
    "?trained=previous_token.heads16.layers2.d16.vocab2.len64.steps1.batch1.lr1e-2.seed1.cpu.layer0",
    "?view_batch=%D9%A3&num_heads=%EF%BC%91",
    "Follow_a_token?token=-5&width=%3Cb%3Ewide",
    "?model=%3Cscript%3E&layer=-1&head=99&text=",
    "Real_heads?model=gpt2&text=" + "word%20" * 300,
    "Attention_variants?section=decode&kv_groups=%3Cscript%3E&window=-3&latent=1e309&step=99&source=x",
]


@pytest.mark.parametrize("link", HOSTILE_LINKS)
def test_hostile_links_show_a_notice_and_charts_never_an_error(page, app_url, link):
    page.goto(f"{app_url}/{link}")
    wait_for_app(page, timeout=120_000)
    assert_no_exception(page)
    assert_charts(page)
    assert page.locator("[data-testid='stAlertContentWarning']").count() >= 1  # the notice says what changed


def test_trained_heads_trains_in_the_browser(page, app_url):
    page.goto(f"{app_url}/Trained_heads?task=first_token&heads=4")
    wait_for_app(page)
    train = page.get_by_role("button", name="Train", exact=True)
    train.wait_for(timeout=60_000)
    train.click()
    page.get_by_text("held-out accuracy", exact=False).first.wait_for(timeout=180_000)
    wait_for_app(page, timeout=180_000)
    page.wait_for_timeout(1500)
    assert_no_exception(page)
    screenshot(page, "page_trained_heads_after_training")
