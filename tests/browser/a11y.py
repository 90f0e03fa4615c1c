"""What the accessibility tests share: every page and tab to read, axe-core (the copy axe-playwright-python ships, so
nothing is downloaded at run time) run with the WCAG 2.0/2.1 A and AA rules, and the charts' names for a screen
reader. One file per mode (test_axe_*_browser.py), each parametrized by page, so xdist can spread them."""

from __future__ import annotations

import time

from .page_checks import PAGES, joined, open_page, press_for_results

# The tabs (st.tabs, lazy: only the open one is drawn) of each page: its URL name and each tab's URL value.
TABS = {
    "explorer": ("section", ("attention", "reshapes", "downloads")),
    "heads": ("part", ("heads", "circuits", "references")),
    "knobs": ("knob", ("temperature", "dropout", "presets")),
    "variants": ("section", ("heads", "bytes", "decode", "trained")),
}
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]  # axe-core's tags for WCAG 2.0 and 2.1, levels A and AA
# and its best practices: heading-order (a page's h1 followed by an h3) is one, which issue 42 counted
AXE_OPTIONS = {"runOnly": {"type": "tag", "values": [*WCAG_AA, "best-practice"]}, "resultTypes": ["violations"]}
STEPS = 12  # Step through's steps, each its own listing and figures
MODES = {"normal": "", "presenter": "presenter=true", "dark": ""}


def views(slug: str) -> list[str]:
    """The queries that open each tab of a page (each step of Step through; "" for a page without tabs)."""
    if slug == "step_through":
        return [f"step={step}" for step in range(1, STEPS + 1)]
    if slug not in TABS:
        return [""]
    name, values = TABS[slug]
    return [f"{name}={value}" for value in values]


def violations(page) -> list[str]:
    """axe-core's WCAG 2.x A/AA violations on the page as it is: "rule (impact): N nodes: first targets"."""
    from axe_playwright_python.sync_playwright import Axe

    response = Axe().run(page, options=AXE_OPTIONS).response
    return [
        f"{v['id']} ({v['impact']}): {len(v['nodes'])} nodes: "
        + "; ".join(str(node["target"]) for node in v["nodes"][:3])
        for v in response["violations"]
    ]


# Every chart element (explorer/glue/frame/chart.js) with its accessible name: role figure, named by aria-label.
CHART_NAMES_JS = """
() => [...document.querySelectorAll("[data-testid='stMain'] .mha-chart")].map((chart) => ({
  role: chart.getAttribute("role"), label: (chart.getAttribute("aria-label") || "").trim(),
}))
"""


def unnamed_charts(page) -> list[str]:
    """Charts a screen reader cannot read: not a figure, or named by less than a sentence."""
    found = []
    for chart in page.evaluate(CHART_NAMES_JS):
        if chart["role"] != "figure" or len(chart["label"].split()) < 6:
            found.append(f"a chart with role {chart['role']!r} and name {chart['label']!r}")
    return found


def check_page(browser, app_url: str, slug: str, mode: str) -> None:
    """Open each tab of one page in ``mode`` and read it with axe-core; fail on any violation or unnamed chart."""
    path, query = next((p, q) for s, p, q in PAGES if s == slug)
    scheme = "dark" if mode == "dark" else "light"
    context = browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1, color_scheme=scheme)
    page = context.new_page()
    problems, timings = [], []
    try:
        for tab in views(slug):
            open_page(page, app_url, path, joined("" if tab.startswith("step=") else query, tab, MODES[mode]))
            press_for_results(page, slug)
            start = time.perf_counter()
            found = violations(page)
            timings.append(f"{tab or slug}: axe {time.perf_counter() - start:.1f} s")
            problems += [f"{slug} {tab} ({mode}): {v}" for v in found]
            problems += [f"{slug} {tab} ({mode}): {c}" for c in unnamed_charts(page)]
    finally:
        context.close()
        print("\n".join(timings))
    assert not problems, "\n".join(problems)
