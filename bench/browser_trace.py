"""Where the browser's time goes in one slider move: Chrome's performance trace, summed by kind and by script.

One Streamlit server and headless Chromium. A new visitor opens the explorer (warm server), then Chrome traces one
``ArrowRight`` on the num_tokens slider until the page has been quiet for a while (bench/browser_timing.py's
criterion). From the trace, on the page's main thread:

* by kind: scripting (V8 function calls, compiles, GC), style recalcs, layout, paint and compositing, the rest;
* by script: the V8 CPU profiler's samples, self time summed by the script each sampled function lives in
  (Streamlit's PlotlyChart chunk holds plotly.js itself; index.*.js is Streamlit's React app);
* by function: the heaviest functions by self time, with their script;
* by task: every main-thread task from the key press to the page's last change, named by the script that most of its
  sampled JS belongs to: plotly.js (a chart's ``Plotly.react``), Streamlit's frontend (a React pass over the page's
  elements, on each batch of messages from the server), or no script (paint, layout, idle callbacks);
* the charts: how many of the ``.js-plotly-plot`` elements survived the move (a chart updated keeps its element, a
  chart remounted gets a new one), how many elements faded stale, and the layouts plotly.js ended up with.

``--floor`` traces the same move on bench/streamlit_floor.py (the same sidebar, no figure): Streamlit's own share.
``--first-page`` traces the first page instead, from navigation until every chart has drawn and the page is quiet,
with the same tables and when each of the page's resources loaded; ``--returning`` makes it a returning visitor's
(the same browser profile opened the page once before, so its HTTP cache holds what the server let it keep).

    python bench/browser_trace.py [--case 0|1] [--floor] [--first-page [--returning]] [--save trace.json]
"""

from __future__ import annotations

import argparse
import bisect
import collections
import contextlib
import json
import sys
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browser_timing import CASES, FLOOR_PAGE, TIMEOUT_S, VIEWPORT, WATCH_JS, wait_until_drawn  # noqa: E402

from harness import chromium  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402

CATEGORIES = [
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "v8.execute",
    "v8",
    "blink",
    "blink.user_timing",
    "disabled-by-default-v8.cpu_profiler",
]
KINDS = {
    "scripting": {
        "FunctionCall",
        "EvaluateScript",
        "v8.compile",
        "v8.compileModule",
        "TimerFire",
        "EventDispatch",
        "FireAnimationFrame",
        "RunMicrotasks",
        "V8.GC_SCAVENGER",
        "MajorGC",
        "MinorGC",
        "v8.run",
        "V8.Execute",
        "ParseHTML",
        "XHRReadyStateChange",
        "v8.evaluateModule",
        "FireIdleCallback",
    },
    "style recalc": {"UpdateLayoutTree", "RecalculateStyles", "ParseAuthorStyleSheet"},
    "layout": {"Layout", "UpdateLayerTree", "HitTest", "ScheduleStyleRecalculation"},
    "paint + composite": {
        "Paint",
        "PaintImage",
        "CompositeLayers",
        "Layerize",
        "PrePaint",
        "Commit",
        "RasterTask",
        "UpdateLayer",
        "PaintSetup",
        "Decode Image",
        "ImageDecodeTask",
    },
}
# Before the move: every chart's element marked; after, the marks left say which charts kept their element.
MARK_JS = "() => document.querySelectorAll('.js-plotly-plot').forEach(gd => gd.__beforeMove = true)"
CHARTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
  kept: gd.__beforeMove === true, autosize: gd.layout.autosize, width: gd.layout.width, height: gd.layout.height,
  traces: gd.data.length, types: [...new Set(gd.data.map(t => t.type))].join('+'),
  texts: gd.querySelectorAll('text').length, nodes: gd.querySelectorAll('*').length}))"""
STALE_JS = """() => { window.__staleSeen = new Set(); new MutationObserver(rs => rs.forEach(r => {
  if (r.attributeName === 'data-stale' && r.target.getAttribute('data-stale') === 'true')
    window.__staleSeen.add(r.target);
})).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-stale']}); }"""


def main_thread(events: list[dict]) -> tuple[int, int]:
    """(pid, tid) of the app page's renderer main thread: the CrRendererMain thread with the most events."""
    names = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("name") == "thread_name" and e.get("args", {}).get("name") == "CrRendererMain"
    }
    counts = collections.Counter((e["pid"], e["tid"]) for e in events if (e["pid"], e["tid"]) in names)
    return counts.most_common(1)[0][0]


