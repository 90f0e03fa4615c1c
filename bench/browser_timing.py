"""What a student waits for in the browser, beside what plotly.js itself needs for the very same figures.

One Streamlit server (started and warmed by one visit first, as a class's server is) and headless Chromium on this
machine. For each case, ``--repeats`` new visitors (a new browser profile: nothing cached), each with a seed of their
own, so that every first paint and every slider move misses the server's cache as a new student's settings would.
``--returning``: returning visitors instead, each a new profile that opened the same page once before (other settings,
so the server's cache still misses): its HTTP cache holds what the servers' headers let it keep, and every floor
below is a returning visitor's too.

* app first paint: from navigation to the page's last change (a MutationObserver on the main area and the sidebar,
  installed before the app's scripts), once the script has finished and every plotly chart has drawn;
* app slider move: ``ArrowRight`` on the focused num_tokens slider, to the page's last change once the new shape is in
  the captions and every chart has drawn; of it, the time until the page took the server's last websocket message
  (the server's rerun and the transfer, as late as the browser's busy main thread let the message in).

Beside each visit, in the same browser, the floor: a bare page that loads the plotly.js the app's charts load (the
cartesian bundle at the plotly package's plotly.js version, explorer.glue.frame.chart) and draws the figures read from
the app's own DOM (each chart's ``data`` and ``layout`` as plotly.js holds them, Streamlit's theme and sizes applied),
before and after the move. The bare page and its plotly.js come from the
app's own server, the very file the app loads (the app's static folder, explorer.glue.frame.chart), with the same
headers:

* load + newPlot: from navigation until every figure is drawn (the first-paint floor);
* react: ``Plotly.react`` of every chart from its before-figure to its after-figure (the redraw floor);
* purge + newPlot: every chart drawn afresh with its after-figure, what a remounted chart costs plotly.js.
* load + newPlot with the full plotly.min.js the plotly package ships (every trace type, 4.8 MB): the first-paint
  floor as it stood before the app loaded the cartesian bundle (1.5 MB), so that a ratio is also read against it.

And Streamlit's floor, on a second server: bench/streamlit_floor.py, the same settings sidebar and title and no
figure, its first page and its num_tokens slider moved as the app's (the same kind of visitor, the same settings).
The app's move less this and less plotly's react is what the app adds: its server work on a miss and the elements it
draws; the same for the first page, less plotly's load + newPlot.

Goal (issue 20; the first page for a returning visitor too, in a later issue): slider ≤ 2 × react + 0.15 s; first
paint ≤ 1.5 × (load + newPlot).

    python bench/browser_timing.py [--repeats 3] [--case 0|1] [--returning]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.glue.frame.chart import PACKAGE_JS, SERVED_DATE  # noqa: E402
from harness import chromium  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402

CASES = {
    "defaults (2 heads × 6 tokens)": {},
    "8 heads × 512 tokens": {"num_heads": "8", "num_tokens": "512", "context_length": "1024", "input": "random"},
}
TIMEOUT_S = 120
QUIET_MS = 600  # the page counts as drawn once nothing in it has changed for this long
VIEWPORT = {"width": 1600, "height": 1000}
FLOOR_HTML_NAME = "bench-floor.html"  # written into the app's static folder beside its plotly.js while this runs
FULL_HTML_NAME = "bench-floor-full.html"  # the same with the plotly package's full plotly.min.js (every trace type)
FULL_JS_NAME = "bench-plotly-full.min.js"  # that copy, dated as the app's own so that a browser keeps it alike
FLOOR_PAGE = "bench/streamlit_floor.py"  # Streamlit's floor: the same sidebar, no figure

# Installed before any of the app's scripts: the time (ms since navigation) of the last change under the main area
# or the sidebar, a subtree's or an attribute's (the stale fade is one: data-stale on each element's container).
WATCH_JS = """
window.__lastChange = 0;
new MutationObserver(records => {
  for (const r of records) {
    const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
    if (el && el.closest("[data-testid='stMain'], [data-testid='stSidebar']")) {
      window.__lastChange = performance.now(); return;
    }
  }
}).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
"""
# And the time the page took the last message from the server's websocket (the rerun's last delta, then its end).
WS_JS = """
window.__lastMessage = 0;
const Socket = window.WebSocket;
window.WebSocket = class extends Socket {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', () => { window.__lastMessage = performance.now(); });
  }
};
"""
SCRIPT_DONE = "[data-testid='stApp'][data-test-script-state='notRunning']"
QUIET_JS = "q => window.__lastChange > 0 && performance.now() - window.__lastChange > q"

# Every chart's figure as plotly.js holds it (typed arrays as plain lists, so that JSON carries them).
FIGURES_JS = """() => [...document.querySelectorAll(".mha-chart.js-plotly-plot")].map(gd =>
  JSON.stringify({data: gd.data, layout: gd.layout}, (k, v) => ArrayBuffer.isView(v) ? Array.from(v) : v))"""

FLOOR_HTML = """<!doctype html><html><head><meta charset="utf-8">
<script src="{plotly}"></script></head><body style="margin:0"><div id="charts"></div></body></html>"""
# The plotly.js the app's page loaded (its URL, from the page's resource timings).
PLOTLY_URL_JS = "() => performance.getEntriesByType('resource').map(e => e.name).find(n => /plotly[^/]*[.]js$/.test(n))"

# newPlot of every figure into a fresh div each; resolves after two frames, with performance.now().
NEWPLOT_JS = """async figures => {
  const root = document.getElementById('charts'); root.replaceChildren();
  for (const text of figures) {
    const f = JSON.parse(text), gd = document.createElement('div'); root.appendChild(gd);
    await Plotly.newPlot(gd, f.data, f.layout, {displaylogo: false});
  }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now();
}"""

# Plotly.react of every chart to its new figure (parsed beforehand, outside the time), then two frames: seconds.
REACT_JS = """async figures => {
  const parsed = figures.map(t => JSON.parse(t)), divs = [...document.getElementById('charts').children];
  const begin = performance.now();
  for (let i = 0; i < parsed.length; i++)
    await Plotly.react(divs[i], parsed[i].data, parsed[i].layout, {displaylogo: false});
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return (performance.now() - begin) / 1000;
}"""


# What the app does instead (Streamlit keys each chart by an id hashed from its figure, so a changed figure is a new
# React element): every chart's plot purged and its new figure drawn afresh, then two frames: seconds.
REMOUNT_JS = """async figures => {
  const parsed = figures.map(t => JSON.parse(t)), divs = [...document.getElementById('charts').children];
  const begin = performance.now();
  for (let i = 0; i < parsed.length; i++) {
    Plotly.purge(divs[i]);
    await Plotly.newPlot(divs[i], parsed[i].data, parsed[i].layout, {displaylogo: false});
  }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return (performance.now() - begin) / 1000;
}"""


def wait_until_drawn(page, text: str, *, charts: bool = True) -> None:
    """Until ``text`` is on the page, the script has finished, every chart has drawn (``charts``) and nothing has
    changed for QUIET_MS."""
    page.wait_for_function(  # textContent, not innerText: a poll must not lay the page out while it draws
        "t => document.querySelector(\"[data-testid='stMain']\")?.textContent.includes(t)",
        arg=text,
        timeout=TIMEOUT_S * 1000,
        polling=100,
    )
    if charts:
        chromium.wait_for_charts(page, TIMEOUT_S)
    else:
        page.wait_for_selector(SCRIPT_DONE, timeout=TIMEOUT_S * 1000)
    page.wait_for_function(QUIET_JS, arg=QUIET_MS, timeout=TIMEOUT_S * 1000, polling=50)


def visitor(browser, init_script: str, before=None):
    """A new browser profile; ``before(page)`` first opens the page once in it (a returning visitor's profile)."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(init_script)
    if before is not None:
        page = context.new_page()
        before(page)
        page.close()
    return context


def _earlier(query: dict[str, str]) -> dict[str, str]:
    """A returning visitor's earlier visit: the same page with another seed (so today's still misses the cache)."""
    return {**query, "seed": str(int(query.get("seed", 0)) + 50_000)}


def visit(browser, url: str, query: dict[str, str], *, returning: bool = False) -> dict:
    """One visitor, new (a new browser profile) or ``returning``: first paint and slider move in seconds, and the
    figures before and after the move as the app's DOM holds them."""
    tokens, heads, batch = int(query.get("num_tokens", 6)), int(query.get("num_heads", 2)), 2

    def first_page(page, query: dict[str, str]) -> None:
        page.goto(f"{url}/?{urlencode(query)}", timeout=TIMEOUT_S * 1000)
        wait_until_drawn(page, f"({batch}, {heads}, {tokens}, {tokens})")

    context = visitor(
        browser, WATCH_JS + WS_JS, (lambda page: first_page(page, _earlier(query))) if returning else None
    )
    page = context.new_page()
    first_page(page, query)
    first_paint = page.evaluate("() => window.__lastChange") / 1000  # ms since navigation began
    errors = page.locator("[data-testid='stException'], [data-testid='stAlertContentError']").count()
    if errors:
        raise RuntimeError(f"{query}: {errors} errors on the page")
    before = page.evaluate(FIGURES_JS)
    slider = page.locator("[data-testid='stSlider']").filter(has_text="num_tokens").locator("input")
    slider.focus()
    begin = page.evaluate("() => performance.now()")
    page.keyboard.press("ArrowRight")
    wait_until_drawn(page, f"({batch}, {heads}, {tokens + 1}, {tokens + 1})")
    slider_move = (page.evaluate("() => window.__lastChange") - begin) / 1000
    server = (page.evaluate("() => window.__lastMessage") - begin) / 1000
    after = page.evaluate(FIGURES_JS)
    plotly_url = page.evaluate(PLOTLY_URL_JS)
    context.close()
    return {
        "paint": first_paint,
        "move": slider_move,
        "server": server,
        "before": before,
        "after": after,
        "plotly_url": plotly_url,
    }


def streamlit_floor(browser, url: str, query: dict[str, str], *, returning: bool = False) -> tuple[float, float]:
    """(first page, slider move) in seconds on bench/streamlit_floor.py (the same sidebar, no figure): Streamlit's own
    first page (until the page is quiet) and its move from ``ArrowRight`` on num_tokens to the last change, for the
    same kind of visitor as in ``visit``."""
    tokens, heads = int(query.get("num_tokens", 6)), int(query.get("num_heads", 2))

    def first_page(page, query: dict[str, str]) -> None:
        page.goto(f"{url}/?{urlencode(query)}", timeout=TIMEOUT_S * 1000)
        wait_until_drawn(page, f"(2, {heads}, {tokens}, {tokens})", charts=False)

    context = visitor(browser, WATCH_JS, (lambda page: first_page(page, _earlier(query))) if returning else None)
    page = context.new_page()
    first_page(page, query)
    first = page.evaluate("() => window.__lastChange") / 1000
    page.locator("[data-testid='stSlider']").filter(has_text="num_tokens").locator("input").focus()
    begin = page.evaluate("() => performance.now()")
    page.keyboard.press("ArrowRight")
    wait_until_drawn(page, f"(2, {heads}, {tokens + 1}, {tokens + 1})", charts=False)
    move = (page.evaluate("() => window.__lastChange") - begin) / 1000
    context.close()
    return first, move


def streamlit_move(browser, url: str, query: dict[str, str]) -> float:
    """Seconds of Streamlit's own slider move for a new visitor (``streamlit_floor``)."""
    return streamlit_floor(browser, url, query)[1]


def floor(
    browser, url: str, before: list[str], after: list[str], *, returning: bool = False, html: str = FLOOR_HTML_NAME
) -> tuple[float, float, float]:
    """(load + newPlot, react, purge + newPlot) in seconds on a bare page from the app's server (``url``), in a new
    browser profile (``returning``: one that drew the same figures on the same page before): plotly.js alone drawing
    the app's figures, then redrawing them as the app's slider move did, then as a remount does."""
    if len(before) != len(after):
        raise RuntimeError(f"{len(before)} charts before the move, {len(after)} after: no one-to-one react")
    floor_url = f"{url}/app/static/{html}"

    def draw(page) -> float:
        page.goto(floor_url, timeout=TIMEOUT_S * 1000)
        return page.evaluate(NEWPLOT_JS, before) / 1000  # ms since navigation began

    context = visitor(browser, "", draw if returning else None)
    page = context.new_page()
    load_and_new_plot = draw(page)
    react = page.evaluate(REACT_JS, after)
    page.evaluate(NEWPLOT_JS, before)
    remount = page.evaluate(REMOUNT_JS, after)
    context.close()
    return load_and_new_plot, react, remount


def measure(
    browser, urls: tuple[str, str], query: dict[str, str], repeats: int, offset: int, *, returning: bool = False
) -> dict[str, list]:
    """``repeats`` visits to the app (``urls[0]``), each with its floors measured straight after it (so a busy machine
    slows all alike): plotly's, on a bare page from the app's server, and Streamlit's, on bench/streamlit_floor.py
    (``urls[1]``); every one a new visitor, or every one a ``returning`` visitor."""
    names = ("paint", "move", "server", "newplot", "react", "remount", "streamlit_first", "streamlit", "full")
    found: dict[str, list[float]] = {name: [] for name in (*names, "charts")}
    for repeat in range(repeats):
        seeded = {**query, "seed": str(offset + repeat)}  # a new seed: a cache miss on the server
        run = visit(browser, urls[0], seeded, returning=returning)
        newplot, react, remount = floor(browser, urls[0], run["before"], run["after"], returning=returning)
        values = (
            run["paint"],
            run["move"],
            run["server"],
            newplot,
            react,
            remount,
            *streamlit_floor(browser, urls[1], seeded, returning=returning),
            floor(browser, urls[0], run["before"], run["after"], returning=returning, html=FULL_HTML_NAME)[0],
        )
        for name, value in zip(names, values, strict=True):
            found[name].append(value)
        found["charts"].append(len(run["after"]))
    return found


def table_row(name: str, found: dict[str, list[float]]) -> str:
    median = {key: statistics.median(values) for key, values in found.items()}
    paint, move, newplot, react = median["paint"], median["move"], median["newplot"], median["react"]
    paint_goal, move_goal = 1.5 * newplot, 2 * react + 0.15
    return (
        f"| {name} | {max(found['charts'])} | {paint:.2f} s | {newplot:.2f} s | {paint / newplot:.1f}× | "
        f"{paint_goal:.2f} s {'✓' if paint <= paint_goal else '✗'} | {median['streamlit_first']:.2f} s | "
        f"{paint - median['streamlit_first'] - newplot:.2f} s | {move:.2f} s | {react:.2f} s | "
        f"{move / react:.1f}× | {move_goal:.2f} s {'✓' if move <= move_goal else '✗'} | {median['streamlit']:.2f} s | "
        f"{move - median['streamlit'] - react:.2f} s | {median['remount']:.2f} s | {median['server']:.2f} s | "
        f"{median['full']:.2f} s | {paint / median['full']:.2f}× |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--case", choices=["all", *map(str, range(len(CASES)))], default="all")
    parser.add_argument("--returning", action="store_true", help="returning visitors: each profile saw the page before")
    parser.add_argument("--root", type=Path, help="another checkout's app (the code before a change), same bench")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    cases = list(CASES.items()) if args.case == "all" else [list(CASES.items())[int(args.case)]]
    floor_log = Path(__file__).resolve().parents[1] / "artifacts" / "streamlit-floor.log"
    with (
        sync_playwright() as playwright,
        StreamlitServer(root=args.root or ROOT) as server,
        StreamlitServer(FLOOR_PAGE, log_path=floor_log) as bare,
    ):
        browser = chromium.launch(playwright)
        start = time.perf_counter()
        warm = visit(browser, server.url, {"seed": "1"})  # the server's first visitor: imports, first compilations
        streamlit_move(browser, bare.url, {"seed": "1"})
        static = server.root / "static"  # the bare page, served from the app's static folder beside its plotly.js
        floor_html = static / FLOOR_HTML_NAME
        plotly_name = warm["plotly_url"].rsplit("/", 1)[-1]
        if warm["plotly_url"] != f"{server.url}/app/static/{plotly_name}":
            raise RuntimeError(f"the app loaded plotly.js from {warm['plotly_url']}, not its static folder")
        floor_html.write_text(FLOOR_HTML.format(plotly=plotly_name), encoding="utf-8")
        full_js, full_html = static / FULL_JS_NAME, static / FULL_HTML_NAME
        shutil.copyfile(PACKAGE_JS, full_js)
        os.utime(full_js, (SERVED_DATE, SERVED_DATE))
        full_html.write_text(FLOOR_HTML.format(plotly=FULL_JS_NAME), encoding="utf-8")
        try:
            kind = "returning" if args.returning else "new"
            print(f"(warm-up visit {time.perf_counter() - start:.1f} s; medians of {args.repeats} {kind} visitors)")
            print(
                "| settings | charts | app first paint | plotly load + newPlot | ratio | goal ≤ 1.5× | "
                "Streamlit's own first page (no figure) | the rest: app − Streamlit − plotly | "
                "app slider → redrawn | plotly react | ratio | goal ≤ 2× + 0.15 s | Streamlit's own move (no figure) | "
                "the rest: app − Streamlit − react | plotly purge + newPlot (a remount) | "
                "of the move, until the last websocket message | plotly load + newPlot with the full plotly.min.js | "
                "app first paint / that |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for index, (name, query) in enumerate(cases):
                offset = 7000 + 100 * index
                found = measure(browser, (server.url, bare.url), query, args.repeats, offset, returning=args.returning)
                print(table_row(name, found), flush=True)
        finally:
            for written in (floor_html, full_html, full_js):
                written.unlink(missing_ok=True)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
