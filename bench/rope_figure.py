"""RoPE's two teaching figures from the Explorer's Positions view, saved as one PNG for the README.

    python bench/rope_figure.py [--out docs/images/rope.png] [--head-dim 64] [--base 10000]

The figures are the view's own (``explorer_positions``), drawn by plotly.js in headless Chromium side by side, so
the picture is what the app shows. Not a benchmark: it lives here because it drives a browser, as the benches do.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import plotly.io as pio  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from explorer.views.explorer_positions import rope_distance_panel, rope_rotation_panel  # noqa: E402
from harness import chromium  # noqa: E402

WIDTH, HEIGHT = 1400, 520


def page_html(head_dim: int, base: int) -> str:
    """Both figures in one row, plotly.js inlined (the browser reaches nothing outside)."""
    panels = [rope_distance_panel(head_dim, base, False), rope_rotation_panel(head_dim, base, False)]
    parts = []
    for index, panel in enumerate(panels):
        figure = panel.figure.update_layout(width=560, height=560) if index == 0 else panel.figure  # its own size
        parts.append(pio.to_html(figure, include_plotlyjs=index == 0, full_html=False, div_id=f"figure{index}"))
    cells = "".join(f'<div style="display:inline-block;vertical-align:top">{part}</div>' for part in parts)
    body = f'<body style="margin:0;background:white;white-space:nowrap">{cells}</body>'
    return f'<html><head><meta charset="utf-8"></head>{body}</html>'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "rope.png")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--base", type=int, default=10_000)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        html = Path(folder) / "rope.html"
        html.write_text(page_html(args.head_dim, args.base), encoding="utf-8")
        browser = chromium.launch(playwright)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(html.as_uri())
        page.wait_for_function("document.querySelectorAll('.main-svg').length >= 2")
        page.screenshot(path=str(args.out), full_page=True)
        browser.close()
    print(f"{args.out}: RoPE at head_dim {args.head_dim}, base {args.base:,}, {WIDTH} × {HEIGHT}")


if __name__ == "__main__":
    main()
