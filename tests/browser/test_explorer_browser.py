"""The Explorer in headless Chromium: opened from a URL, driven with the keyboard, photographed."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from explorer.glue.frame.chart import PACKAGE_JS, plotly_js_name

from .helpers import assert_charts, assert_no_exception, screenshot, settle, wait_for_app

pytestmark = pytest.mark.browser


def query_of(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_url_opens_the_view_and_a_keyboard_slider_move_reruns_and_updates_the_url(page, app_url):
    page.goto(f"{app_url}/?num_heads=4&num_tokens=8&d_out=8")
    wait_for_app(page)
    assert_no_exception(page)
    main = page.locator("[data-testid='stMain']")
    assert "4 heads × head_dim 2 = d_out 8, 8 tokens" in main.inner_text()
    page.locator(".js-plotly-plot").nth(4).wait_for(timeout=60_000)  # plotly draws after the script ends
    assert page.locator(".mha-chart.js-plotly-plot").count() >= 5
    screenshot(page, "explorer_4_heads_8_tokens")

    tokens_slider = page.locator("[data-testid='stSlider']").filter(has_text="num_tokens").locator("input")
    tokens_slider.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => new URLSearchParams(location.search).get('num_tokens') === '9'", timeout=60_000)
    wait_for_app(page)
    assert_no_exception(page)
    assert query_of(page)["num_tokens"] == "9"
    assert query_of(page)["num_heads"] == "4"
    assert "8 tokens" not in main.inner_text() and "9 tokens" in main.inner_text()


@pytest.fixture(scope="module")
def defaults_page(browser, app_url):
    """The Explorer at the book's defaults, opened once for the checks that only read it (each test its own check)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    page.goto(app_url)
    wait_for_app(page)
    assert_charts(page, 5)
    yield page
    context.close()


def test_the_charts_draw_with_the_plotly_js_version_the_plotly_package_ships(defaults_page, app_url):
    """The chart element loads plotly.js once, from the app's static folder, at the version of the package's own
    build (the figures' JSON is written for it)."""
    page = defaults_page
    assert_charts(page, 5)
    assert_no_exception(page)
    loaded = page.evaluate("performance.getEntriesByType('resource').map(e => e.name).filter(n => /plotly/i.test(n))")
    assert loaded == [f"{app_url}/app/static/{plotly_js_name()}"]
    shipped = re.search(r"plotly\.js v(\S+)", PACKAGE_JS.read_text(encoding="utf-8")[:200]).group(1)
    assert page.evaluate("window.Plotly.version") == shipped


