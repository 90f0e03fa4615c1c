"""One Streamlit server per test session and a headless Chromium, as Streamlit's own e2e tests do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness import chromium
from harness.chromium import CHROMIUM_FLAGS
from harness.server import StreamlitServer, worker_suffix

from ..system_deps import unavailable
from .helpers import SCREENSHOTS

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "artifacts" / f"streamlit-browser-test{worker_suffix()}.log"  # one per xdist worker


@pytest.fixture(scope="session")
def app_url():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    # A server that does not come up raises, naming its log: the tests error, they are never skipped. 240 s: under
    # xdist two workers start theirs at once, and with both cores busy (load 15) torch's import alone took most of 60 s.
    with StreamlitServer(extra_args=["--server.fileWatcherType=none"], log_path=LOG, start_timeout=240) as server:
        yield server.url


@pytest.fixture(autouse=True)
def _a_browser_never_sends_a_widget_state_the_server_drops(app_url):
    """Chromium's own widget states must all be accepted: the server drops (and logs) only hand-made ones of the
    wrong kind. An integer number_input sent as int_value was dropped once, for every seed a student typed."""
    start = LOG.stat().st_size if LOG.exists() else 0
    yield
    with LOG.open(errors="replace") as file:
        file.seek(start)
        dropped = [line.strip() for line in file if "dropped widget states" in line]
    assert not dropped, dropped


INSTALL_HELP = (
    "The browser tests need Chromium. Install the system one (Debian/Ubuntu: `apt-get install -y chromium`), or "
    "Playwright's own with `python -m playwright install --with-deps chromium`."
)


def _install_playwright_chromium() -> None:
    """Playwright's own Chromium, by Playwright's own installer (a no-op when it is already there)."""
    command = [sys.executable, "-m", "playwright", "install", "chromium"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as error:
        unavailable(f"No Chromium here, and `{' '.join(command[1:])}` failed: {error}. {INSTALL_HELP}")
    if done.returncode != 0:
        unavailable(
            f"No Chromium here, and `python -m playwright install chromium` failed "
            f"({done.returncode}): {(done.stderr or done.stdout)[-1500:]}\n{INSTALL_HELP}"
        )


def launch_chromium(playwright, executable: str | None):
    """Debian's Chromium where there is one (CI installs it); else Playwright's, installed on first use.

    Never a skip in CI: there a machine without a browser either gets one or fails saying what to install; elsewhere
    the browser tests skip, saying the same (system_deps.unavailable).
    """
    if executable:
        return chromium.launch(playwright, executable)
    from playwright.sync_api import Error

    try:
        return playwright.chromium.launch(args=CHROMIUM_FLAGS)
    except Error as error:
        if "Executable doesn't exist" not in str(error) and "playwright install" not in str(error):
            pytest.fail(f"Chromium did not start: {error}\n{INSTALL_HELP}")
    _install_playwright_chromium()
    try:
        return playwright.chromium.launch(args=CHROMIUM_FLAGS)
    except Error as error:  # installed, but its system libraries are missing
        unavailable(f"Playwright's Chromium was installed but does not start: {error}\n{INSTALL_HELP}")


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = launch_chromium(playwright, chromium.chromium_path())
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    yield page
    context.close()
