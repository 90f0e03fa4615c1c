"""What a student waits for in the browser, beside what plotly.js itself needs for the very same figures.

One Streamlit server (started and warmed by one visit first, as a class's server is) and headless Chromium on this
machine. For each case, ``--repeats`` new visitors (a new browser profile: nothing cached), each with a seed of their
own, so that every first paint and every slider move misses the server's cache as a new student's settings would:

* app first paint: from navigation to the page's last change (a MutationObserver on the main area and the sidebar,
  installed before the app's scripts), once the script has finished and every plotly chart has drawn;
* app slider move: ``ArrowRight`` on the focused num_tokens slider, to the page's last change once the new shape is in
  the captions and every chart has drawn; of it, the time until the page took the server's last websocket message
  (the server's rerun and the transfer, as late as the browser's busy main thread let the message in).

Beside each visit, in the same browser, the floor: a bare page that loads the plotly.js the installed plotly package
ships (``plotly/package_data/plotly.min.js``) and draws the figures read from the app's own DOM (each chart's
``data`` and ``layout`` as plotly.js holds them, Streamlit's theme and sizes applied), before and after the move:

* load + newPlot: from navigation until every figure is drawn (the first-paint floor);
* react: ``Plotly.react`` of every chart from its before-figure to its after-figure (the redraw floor);
* purge + newPlot: every chart drawn afresh with its after-figure, what a remounted chart costs plotly.js.

And Streamlit's floor, on a second server: bench/streamlit_floor.py, the same settings sidebar and title and no
figure, its num_tokens slider moved as the app's (a new visitor, the same settings). The app's move less this and
less plotly's react is what the app adds: its server work on a miss and the elements it draws.

Goal (issue 20): slider ≤ 2 × react + 0.15 s; first paint ≤ 1.5 × (load + newPlot).

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

import plotly  # noqa: E402

from harness import chromium  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402

CASES = {
    "defaults (2 heads × 6 tokens)": {},
    "8 heads × 512 tokens": {"num_heads": "8", "num_tokens": "512", "context_length": "1024", "input": "random"},
}
TIMEOUT_S = 120
QUIET_MS = 600  # the page counts as drawn once nothing in it has changed for this long
VIEWPORT = {"width": 1600, "height": 1000}
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
FLOOR_URL = "http://floor.invalid/"
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

FLOOR_HTML = f"""<!doctype html><html><head><meta charset="utf-8">
<script src="{FLOOR_URL}plotly.min.js"></script></head><body style="margin:0"><div id="charts"></div></body></html>"""

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


def _drawn(page, text: str, *, charts: bool = True) -> None:
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


def visit(browser, url: str, query: dict[str, str]) -> dict:
    """One new visitor (a new browser profile): first paint and slider move in seconds, and the figures before and
    after the move as the app's DOM holds them."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(WATCH_JS + WS_JS)
    page = context.new_page()
    tokens, heads, batch = int(query.get("num_tokens", 6)), int(query.get("num_heads", 2)), 2
    page.goto(f"{url}/?{urlencode(query)}", timeout=TIMEOUT_S * 1000)
    _drawn(page, f"({batch}, {heads}, {tokens}, {tokens})")
    first_paint = page.evaluate("() => window.__lastChange") / 1000  # ms since navigation began
    errors = page.locator("[data-testid='stException'], [data-testid='stAlertContentError']").count()
    if errors:
        raise RuntimeError(f"{query}: {errors} errors on the page")
    before = page.evaluate(FIGURES_JS)
    slider = page.locator("[data-testid='stSlider']").filter(has_text="num_tokens").locator("input")
    slider.focus()
    begin = page.evaluate("() => performance.now()")
    page.keyboard.press("ArrowRight")
    _drawn(page, f"({batch}, {heads}, {tokens + 1}, {tokens + 1})")
    slider_move = (page.evaluate("() => window.__lastChange") - begin) / 1000
    server = (page.evaluate("() => window.__lastMessage") - begin) / 1000
    after = page.evaluate(FIGURES_JS)
    context.close()
    return {"paint": first_paint, "move": slider_move, "server": server, "before": before, "after": after}


