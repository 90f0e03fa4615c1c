"""Headless Chromium as the browser tests and the browser benchmarks start it, and the wait for drawn charts."""

from __future__ import annotations

import shutil

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    """The system Chromium (Debian's, which CI installs), or None: then Playwright's own is used."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def wait_for_charts(page, timeout: float) -> None:
    """Until the script has finished and every plotly chart has drawn its SVG."""
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout * 1000)
    page.wait_for_function(
        '() => { const charts = document.querySelectorAll(".mha-chart");'
        " return charts.length > 0 && [...charts].every(c => c.querySelector('svg.main-svg')); }",
        timeout=timeout * 1000,
    )


def launch(playwright, executable: str | None = None):
    """Chromium with the flags above: the given executable, else the system one, else Playwright's own."""
    executable = executable or chromium_path()
    if executable:
        return playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
    return playwright.chromium.launch(args=CHROMIUM_FLAGS)