def by_kind(events: list[dict], thread: tuple[int, int]) -> dict[str, float]:
    """Milliseconds per kind: the outermost complete events of each kind on the thread (nested ones not twice)."""
    spans = sorted(
        (e["ts"], e["ts"] + e.get("dur", 0), e["name"])
        for e in events
        if (e["pid"], e["tid"]) == thread and e.get("ph") == "X" and e.get("dur")
    )
    totals: dict[str, float] = collections.defaultdict(float)
    open_until = {kind: 0 for kind in KINDS}
    busy_until, busy = 0, 0.0
    for begin, end, name in spans:
        for kind, members in KINDS.items():
            if name in members and begin >= open_until[kind]:
                totals[kind] += (end - begin) / 1000
                open_until[kind] = end
        if name in ("RunTask", "ThreadControllerImpl::RunTask") and begin >= busy_until:
            busy += (end - begin) / 1000
            busy_until = end
    totals["main thread busy (tasks)"] = busy
    return dict(totals)


def samples(events: list[dict], thread: tuple[int, int]) -> list[tuple[float, float, str, str]]:
    """The CPU profiler's samples on the thread's process, in time order: (time in the trace's µs, duration in ms,
    function, script; a native function's script is its own name in brackets)."""
    starts = {e.get("id"): e["args"]["data"]["startTime"] for e in events if e.get("name") == "Profile"}
    nodes: dict[tuple, dict] = {}
    clock: dict = {}
    found = []
    for event in events:
        if event.get("name") != "ProfileChunk" or event["pid"] != thread[0]:
            continue
        profile_id, data = event.get("id"), event["args"]["data"]
        profile = data.get("cpuProfile", {})
        for node in profile.get("nodes", []):
            nodes[(profile_id, node["id"])] = node["callFrame"]
        for node_id, delta in zip(profile.get("samples", []), data.get("timeDeltas", []), strict=False):
            clock[profile_id] = clock.get(profile_id, starts.get(profile_id, 0)) + delta
            frame = nodes.get((profile_id, node_id), {})
            function = frame.get("functionName") or ""
            script = (frame.get("url") or f"({function or 'program'})").rsplit("/", 1)[-1]
            found.append((clock[profile_id], delta / 1000, function or "(anonymous)", script))
    return sorted(found)


def profile_self_times(events: list[dict], thread: tuple[int, int]) -> tuple[dict, dict]:
    """Self time (ms) by script and by (function, script), from the CPU profiler's samples on the thread."""
    by_script: dict[str, float] = collections.defaultdict(float)
    by_function: dict[tuple[str, str], float] = collections.defaultdict(float)
    for _, ms, function, script in samples(events, thread):
        by_script[script] += ms
        by_function[(function, script)] += ms
    return dict(by_script), dict(by_function)


def task_owner(scripts: collections.Counter) -> str:
    """What a task was, by the script most of its sampled JS belongs to."""
    if not scripts:
        return "no script: paint, layout, the rest"
    script = scripts.most_common(1)[0][0]
    return "plotly.js: a chart's Plotly.react" if "plotly" in script else "Streamlit's frontend: a React pass"


