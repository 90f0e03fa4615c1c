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
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
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
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless=true",
         f"--server.port={port}", "--server.address=127.0.0.1", "--server.fileWatcherType=none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
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


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    executable = _chromium_path()
    with sync_playwright() as playwright:
        # Debian's Chromium; playwright's own download is the fallback only where no system one exists
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS) if executable \
            else playwright.chromium.launch(args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    yield page
    context.close()