def streamlit_move(browser, url: str, query: dict[str, str]) -> float:
    """Seconds from ``ArrowRight`` on num_tokens to the last change on bench/streamlit_floor.py (the same sidebar,
    no figure): Streamlit's own rerun and rendering, for a new visitor, as in ``visit``."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(WATCH_JS)
    page = context.new_page()
    tokens, heads = int(query.get("num_tokens", 6)), int(query.get("num_heads", 2))
    page.goto(f"{url}/?{urlencode(query)}", timeout=TIMEOUT_S * 1000)
    _drawn(page, f"(2, {heads}, {tokens}, {tokens})", charts=False)
    page.locator("[data-testid='stSlider']").filter(has_text="num_tokens").locator("input").focus()
    begin = page.evaluate("() => performance.now()")
    page.keyboard.press("ArrowRight")
    _drawn(page, f"(2, {heads}, {tokens + 1}, {tokens + 1})", charts=False)
    move = (page.evaluate("() => window.__lastChange") - begin) / 1000
    context.close()
    return move


def floor(browser, before: list[str], after: list[str]) -> tuple[float, float, float]:
    """(load + newPlot, react, purge + newPlot) in seconds on a bare page in a new browser profile: plotly.js alone
    drawing the app's figures, then redrawing them as the app's slider move did, then as a remount does."""
    if len(before) != len(after):
        raise RuntimeError(f"{len(before)} charts before the move, {len(after)} after: no one-to-one react")
    context = browser.new_context(viewport=VIEWPORT)
    script = PLOTLY_JS.read_bytes()
    context.route(
        f"{FLOOR_URL}**",
        lambda route: route.fulfill(
            body=script if route.request.url.endswith(".js") else FLOOR_HTML.encode(),
            content_type="text/javascript" if route.request.url.endswith(".js") else "text/html",
        ),
    )
    page = context.new_page()
    page.goto(FLOOR_URL, timeout=TIMEOUT_S * 1000)
    load_and_new_plot = page.evaluate(NEWPLOT_JS, before) / 1000  # ms since navigation began
    react = page.evaluate(REACT_JS, after)
    page.evaluate(NEWPLOT_JS, before)
    remount = page.evaluate(REMOUNT_JS, after)
    context.close()
    return load_and_new_plot, react, remount


def measure(browser, urls: tuple[str, str], query: dict[str, str], repeats: int, offset: int) -> dict[str, list]:
    """``repeats`` visits to the app (``urls[0]``), each with its floors measured straight after it (so a busy machine
    slows all alike): plotly's, on a bare page, and Streamlit's, on bench/streamlit_floor.py (``urls[1]``)."""
    names = ("paint", "move", "server", "newplot", "react", "remount", "streamlit")
    found: dict[str, list[float]] = {name: [] for name in (*names, "charts")}
    for repeat in range(repeats):
        seeded = {**query, "seed": str(offset + repeat)}  # a new seed: a cache miss on the server
        run = visit(browser, urls[0], seeded)
        newplot, react, remount = floor(browser, run["before"], run["after"])
        values = (
            run["paint"],
            run["move"],
            run["server"],
            newplot,
            react,
            remount,
            streamlit_move(browser, urls[1], seeded),
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
        f"{paint_goal:.2f} s {'✓' if paint <= paint_goal else '✗'} | {move:.2f} s | {react:.2f} s | "
        f"{move / react:.1f}× | {move_goal:.2f} s {'✓' if move <= move_goal else '✗'} | {median['streamlit']:.2f} s | "
        f"{move - median['streamlit'] - react:.2f} s | {median['remount']:.2f} s | {median['server']:.2f} s |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--case", choices=["all", *map(str, range(len(CASES)))], default="all")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    cases = list(CASES.items()) if args.case == "all" else [list(CASES.items())[int(args.case)]]
    floor_log = Path(__file__).resolve().parents[1] / "artifacts" / "streamlit-floor.log"
    with (
        sync_playwright() as playwright,
        StreamlitServer() as server,
        StreamlitServer(FLOOR_PAGE, log_path=floor_log) as bare,
    ):
        browser = chromium.launch(playwright)
        start = time.perf_counter()
        visit(browser, server.url, {"seed": "1"})  # the server's first visitor: imports, first compilations
        streamlit_move(browser, bare.url, {"seed": "1"})
        print(f"(warm-up visit {time.perf_counter() - start:.1f} s; medians of {args.repeats} new visitors)")
        print(
            "| settings | charts | app first paint | plotly load + newPlot | ratio | goal ≤ 1.5× | "
            "app slider → redrawn | plotly react | ratio | goal ≤ 2× + 0.15 s | Streamlit's own move (no figure) | "
            "the rest: app − Streamlit − react | plotly purge + newPlot (a remount) | "
            "of the move, until the last websocket message |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for index, (name, query) in enumerate(cases):
            found = measure(browser, (server.url, bare.url), query, args.repeats, offset=7000 + 100 * index)
            print(table_row(name, found), flush=True)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
