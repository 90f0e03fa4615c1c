"""README's screenshots, taken afresh from a real server in headless Chromium: the pictures show what the app shows.

    python bench/screenshots.py [--out docs]

Each shot opens a page by its link, waits until the run is over and every chart is drawn (the browser tests' own
wait), and saves the viewport or the whole page. Not a benchmark: it lives here because it drives the app from
outside, as the benches do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness import chromium  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402
from tests.browser.helpers import settle  # noqa: E402

# (file, page and query, viewport, whole page?)
SHOTS = [
    ("explorer.png", "", (1600, 1000), True),
    ("step_through_presenter.png", "Step_through?presenter=true&step=6", (1280, 720), False),
    ("real_heads.png", "Real_heads?text=The+cat+sat+on+the+mat.+The+cat+sat+on+the+mat.", (1280, 900), False),
    ("attention_variants.png", "Attention_variants", (1400, 1000), False),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    with StreamlitServer(start_timeout=240) as server, sync_playwright() as playwright:
        browser = chromium.launch(playwright)
        for name, target, (width, height), whole in SHOTS:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{server.url}/{target}")
            settle(page)
            page.screenshot(path=str(args.out / name), full_page=whole)
            print(f"{args.out / name}: {target or 'Explorer'} at {width} × {height}")
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