def by_task(
    events: list[dict], thread: tuple[int, int], move_s: float, *, from_key: bool = True
) -> dict[str, tuple[float, int]]:
    """(ms, tasks) per owner, over the main thread's tasks from the key press (else the thread's first task) to the
    move's (or first page's) end."""
    on_thread = [e for e in events if (e["pid"], e["tid"]) == thread and e.get("ph") == "X"]
    key = min(
        (
            e["ts"]
            for e in on_thread
            if (e["name"] == "EventDispatch" and e["args"]["data"].get("type") == "keydown")
            or (not from_key and e["name"] == "RunTask")
        ),
        default=None,
    )
    if key is None:
        return {}
    tasks = [e for e in on_thread if e["name"] == "RunTask" and key <= e["ts"] <= key + move_s * 1e6]
    sampled = [(when, ms, script) for when, ms, _, script in samples(events, thread) if not script.startswith("(")]
    times = [when for when, _, _ in sampled]
    totals: dict[str, tuple[float, int]] = {}
    for task in tasks:
        end = task["ts"] + task.get("dur", 0)
        scripts = collections.Counter()
        for _, ms, script in sampled[bisect.bisect_left(times, task["ts"]) : bisect.bisect_right(times, end)]:
            scripts[script] += ms
        owner = task_owner(scripts)
        ms, count = totals.get(owner, (0.0, 0))
        totals[owner] = (ms + task.get("dur", 0) / 1000, count + 1)
    return totals


def trace_move(browser, url: str, query: dict[str, str], save: Path | None, *, charts: bool = True) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(WATCH_JS)
    page = context.new_page()
    tokens, heads = int(query.get("num_tokens", 6)), int(query.get("num_heads", 2))
    page.goto(f"{url}/?{urlencode(query)}", timeout=TIMEOUT_S * 1000)
    wait_until_drawn(page, f"(2, {heads}, {tokens}, {tokens})", charts=charts)
    page.evaluate(MARK_JS)
    page.evaluate(STALE_JS)
    slider = page.locator("[data-testid='stSlider']").filter(has_text="num_tokens").locator("input")
    slider.focus()
    browser.start_tracing(page=page, categories=CATEGORIES)
    begin = page.evaluate("() => performance.now()")
    page.keyboard.press("ArrowRight")
    wait_until_drawn(page, f"(2, {heads}, {tokens + 1}, {tokens + 1})", charts=charts)
    move = (page.evaluate("() => window.__lastChange") - begin) / 1000
    raw = browser.stop_tracing()
    drawn = page.evaluate(CHARTS_JS)
    stale = page.evaluate("() => window.__staleSeen.size")
    context.close()
    if save:
        save.write_bytes(raw)
    report(json.loads(raw)["traceEvents"], move, drawn, stale)


# When each resource of the page began and ended loading (ms since navigation) and how many bytes came over the wire
# (0: the HTTP cache answered; a revalidated or refetched file counts its bytes), the heaviest and plotly.js first.
RESOURCES_JS = """() => performance.getEntriesByType('resource').map(e => ({
  name: e.name.split('?')[0].split('/').pop(), start: e.startTime, end: e.responseEnd, wire: e.transferSize,
  body: e.decodedBodySize}))"""


