"""The lesson from the keyboard alone (WCAG 2.1, 2.1.1): only Tab, Shift+Tab, Enter, Space, the arrow keys and Page
Down move Step through's steps, change a sidebar slider (the URL follows) and follow a sidebar page link. The test
reads the page to know where the focus is, and never clicks."""

from __future__ import annotations

import pytest

from .helpers import assert_no_exception, settle
from .page_checks import open_page

pytestmark = pytest.mark.browser

# What has the focus: its role, its visible text or name, and the slider or link it is.
FOCUSED_JS = """
() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const slider = el.closest("[data-testid='stSlider']");
  return {
    tag: el.tagName, role: el.getAttribute("role") || (el.type === "range" ? "slider" : ""),
    text: (el.innerText || "").trim().slice(0, 80),
    label: el.getAttribute("aria-label") || "", href: el.getAttribute("href") || "",
    slider: slider ? slider.querySelector("[data-testid='stWidgetLabel']")?.innerText.trim() ?? "" : null,
    sidebar: !!el.closest("[data-testid='stSidebar']"),
  };
}
"""
MOST_PRESSES = 200  # the page's tab stops: sidebar, tabs, charts and their tables


def tab_to(page, wanted, key: str = "Tab") -> dict:
    """Press ``key`` (Tab or Shift+Tab) until the focused element satisfies ``wanted``; fail after MOST_PRESSES."""
    seen = []
    for _ in range(MOST_PRESSES):
        page.keyboard.press(key)
        focused = page.evaluate(FOCUSED_JS)
        if focused and wanted(focused):
            return focused
        seen.append(focused and (focused["text"] or focused["label"] or focused["tag"]))
    raise AssertionError(f"{key} {MOST_PRESSES} times never reached it; the focus went through {seen[:60]}")


def query_value(page, name: str) -> str | None:
    return page.evaluate(f"() => new URLSearchParams(location.search).get('{name}')")


def wait_for_query(page, name: str, value: str) -> None:
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('{name}') === '{value}'", timeout=120_000)
    settle(page)
    assert_no_exception(page)


def test_the_keyboard_alone_walks_the_steps_moves_a_slider_and_opens_another_page(page, app_url):
    open_page(page, app_url, "Step_through", "step=1")
    # Step through: the Next button by Tab, pressed with Enter, then Space; Page Down (a clicker) after that.
    tab_to(page, lambda f: f["tag"] == "BUTTON" and f["text"].startswith("Next"))
    page.keyboard.press("Enter")
    wait_for_query(page, "step", "2")
    tab_to(page, lambda f: f["tag"] == "BUTTON" and f["text"].startswith("Next"))
    page.keyboard.press("Space")
    wait_for_query(page, "step", "3")
    page.keyboard.press("PageDown")
    wait_for_query(page, "step", "4")
    # The step slider, reached backwards with Shift+Tab, moved by an arrow key.
    tab_to(page, lambda f: f["role"] == "slider" and not f["sidebar"], key="Shift+Tab")
    page.keyboard.press("ArrowRight")
    wait_for_query(page, "step", "5")
    assert "Step 5 of 12" in page.locator("[data-testid='stMain'] h2").first.inner_text()

    # A sidebar slider: num_tokens one up by the arrow key, and the URL and the page's text follow.
    before = int(query_value(page, "num_tokens") or 6)
    tab_to(page, lambda f: f["role"] == "slider" and f["sidebar"] and f["slider"] == "num_tokens", key="Shift+Tab")
    page.keyboard.press("ArrowRight")
    wait_for_query(page, "num_tokens", str(before + 1))

    # A sidebar page link, followed with Enter: the other page opens with the settings it had.
    tab_to(page, lambda f: f["sidebar"] and f["tag"] == "A" and "Heads and references" in f["text"], key="Shift+Tab")
    page.keyboard.press("Enter")
    page.wait_for_url("**/Heads_and_references*", timeout=120_000)
    settle(page)
    assert_no_exception(page)
    assert page.locator("[data-testid='stMain'] h1").first.inner_text().startswith("Heads and references")
    assert query_value(page, "num_tokens") == str(before + 1)