def test_a_returning_visitor_takes_plotly_js_from_the_browser_cache(browser, app_url):
    """The second page in the same profile asks the server for no plotly.js: Streamlit's static folder sends no
    Cache-Control and never a 304, so without a fresh cached copy each visit downloaded all of it again."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    try:
        sizes = []
        for _ in range(2):
            page = context.new_page()
            page.goto(app_url)
            wait_for_app(page)
            assert_charts(page, 5)
            sizes.append(
                page.evaluate(
                    "performance.getEntriesByType('resource').filter(e => /plotly/.test(e.name))"
                    ".map(e => [e.transferSize, e.decodedBodySize])"
                )
            )
            page.close()
        assert sizes[0][0][0] > 0, "the first visit downloaded it"
        assert sizes[1] == [[0, sizes[0][0][1]]], "the returning visit took the whole file from its cache"
    finally:
        context.close()


def test_a_chart_whose_plotly_js_cannot_load_says_so(page, app_url):
    page.route(f"**/app/static/{plotly_js_name()}", lambda route: route.fulfill(status=404, body="not here"))
    page.goto(app_url)
    wait_for_app(page)
    note = page.locator(".mha-chart-error").first
    note.wait_for(timeout=30_000)
    assert "This chart could not be drawn: plotly.js did not load from" in note.inner_text()


def test_a_chart_follows_its_place_when_the_sidebar_folds(page, app_url):
    """plotly's `responsive` follows the window only; folding the sidebar widens the page without a window resize.
    Seen at 1280 × 800: the heads' chart stayed 402 px wide in a 454-px place. At 1000 px every chart's place is
    narrower than its widest with the sidebar open (at 1280 the full-width charts are at theirs already, and the
    front page's half-column pair is planned at 400 px), so every chart must grow."""
    page.set_viewport_size({"width": 1000, "height": 800})
    page.goto(app_url)
    wait_for_app(page)
    assert_charts(page, 5)
    widths = """() => [...document.querySelectorAll(".mha-chart.js-plotly-plot")].map(d =>
      [Math.round(d.getBoundingClientRect().width), Math.round(d._fullLayout.width)])"""
    before = page.evaluate(widths)
    page.locator("[data-testid='stSidebar']").hover()
    page.locator("[data-testid='stSidebarCollapseButton'] button").click()
    page.wait_for_function(
        f"() => ({widths})().some(([place], k) => place > {before}[k][0])", timeout=10_000
    )  # some place grew
    settle(page)  # until the charts have followed (chart.js marks a resize as drawing)
    after = page.evaluate(widths)
    grown = [k for k, (place, _) in enumerate(after) if place > before[k][0]]
    assert grown and all(after[k][1] == after[k][0] for k in grown), (before, after)


def test_book_defaults_show_the_books_numbers(defaults_page):
    page = defaults_page
    assert_no_exception(page)
    text = page.locator("[data-testid='stMain']").inner_text()
    assert "[0.3190, 0.4858]" in text and "[0.2575, 0.4028]" in text
    assert "matches the book's printed output" in text
    box = page.locator("[data-testid='stMain'] pre.mha-printed")  # boundary.printed, in st.code's box
    assert "[0.3190, 0.4858]" in box.inner_text() and "Source Code Pro" in box.evaluate(
        "b => getComputedStyle(b.querySelector('code')).fontFamily"
    )
    loaded = page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert not [name for name in loaded if "SyntaxHighlighter" in name]  # its Prism languages cost 0.4–0.8 s
    screenshot(page, "explorer_default")


def test_bad_url_shows_notices_not_a_traceback(page, app_url):
    page.goto(f"{app_url}/?seed=1e309&num_heads=<script>alert(1)</script>&d_out=7&device=cuda")
    wait_for_app(page)
    assert_no_exception(page)
    alerts = page.locator("[data-testid='stAlert']").all_inner_texts()
    assert any("seed=1e309 is not a whole number" in a for a in alerts), alerts
    assert page.locator("script:text('alert(1)')").count() == 0


# Every chart as drawn: its distinct x tick labels and its number of x axes (one per head where heads sit side by
# side), read from plotly's own DOM and layout, not from what the server sent.
DRAWN_JS = """() => [...document.querySelectorAll(".mha-chart.js-plotly-plot")].map(gd => ({
  title: String(gd.layout.title?.text ?? gd.layout.title ?? ''),
  labels: [...new Set([...gd.querySelectorAll('.xtick text')].map(t => t.textContent))].length,
  axes: Object.keys(gd._fullLayout?._subplots?.xaxis ?? {}).length}))"""


def wait_for_drawn(page, check: str, what: str, timeout: float = 90_000) -> list[dict]:
    """Until every chart drawn satisfies ``check`` (a JS expression over one chart ``c``): a chart that kept its old
    figure never does, and the test fails naming what it still shows."""
    predicate = f"() => {{ const charts = ({DRAWN_JS})(); return charts.length >= 5 && charts.every(c => {check}); }}"
    try:
        page.wait_for_function(predicate, timeout=timeout, polling=250)
    except Exception as error:  # Playwright's TimeoutError: say which charts are stale
        raise AssertionError(f"{what}: the charts still show {page.evaluate(DRAWN_JS)}") from error
    return page.evaluate(DRAWN_JS)


def move(page, label: str, shape: str) -> None:
    """One step right on the slider ``label``, until ``shape`` is on the page and the script has finished."""
    page.locator("[data-testid='stSlider']").filter(has_text=label).locator("input").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("s => document.querySelector(\"[data-testid='stMain']\").textContent.includes(s)", arg=shape)
    wait_for_app(page)
    assert_no_exception(page)


def test_every_chart_draws_the_new_figure_after_a_slider_move_and_a_tab_switch(page, app_url):
    """A chart must never keep its old figure. Streamlit's PlotlyChart reads its figure only when it mounts (and a
    remount with the same element id restores the figure it stored): with ids that ignore the figure, 4 of 5 charts
    kept showing 6 tokens and 2 heads after both moves (decisions.md, issue 20)."""
    page.goto(f"{app_url}/?seed=5")
    wait_for_app(page)
    before = wait_for_drawn(page, "c.labels === 6", "6 tokens")
    per_head = [chart["title"] for chart in before if chart["axes"] == 2]
    assert len(per_head) >= 3, before  # scores, masked scores, weights: one panel per head

    move(page, "num_tokens", "(2, 2, 7, 7)")
    wait_for_drawn(page, "c.labels === 7", "num_tokens 6 → 7")
    move(page, "num_heads", "(2, 3, 7, 7)")
    after = wait_for_drawn(page, "c.labels === 7 && c.axes !== 2", "num_heads 2 → 3")
    assert sorted(c["title"] for c in after if c["axes"] == 3) == sorted(per_head), after

    page.get_by_role("tab", name="Reshapes and output").click()
    page.wait_for_function("t => !document.body.textContent.includes(t)", arg="masked_scores ·", timeout=60_000)
    wait_for_app(page)
    page.get_by_role("tab", name="Attention, head by head").click()
    wait_for_app(page)
    back = wait_for_drawn(page, "c.labels === 7 && c.axes !== 2", "back on the attention tab")
    assert sorted(c["title"] for c in back if c["axes"] == 3) == sorted(per_head), back


# Each chart's element marked before a move; after it, whether each chart is still that element, and its name.
MARK_JS = "() => document.querySelectorAll('.mha-chart').forEach(chart => { chart.mhaBeforeMove = true; })"
CHARTS_JS = """() => [...document.querySelectorAll('.mha-chart')].map(chart => ({kept: chart.mhaBeforeMove === true,
  tabIndex: chart.tabIndex, role: chart.getAttribute('role'), name: chart.getAttribute('aria-label')}))"""


def test_charts_are_updated_in_place_when_a_notice_goes_and_the_keyboard_reaches_each(page, app_url):
    """A link's notice shows on the first run only. Gone, it moved every block after it up one place, and Streamlit
    remounted their charts: 5 of 6 drawn afresh on the first move at 8 heads × 512 tokens. And each chart is a named
    figure the keyboard reaches, so the tab panel holding them finds a tabbable child at once (react-aria then gives
    the panel no tab stop of its own); with none, it walked every chart's nodes on each change (decisions.md)."""
    page.goto(f"{app_url}/?seed=5&head=9")
    wait_for_app(page)
    assert "head=9 is not one of none, 0, 1" in " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    wait_for_drawn(page, "c.labels === 6", "6 tokens")
    page.evaluate(MARK_JS)
    move(page, "num_tokens", "(2, 2, 7, 7)")
    wait_for_drawn(page, "c.labels === 7", "num_tokens 6 → 7")
    assert "head=9" not in " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    charts = page.evaluate(CHARTS_JS)
    assert len(charts) >= 5 and all(chart["kept"] for chart in charts), charts
    assert all(chart["tabIndex"] == 0 and chart["role"] == "figure" for chart in charts), charts
    weights = "Attention weights: softmax of the scaled masked scores. Heatmap: 2 panels"  # the title, then the words
    assert any(chart["name"].startswith(weights) for chart in charts), [chart["name"] for chart in charts]
    assert page.locator("[role='tabpanel']:not([hidden])").first.get_attribute("tabindex") is None
