"""Every column of a page's tables shows at 1280 × 800 (issue 21, minor items): st.dataframe draws on a canvas and a
code box scrolls sideways, so a column past its box is hidden until someone scrolls. Before: the printed mask lost
its 6th column (Masks and cross-attention: torch's print of a 4 × 6 mask in half the page), the Cost table its
columns after "traced (ms)", the held-out table position 15 (Trained heads).
"""

from __future__ import annotations

import pytest

from .helpers import screenshot
from .page_checks import open_page, press_for_results

pytestmark = pytest.mark.browser

# Each table's scroller (a canvas table's, a box inside an HTML table that scrolls, a printed tensor's code box,
# st.code's or boundary.printed's):
# content wider than its box means columns hidden past the right edge.
HIDDEN_COLUMNS_JS = """
() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stDataFrame'], "
                                   + "[data-testid='stMain'] [data-testid='stTable'], "
                                   + "[data-testid='stMain'] [data-testid='stCode'] pre, "
                                   + "[data-testid='stMain'] pre.mha-printed")].map(frame => {
  const scroller = frame.querySelector(".dvn-scroller") ?? [frame, ...frame.querySelectorAll("*")]
    .find(el => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") ?? frame;
  const box = frame.getBoundingClientRect();
  return {scroll: scroller ? scroller.scrollWidth : 0, client: scroller ? scroller.clientWidth : 0,
          right: box.right, page: document.querySelector("[data-testid='stMainBlockContainer']")
            .getBoundingClientRect().right};
})
"""

PAGES = [
    ("masks", "Masks_and_cross_attention", "mask=causal"),
    ("cost", "Cost", "max_tokens=128"),
    ("trained", "Trained_heads", "steps=10"),
]


@pytest.mark.parametrize(("slug", "path", "query"), PAGES, ids=[slug for slug, _, _ in PAGES])
def test_every_column_of_every_table_shows_at_1280x800(browser, app_url, slug, path, query):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
    page = context.new_page()
    try:
        open_page(page, app_url, path, query)
        press_for_results(page, slug)
        tables = page.evaluate(HIDDEN_COLUMNS_JS)
        screenshot(page, f"tables_{slug}_1280x800")
        assert tables, f"{slug}: no table drawn"
        hidden = [t for t in tables if t["scroll"] > t["client"] + 1 or t["right"] > t["page"] + 1]
        assert not hidden, f"{slug}: tables wider than their box, columns hidden: {hidden}"
    finally:
        context.close()
