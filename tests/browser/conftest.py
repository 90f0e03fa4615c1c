"""One Streamlit server per test session and a headless Chromium, as Streamlit's own e2e tests do."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from .helpers import SCREENSHOTS

ROOT = Path(__file__).resolve().parents[2]
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def app_url():
    port = _free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    log = open(ROOT / "artifacts" / "streamlit-browser-test.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.headless=true",
            f"--server.port={port}",
            "--server.address=127.0.0.1",
            "--server.fileWatcherType=none",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.3)
    else:
        server.kill()
        pytest.fail("the Streamlit server did not become healthy within 60 s")
    yield url
    server.terminate()
    server.wait(timeout=20)
    log.close()


def _chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


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
        pytest.fail(f"No Chromium here, and `{' '.join(command[1:])}` failed: {error}. {INSTALL_HELP}")
    if done.returncode != 0:
        pytest.fail(
            f"No Chromium here, and `python -m playwright install chromium` failed "
            f"({done.returncode}): {(done.stderr or done.stdout)[-1500:]}\n{INSTALL_HELP}"
        )


def launch_chromium(playwright, executable: str | None):
    """Debian's Chromium where there is one (CI installs it); else Playwright's, installed on first use.

    Never a skip: a machine without a browser either gets one or fails saying exactly what to install.
    """
    if executable:
        return playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
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
        pytest.fail(f"Playwright's Chromium was installed but does not start: {error}\n{INSTALL_HELP}")


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = launch_chromium(playwright, _chromium_path())
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    yield page
    context.close()
