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
from urllib.parse import quote_plus

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness import chromium  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402
from tests.browser.helpers import settle  # noqa: E402

WRITES = "The teacher asked the class to write a poem about the ocean."  # a held-out sentence (writing_probe)
WRITING = f"Real_heads?text={quote_plus(WRITES + ' ' + WRITES[:10])}&ablate=1.0,1.1,1.2,1.3"  # the four induction heads

# (file, page and query, viewport, whole page?, None or (boxes to type in, the button to press, the text to scroll to))
SHOTS = [
    ("explorer.png", "", (1600, 1000), True, None),
    ("step_through_presenter.png", "Step_through?presenter=true&step=6", (1280, 720), False, None),
    ("real_heads.png", "Real_heads?text=The+cat+sat+on+the+mat.+The+cat+sat+on+the+mat.", (1280, 900), False, None),
    (
        "real_heads_writes.png",
        WRITING,
        (1280, 800),
        False,
        ({"tokens to write": "50"}, "Continue my sentence", "tokens, greedy"),
    ),
    ("attention_variants.png", "Attention_variants", (1400, 1000), False, None),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--only", nargs="*", help="these files only (default: every shot)")
    args = parser.parse_args()
    with StreamlitServer(start_timeout=240) as server, sync_playwright() as playwright:
        browser = chromium.launch(playwright)
        for name, target, (width, height), whole, action in SHOTS:
            if args.only and name not in args.only:
                continue
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{server.url}/{target}")
            settle(page)
            if action:
                boxes, button, heading = action
                for label, value in boxes.items():
                    page.get_by_label(label).fill(value)
                    page.get_by_label(label).press("Enter")
                    settle(page)
                page.get_by_role("button", name=button).click()
                page.get_by_text(heading).first.wait_for(timeout=120_000)
                settle(page)
                page.get_by_text(heading).first.evaluate("e => e.scrollIntoView({block: 'start'})")
                page.mouse.wheel(0, -100)
                settle(page)
            page.screenshot(path=str(args.out / name), full_page=whole)
            print(f"{args.out / name}: {target or 'Explorer'} at {width} × {height}")
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
