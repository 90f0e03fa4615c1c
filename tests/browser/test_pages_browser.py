"""Every page in the navigation, in headless Chromium at 1600 × 1000 with the book's defaults: no exception box, its
charts drawn, no text cut, photographed (presenter mode: test_presenter_browser); hostile links; a training."""

from __future__ import annotations

import pytest

from explorer.glue.frame.sidebar import PAGES as NAVIGATION

from .helpers import assert_charts, assert_no_exception, screenshot, settle, wait_for_app
from .page_checks import PAGES, clipped_text, open_page

pytestmark = pytest.mark.browser

NAV_LINK = "[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']"


def navigation_links(page, app_url) -> list[tuple[str, str]]:
    """(label, page path) of every link in the app's own sidebar navigation."""
    page.goto(app_url)
    wait_for_app(page)
    # The sidebar fills link by link while the page's script runs on: under load a first look counted two of nine.
    # Wait for every page the app lists, then read them.
    page.wait_for_function(
        "([selector, expected]) => document.querySelectorAll(selector).length >= expected",
        arg=[NAV_LINK, len(NAVIGATION)],
        timeout=60_000,
    )
    links = page.locator(NAV_LINK)
    found = []
    for i in range(links.count()):
        label = links.nth(i).inner_text().strip().splitlines()[-1]  # the icon's ligature name comes first
        href = links.nth(i).get_attribute("href") or ""
        found.append((label, href.split("?")[0].strip("./")))
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
    assert sorted(path for _, path in links) == sorted(path for _, path, _ in PAGES), links
    problems = []
    for slug, path, query in PAGES:  # each page once, with the query the other walks open it with
        open_page(page, app_url, path, query)
        if slug not in ("trained", "cost"):  # those draw after a Train or Measure click
            assert_charts(page)
        problems += [f"{slug}: {p}" for p in clipped_text(page)]
        screenshot(page, f"page_{slug}")
    assert not problems, "\n".join(problems)


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
    settle(page, 180_000)
    assert_no_exception(page)
    screenshot(page, "page_trained_heads_after_training")
