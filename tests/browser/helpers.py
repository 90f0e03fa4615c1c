"""Helpers for the browser tests: wait for a rerun to finish, check for errors, save screenshots."""

from __future__ import annotations

from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


# Settled: the script has run (the app says notRunning and the toolbar shows no running man), the page has drawn its
# title and every element (Streamlit shows a skeleton until an element's code has loaded, after the run), and every
# chart element (every component but the sidebar's history guard) holds a chart plotly has drawn and is not drawing
# again (explorer/glue/frame/chart.js marks a drawing chart with data-mha-drawing), or its error note. All of it held
# for QUIET_MS, as a network-idle wait does: a rerun asked for a moment ago may not have started, and a resize reaches
# plotly a frame after the window's.
SETTLED_JS = """
(quiet) => {
  const app = document.querySelector("[data-testid='stApp']");
  const running = !app || app.getAttribute("data-test-script-state") !== "notRunning"
    || document.querySelector("[data-testid='stStatusWidgetRunningIcon'], [data-testid='stStatusWidgetRunningManIcon']")
    || !document.querySelector("[data-testid='stMain'] h1")
    || document.querySelector("[data-testid='stSkeleton']");  // an element whose code is still loading
  const drawing = [...document.querySelectorAll("[data-testid='stBidiComponentRegular']")].some((place) => {
    if (place.querySelector(".mha-chart-error") || place.closest(".st-key-mha_history_guard")) return false;
    const chart = place.querySelector(".mha-chart");
    return !chart || chart.hasAttribute("data-mha-drawing") || !chart.querySelector("svg.main-svg");
  });
  const now = performance.now();
  if (running || drawing) {
    window.mhaSettledSince = null;
    return false;
  }
  window.mhaSettledSince ??= now;
  return now - window.mhaSettledSince >= quiet;
}
"""
QUIET_MS = 300


def settle(page, timeout: float = 120_000) -> None:
    """Until the script has finished and every chart is drawn (see SETTLED_JS), for at most ``timeout`` ms."""
    page.evaluate("() => { window.mhaSettledSince = null; }")
    page.wait_for_function(SETTLED_JS, arg=QUIET_MS, timeout=timeout, polling=50)


def wait_for_app(page, timeout: float = 120_000) -> None:
    """The page as a visitor sees it once it stops changing: Streamlit's run over and plotly's drawing done."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout)
    settle(page, timeout)


def assert_no_exception(page) -> None:
    """No exception box and no error box: run_page turns an exception into st.error, so both are failures."""
    exceptions = page.locator("[data-testid='stException']")
    assert exceptions.count() == 0, exceptions.first.inner_text()[:2000]
    errors = page.locator("[data-testid='stAlertContentError']")
    assert errors.count() == 0, f"{page.url}: the page shows an error: {errors.first.inner_text()[:2000]}"
    broken = page.locator(".mha-chart-error")  # a chart element that could not draw (explorer/glue/frame/chart.js)
    assert broken.count() == 0, f"{page.url}: {broken.first.inner_text()[:300]}"


def assert_charts(page, minimum: int = 1) -> None:
    """The page drew at least ``minimum`` charts (settle waits for every chart it has to be drawn)."""
    settle(page)
    count = page.locator(".mha-chart.js-plotly-plot").count()
    assert count >= minimum, f"{page.url}: {count} charts, expected at least {minimum}"


def screenshot(page, name: str, max_height: int = 5000) -> Path:
    """The whole page: Streamlit scrolls inside its own container, so grow the viewport to fit it first."""
    path = SCREENSHOTS / f"{name}.png"
    viewport = page.viewport_size
    height = page.evaluate("() => document.querySelector(\"[data-testid='stMain']\")?.scrollHeight ?? 0")
    if height > viewport["height"]:
        page.evaluate(PIN_STAGES_JS, True)  # presenter mode's stage is sized by the viewport: keep the first screen's
        page.set_viewport_size({"width": viewport["width"], "height": min(int(height) + 40, max_height)})
        settle(page)  # charts whose place changed redraw
    page.screenshot(path=str(path), full_page=True)
    if page.viewport_size != viewport:
        page.set_viewport_size(viewport)
        page.evaluate(PIN_STAGES_JS, False)
        settle(page)
    return path


# Pin (or release) the height of presenter mode's stage containers, which CSS sizes from the viewport's height.
PIN_STAGES_JS = """
(pin) => {
  for (const stage of document.querySelectorAll("[class*='st-key-stage_']")) {
    if (pin) stage.style.setProperty("height", `${stage.getBoundingClientRect().height}px`, "important");
    else stage.style.removeProperty("height");
  }
}
"""
