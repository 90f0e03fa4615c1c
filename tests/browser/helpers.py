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
    exceptions = page.locator("[data-testid='stException']")
    assert exceptions.count() == 0, exceptions.first.inner_text()[:2000]


def screenshot(page, name: str) -> Path:
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
