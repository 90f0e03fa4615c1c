"""No error or warning where a teacher looks (issue 42, item 6): the browser's console on every page, normal and in
presenter mode, with every tab opened and every expander unfolded, and the server's log from its start.

The console once said "Resize must be passed a displayed plot div element." on Follow a token, Knobs that teach and
Trained heads (explorer/glue/frame/chart.js resized charts that had left the page or were hidden), and the server said
"Static file serving is enabled, but no static folder found" at every start. The only console lines allowed are
Streamlit's own: on a page's own URL (/Step_through) its frontend first asks for /Step_through/_stcore/health and
/_stcore/host-config, taking the page's path for a base path, and gets 404 before it asks the root.
"""

from __future__ import annotations

import re

import pytest

from .conftest import LOG
from .helpers import settle
from .page_checks import PAGES, joined, open_page, press_for_results

pytestmark = pytest.mark.browser

STREAMLIT_OWN = re.compile(r"/[A-Za-z_]+/_stcore/(health|host-config)$")  # the base-path probe described above


def listen(page) -> list[str]:
    """Every console error and warning, and every uncaught exception, as "kind: text (where)"."""
    heard: list[str] = []

    def on_console(message) -> None:
        where = message.location.get("url", "")
        if message.type in ("error", "warning") and not STREAMLIT_OWN.search(where):
            heard.append(f"{message.type}: {message.text[:300]} ({where})")

    page.on("console", on_console)
    page.on("pageerror", lambda error: heard.append(f"uncaught: {str(error)[:300]}"))
    return heard


def open_everything(page) -> None:
    """Each tab in turn, then back to the first, and every expander unfolded: charts hidden and shown again."""
    tabs = page.get_by_role("tab")
    count = tabs.count()
    for k in [*range(count), 0] if count else []:
        tabs.nth(k).click()
        settle(page)
    summaries = page.locator("[data-testid='stMain'] [data-testid='stExpander'] details:not([open]) summary")
    for _ in range(min(summaries.count(), 4)):
        summaries.first.click()
        settle(page)


@pytest.mark.parametrize("mode", ["normal", "presenter"])
def test_no_console_error_or_warning_on_any_page(browser, app_url, mode):
    context = browser.new_context(viewport={"width": 1280, "height": 800 if mode == "normal" else 720})
    page = context.new_page()
    heard = listen(page)
    try:
        for slug, path, query in PAGES:
            open_page(page, app_url, path, joined(query, "presenter=true" if mode == "presenter" else ""))
            press_for_results(page, slug)
            open_everything(page)
            page.set_viewport_size({"width": 1000, "height": 720})  # a resize redraws every chart shown
            settle(page)
            page.set_viewport_size({"width": 1280, "height": 800 if mode == "normal" else 720})
            settle(page)
            heard.append(f"-- {slug}")
    finally:
        context.close()
    said = [line for line in heard if not line.startswith("-- ")]
    assert not said, "\n".join(heard)


def test_the_server_starts_without_a_warning(app_url):
    """The server's log from its start: no warning, no traceback (the browser tests' server, which has run every
    page by now or will have: only its start-up lines are read here)."""
    start = LOG.read_text(errors="replace").split("You can now view", 1)[0]
    assert not re.search(r"WARNING|Traceback|Error", start), start[-2000:]
