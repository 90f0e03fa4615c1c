"""What a student waits for in the browser: a cold first paint of the explorer, and a slider move to the redrawn page.

One Streamlit server (started and warmed by one visit first, as a class's server is) and headless Chromium on this
machine. For each case, ``--repeats`` fresh visitors, each with a seed of their own, so that every first paint and
every slider move misses the cache as a new student's settings would:

* first paint: from ``page.goto`` to the script finished and every plotly chart drawn (its SVG in the page);
* slider move: ``ArrowRight`` on the focused num_tokens slider, to the new shape in the captions and every chart drawn.

    python bench/browser_timing.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import chromium  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402

CASES = {
    "defaults (the book, 2 heads × 6 tokens)": {},
    "8 heads × 512 tokens": {"num_heads": "8", "num_tokens": "512", "context_length": "1024", "input": "random"},
}
TIMEOUT_S = 120


def _drawn(page, text: str) -> None:
    """Until ``text`` is on the page, the script has finished and every chart has drawn, plus two frames."""
    page.wait_for_function(
        "t => document.querySelector(\"[data-testid='stMain']\")?.innerText.includes(t)",
        arg=text,
        timeout=TIMEOUT_S * 1000,
    )
    chromium.wait_for_charts(page, TIMEOUT_S)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def visit(browser, url: str, query: dict[str, str], context=None) -> tuple[float, float]:
    """(first paint, slider move) in seconds for one new visitor: a new browser profile (nothing cached), or a new
    tab of ``context`` (a returning browser: Streamlit's and plotly's JavaScript already cached and compiled)."""
    own = context is None
    context = context or browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    tokens = int(query.get("num_tokens", 6))
    heads = int(query.get("num_heads", 2))
    batch = 2
    begin = time.perf_counter()
    page.goto(f"{url}/?{urlencode(query)}", timeout=TIMEOUT_S * 1000)
    _drawn(page, f"({batch}, {heads}, {tokens}, {tokens})")
    first_paint = time.perf_counter() - begin
    errors = page.locator("[data-testid='stException'], [data-testid='stAlertContentError']").count()
    if errors:
        raise RuntimeError(f"{query}: {errors} errors on the page")
    slider = page.locator("[data-testid='stSlider']").filter(has_text="num_tokens").locator("input")
    slider.focus()
    begin = time.perf_counter()
    page.keyboard.press("ArrowRight")
    _drawn(page, f"({batch}, {heads}, {tokens + 1}, {tokens + 1})")
    slider_move = time.perf_counter() - begin
    page.close()
    if own:
        context.close()
    return first_paint, slider_move


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, StreamlitServer() as server:
        browser = chromium.launch(playwright)
        visit(browser, server.url, {"seed": "1"})  # the server's first visitor: imports, first compilations
        returning = browser.new_context(viewport={"width": 1600, "height": 1000})
        visit(browser, server.url, {"seed": "2"}, returning)  # this browser has now cached the app's JavaScript
        print("| settings | browser | first paint, median (max) | slider move → redrawn, median (max) | runs |")
        print("|---|---|---:|---:|---:|")
        for name, query in CASES.items():
            for kind, context in (("new (nothing cached)", None), ("returning (JavaScript cached)", returning)):
                paints, moves = [], []
                for repeat in range(args.repeats):
                    seed = str(7000 + 100 * (context is None) + repeat)  # every visit a cache miss on the server
                    paint, move = visit(browser, server.url, {**query, "seed": seed}, context)
                    paints.append(paint)
                    moves.append(move)
                print(
                    f"| {name} | {kind} | {statistics.median(paints):.2f} s ({max(paints):.2f}) | "
                    f"{statistics.median(moves):.2f} s ({max(moves):.2f}) | {args.repeats} |",
                    flush=True,
                )
        returning.close()
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
