"""Helpers for the browser tests: wait for a rerun to finish, check for errors, save screenshots."""

from __future__ import annotations

from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


def wait_for_app(page, timeout: float = 60_000) -> None:
    """Wait until the script has finished running, as Streamlit's e2e tests do."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout)
    page.wait_for_selector("[data-testid='stMain'] h1", timeout=timeout)  # the script has drawn something
    page.wait_for_function(
        "() => { const app = document.querySelector(\"[data-testid='stApp']\");"
        " return app && app.getAttribute('data-test-script-state') === 'notRunning'; }",
        timeout=timeout,
    )
    page.wait_for_timeout(300)


def assert_no_exception(page) -> None:
    """No exception box and no error box: run_page turns an exception into st.error, so both are failures."""
    exceptions = page.locator("[data-testid='stException']")
    assert exceptions.count() == 0, exceptions.first.inner_text()[:2000]
    errors = page.locator("[data-testid='stAlertContentError']")
    assert errors.count() == 0, f"{page.url}: the page shows an error: {errors.first.inner_text()[:2000]}"
    broken = page.locator(".mha-chart-error")  # a chart element that could not draw (explorer/glue/chart.js)
    assert broken.count() == 0, f"{page.url}: {broken.first.inner_text()[:300]}"


def assert_charts(page, minimum: int = 1) -> None:
    """The page drew its charts (plotly draws after the script ends, so wait for the first one)."""
    charts = page.locator(".mha-chart.js-plotly-plot")
    charts.first.wait_for(timeout=60_000)
    count = count_at_least(page, charts, minimum)
    assert count >= minimum, f"{page.url}: {count} charts, expected at least {minimum}"


def count_at_least(page, locator, minimum: int, seconds: float = 10) -> int:
    """How many elements match, once `minimum` do or `seconds` pass: later charts mount after the first."""
    for _ in range(int(seconds * 4)):
        count = locator.count()
        if count >= minimum:
            return count
        page.wait_for_timeout(250)
    return locator.count()


def screenshot(page, name: str, max_height: int = 5000) -> Path:
    """The whole page: Streamlit scrolls inside its own container, so grow the viewport to fit it first."""
    path = SCREENSHOTS / f"{name}.png"
    viewport = page.viewport_size
    height = page.evaluate("() => document.querySelector(\"[data-testid='stMain']\")?.scrollHeight ?? 0")
    if height > viewport["height"]:
        page.evaluate(PIN_STAGES_JS, True)  # presenter mode's stage is sized by the viewport: keep the first screen's
        page.set_viewport_size({"width": viewport["width"], "height": min(int(height) + 40, max_height)})
        page.wait_for_timeout(800)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(viewport)
    page.evaluate(PIN_STAGES_JS, False)
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