def trace_first_page(
    browser, url: str, query: dict[str, str], save: Path | None, *, returning: bool, charts: bool = True
) -> None:
    """Chrome's trace of a first page: navigation until every chart has drawn and the page is quiet."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(WATCH_JS)
    tokens, heads = int(query.get("num_tokens", 6)), int(query.get("num_heads", 2))
    if returning:  # the same profile saw the page once, with other settings (the server's cache misses again)
        page = context.new_page()
        page.goto(f"{url}/?{urlencode({**query, 'seed': str(int(query['seed']) + 1)})}", timeout=TIMEOUT_S * 1000)
        wait_until_drawn(page, f"(2, {heads}, {tokens}, {tokens})", charts=charts)
        page.close()
    page = context.new_page()
    browser.start_tracing(page=page, categories=CATEGORIES)
    page.goto(f"{url}/?{urlencode(query)}", timeout=TIMEOUT_S * 1000)
    wait_until_drawn(page, f"(2, {heads}, {tokens}, {tokens})", charts=charts)
    first = page.evaluate("() => window.__lastChange") / 1000
    raw = browser.stop_tracing()
    resources = page.evaluate(RESOURCES_JS)
    drawn = page.evaluate(CHARTS_JS)
    context.close()
    if save:
        save.write_bytes(raw)
    print(f"{'returning' if returning else 'new'} visitor's first page → quiet: {first:.2f} s (traced)")
    print("\nresources: the heaviest ten and plotly.js (ms since navigation; bytes over the wire, 0: from the cache)")
    heavy = sorted(resources, key=lambda r: -r["body"])[:10]
    for r in sorted(
        {id(r): r for r in heavy + [r for r in resources if "plotly" in r["name"]]}.values(), key=lambda r: r["start"]
    ):
        print(f"  {r['name'][:44]:44s} {r['start']:7.0f} → {r['end']:7.0f}  wire {r['wire']:>9,}  body {r['body']:>9,}")
    print(f"  ({len(resources)} resources; the last ended at {max(r['end'] for r in resources):.0f} ms)")
    report(json.loads(raw)["traceEvents"], first, drawn, 0, what="first page", from_key=False)


def report(
    events: list[dict], move: float, charts: list[dict], stale: int, *, what: str = "slider move", from_key=True
) -> None:
    thread = main_thread(events)
    print(f"{what} → quiet: {move:.2f} s (traced, so slower than untraced)")
    print("\nmain thread, by kind (ms):")
    for kind, ms in sorted(by_kind(events, thread).items(), key=lambda item: -item[1]):
        print(f"  {kind:28s} {ms:8.0f}")
    scripts, functions = profile_self_times(events, thread)
    print("\nJS self time by script (CPU profiler samples, ms):")
    for script, ms in sorted(scripts.items(), key=lambda item: -item[1])[:12]:
        print(f"  {script[:60]:60s} {ms:8.0f}")
    print(
        f"\nmain thread, by task, from the {'key press' if from_key else 'first task'} to the last change (ms, tasks):"
    )
    for owner, (ms, count) in sorted(
        by_task(events, thread, move, from_key=from_key).items(), key=lambda item: -item[1][0]
    ):
        print(f"  {owner:44s} {ms:7.0f} {count:5d}")
    print("\nheaviest functions by self time (ms):")
    for (name, script), ms in sorted(functions.items(), key=lambda item: -item[1])[:25]:
        print(f"  {name[:40]:40s} {script[:40]:40s} {ms:7.0f}")
    kept = sum(chart["kept"] for chart in charts)
    if from_key:
        print(f"\ncharts: {len(charts)}, kept their element across the move: {kept} (the rest were remounted)")
        print(f"element containers that went stale (faded) during the move: {stale}")
    for chart in charts:
        print(f"  {chart}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=[str(i) for i in range(len(CASES))], default="0")
    parser.add_argument("--save", type=Path)
    parser.add_argument("--url", help="a running server's URL (else one is started and warmed)")
    parser.add_argument("--seed", default="8001")
    parser.add_argument("--floor", action="store_true", help="trace bench/streamlit_floor.py: no figure")
    parser.add_argument("--first-page", action="store_true", help="trace the first page, not a slider move")
    parser.add_argument("--returning", action="store_true", help="the first page of a returning visitor")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    name, query = list(CASES.items())[int(args.case)]
    print(f"case: {name}")
    with sync_playwright() as playwright, contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(StreamlitServer(FLOOR_PAGE if args.floor else "app.py")).url
        browser = chromium.launch(playwright)
        if not args.url:
            page = browser.new_page()
            page.goto(f"{url}/?seed=1", timeout=TIMEOUT_S * 1000)  # the server's first visitor: warm-up
            if not args.floor:
                chromium.wait_for_charts(page, TIMEOUT_S)
            page.close()
        if args.first_page:
            trace_first_page(
                browser, url, {**query, "seed": args.seed}, args.save, returning=args.returning, charts=not args.floor
            )
        else:
            trace_move(browser, url, {**query, "seed": args.seed}, args.save, charts=not args.floor)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
