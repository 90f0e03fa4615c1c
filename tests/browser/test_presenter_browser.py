"""Presenter-grade pages in headless Chromium: screenshots at the defaults, 8 heads × 64 tokens, the largest
settings, presenter mode at 1280 × 720 and 1920 × 1080, and dark mode; and the checks a projector needs.

A check fails when, in presenter mode, a page's main figure is not entirely on the first screen (every page: Trained
heads after a 10-step training, Cost after measuring up to 128 tokens), when a table's text is not larger than the
same page's text in normal mode (or the table is drawn on a canvas, which CSS cannot enlarge), or when any text is
clipped (a heading, caption, metric, table header, sidebar page name or figure title wider than its box, or a slider's
value sitting on its knob). Every screenshot is saved under artifacts/screenshots/ (see helpers.SCREENSHOTS).
"""

from __future__ import annotations

import pytest

from .helpers import SCREENSHOTS, assert_no_exception, screenshot, wait_for_app

pytestmark = pytest.mark.browser

# (slug, page path, query) for the pages that draw at once; Trained heads and Cost draw after a click.
PAGES = [
    ("explorer", "", ""),
    ("step_through", "Step_through", "step=5"),
    ("heads", "Heads_and_references", ""),
    ("masks", "Masks_and_cross_attention", ""),
    ("knobs", "Knobs_that_teach", ""),
    ("follow", "Follow_a_token", ""),
    ("trained", "Trained_heads", "steps=10"),  # the fewest steps the page offers: trained in a second or two
    ("cost", "Cost", "max_tokens=128"),
]
DRAWS_AT_ONCE = {"explorer", "step_through", "heads", "masks", "knobs", "follow"}
# The figure a teacher shows in presenter mode, by page: the first chart on the page (Trained heads and Cost once
# their button has been pressed, see press_for_results).
MAIN_FIGURE_PAGES = {"explorer", "step_through", "masks", "knobs", "follow", "heads", "trained", "cost"}
TABLE_PAGES = {"heads", "follow", "trained", "cost"}  # the pages that show tables

SCENARIOS = {
    "defaults": "",
    "8x64": "num_heads=8&d_out=64&num_tokens=64&context_length=64",
    "largest": "num_heads=16&d_out=1024&num_tokens=1024&context_length=1024&batch_size=1",
}

# Text that must fit its box: scrollWidth beyond clientWidth means the end of it is cut (or an ellipsis drawn).
CLIPPED_TEXT_JS = """
() => {
  const selectors = [
    "[data-testid='stMain'] h1", "[data-testid='stMain'] h2", "[data-testid='stMain'] h3",
    "[data-testid='stCaptionContainer']", "[data-testid='stMetricValue'] div", "[data-testid='stMetricLabel'] div",
    "[data-testid='stSidebar'] [data-testid='stPageLink-NavLink'] span",
    "[data-testid='stMarkdownContainer'] p", "[data-testid='stWidgetLabel'] p", ".stMarkdownEllipsis",
    "[data-testid='stTab'] p", "[data-testid='stExpander'] summary p",
  ];
  const found = [];
  for (const selector of selectors) {
    for (const el of document.querySelectorAll(selector)) {
      if (!el.offsetParent || el.clientWidth === 0) continue;  // hidden
      if (el.closest("[data-testid='stSidebar'][data-collapsed='true']")) continue;  // folded away
      if (el.closest("[data-testid='stExpander'] details:not([open])")) continue;
      if (el.scrollWidth > el.clientWidth + 1) {
        found.push(`${selector}: "${el.innerText.slice(0, 60)}" (${el.scrollWidth} > ${el.clientWidth} px)`);
      }
    }
  }
  for (const svg of document.querySelectorAll(".js-plotly-plot .main-svg:first-of-type")) {
    const box = svg.getBoundingClientRect();
    for (const title of svg.parentElement.parentElement.querySelectorAll(".gtitle, .g-xtitle text, .g-ytitle text")) {
      const t = title.getBoundingClientRect();
      if (t.width && (t.left < box.left - 1 || t.right > box.right + 1)) {
        found.push(`figure title: "${title.textContent.slice(0, 60)}" (${Math.round(t.left)}–${Math.round(t.right)}`
                   + ` outside ${Math.round(box.left)}–${Math.round(box.right)} px)`);
      }
    }
  }
  const main = document.querySelector("[data-testid='stMainBlockContainer']");
  const right = main ? main.getBoundingClientRect().right : window.innerWidth;
  for (const el of document.querySelectorAll("[data-testid='stMain'] [data-testid='stDataFrame'], "
                                             + "[data-testid='stMain'] [data-testid='stTable']")) {
    const box = el.getBoundingClientRect();
    if (box.width && box.right > right + 1) {
      found.push(`a table runs past the page's right edge (${Math.round(box.right)} > ${Math.round(right)} px)`);
    }
  }
  for (const slider of document.querySelectorAll("[data-testid='stSlider']")) {
    const thumb = slider.querySelector("[role='slider']");
    const value = slider.querySelector("[data-testid='stSliderThumbValue']");
    if (!thumb || !value || !thumb.offsetParent) continue;
    if (slider.closest("[data-testid='stSidebar'][data-collapsed='true']")) continue;
    const a = thumb.getBoundingClientRect(), b = value.getBoundingClientRect();
    const overlap = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (overlap > 2 && Math.min(a.right, b.right) > Math.max(a.left, b.left)) {
      found.push(`slider value "${value.innerText}" sits on its knob (${Math.round(overlap)} px)`);
    }
  }
  return found;
}
"""

MAIN_FIGURE_JS = """
() => {
  const chart = document.querySelector("[data-testid='stMain'] .mha-chart.js-plotly-plot");
  if (!chart) return null;
  const r = chart.getBoundingClientRect();
  const stage = chart.closest("[class*='st-key-stage_']");
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: window.innerWidth,
          height: window.innerHeight, stage_least: stage ? parseFloat(getComputedStyle(stage).minHeight) : 0};
}
"""


def open_page(page, app_url: str, path: str, query: str, *, timeout: float = 240_000) -> None:
    page.goto(f"{app_url}/{path}{'?' + query if query else ''}")
    wait_for_app(page, timeout=timeout)
    draws = any(p == path and slug in DRAWS_AT_ONCE for slug, p, _ in PAGES)
    if draws or page.locator(".mha-chart").count():
        # plotly draws after the script ends, and its charts mount a moment later still: wait for the first one
        # (checking first whether one had mounted read "no figure" on a loaded machine, after the page walk)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1200)
    assert_no_exception(page)


def press_for_results(page, slug: str) -> None:
    """Trained heads trains and Cost measures on a click (Train is disabled once this config is trained)."""
    button = {"trained": "Train", "cost": "Measure"}.get(slug)
    if button is None:
        return
    target = page.get_by_role("button", name=button, exact=True)
    if target.is_enabled():
        target.click()
        page.wait_for_timeout(500)
        wait_for_app(page, timeout=240_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=120_000)
    page.wait_for_timeout(1200)
    assert_no_exception(page)


# The text size of the main area's tables: each HTML table cell's, how many tables are drawn on a canvas
# (st.dataframe, whose cells no CSS can enlarge), and the largest paragraph text outside tables and metrics.
TABLE_FONTS_JS = """
() => {
  const main = document.querySelector("[data-testid='stMain']");
  const px = (el) => parseFloat(getComputedStyle(el).fontSize);
  const cells = [...main.querySelectorAll("[data-testid='stTable'] td")].map((td) => px(td.querySelector("p") || td));
  const text = [...main.querySelectorAll("[data-testid='stMarkdownContainer'] p")]
    .filter((p) => !p.closest("[data-testid='stTable'], [data-testid='stMetric']")).map(px);
  return {canvas: main.querySelectorAll("[data-testid='stDataFrame']").length, cells, text: Math.max(0, ...text)};
}
"""


def normal_mode_text_px(page, app_url: str, path: str, query: str, slug: str) -> float:
    """The largest text of the page in normal mode (its tables, on a canvas or in HTML, are no larger)."""
    open_page(page, app_url, path, query)
    press_for_results(page, slug)
    fonts = page.evaluate(TABLE_FONTS_JS)
    return max([fonts["text"], *fonts["cells"]])


def table_font_problems(fonts: dict, name: str, normal_px: float) -> list[str]:
    """In presenter mode every table is HTML, each cell's text larger than the page's text in normal mode."""
    problems = []
    if fonts["canvas"]:
        problems.append(f"{name}: {fonts['canvas']} table(s) drawn on a canvas, at the theme's size")
    if not fonts["cells"] and not fonts["canvas"]:
        problems.append(f"{name}: no table found")
    small = [size for size in fonts["cells"] if size <= normal_px]
    if small:
        problems.append(f"{name}: table text at {min(small)} px, not larger than normal mode's {normal_px} px")
    return problems


def clipped_text(page) -> list[str]:
    return page.evaluate(CLIPPED_TEXT_JS)


def first_screen(page, name: str) -> None:
    """What the class sees before anyone scrolls."""
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


# Code on a projector is read, not scrolled: a code block wider than its box is cut at its right edge.
CUT_CODE_JS = """
() => [...document.querySelectorAll("[data-testid='stMain'] pre")]
  .filter((pre) => pre.offsetParent && pre.scrollWidth > pre.clientWidth + 1)
  .map((pre) => `code cut: "${pre.innerText.slice(0, 40)}" (${pre.scrollWidth} > ${pre.clientWidth} px)`)
"""


def check_presenter_page(page, slug: str, name: str) -> list[str]:
    """Problems a projector would show: the main figure off the first screen, clipped text or code."""
    problems = [f"{name}: {p}" for p in clipped_text(page) + page.evaluate(CUT_CODE_JS)]
    if slug in MAIN_FIGURE_PAGES:
        box = page.evaluate(MAIN_FIGURE_JS)
        if box is None:
            problems.append(f"{name}: no figure")
            return problems
        # a plan too tall for the first screen (its labels keep their room): it starts in its top half and scrolls
        tall_plan = box["top"] + box["stage_least"] > box["height"] and box["top"] < box["height"] / 2
        if (box["bottom"] > box["height"] + 1 and not tall_plan) or box["right"] > box["width"] + 1 or box["top"] < 0:
            problems.append(
                f"{name}: the main figure spans y {box['top']:.0f}–{box['bottom']:.0f} and x up to "
                f"{box['right']:.0f}, beyond the first screen ({box['width']} × {box['height']})"
            )
    return problems


def open_sidebar(page, name: str) -> list[str]:
    page.locator("[data-testid='stExpandSidebarButton']").click()
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='stSidebar']\").getAttribute('data-collapsed') === 'false'"
    )
    page.wait_for_timeout(800)
    first_screen(page, name)
    problems = [f"{name}: {p}" for p in clipped_text(page)]
    page.locator("[data-testid='stSidebarCollapseButton'] button").click()  # fold it again (the browser keeps this)
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='stSidebar']\").getAttribute('data-collapsed') === 'true'"
    )
    return problems


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)], ids=["1280x720", "1920x1080"])
def test_presenter_mode_puts_each_main_figure_on_the_first_screen_and_cuts_no_text(browser, app_url, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, device_scale_factor=1)
    page = context.new_page()
    problems = []
    try:
        for slug, path, query in PAGES:
            name = f"presenter_{size[0]}x{size[1]}_{slug}"
            open_page(page, app_url, path, "&".join(q for q in (query, "presenter=true") if q))
            press_for_results(page, slug)
            if page.locator("[data-testid='stSidebar']").get_attribute("data-collapsed") != "true":
                problems.append(f"{name}: the sidebar is open")
            first_screen(page, name)
            problems += check_presenter_page(page, slug, name)
            screenshot(page, f"{name}_full")
            if slug == "step_through":  # the folded sidebar is reachable, and nothing in it is cut
                problems += open_sidebar(page, f"{name}_sidebar")
            if slug in TABLE_PAGES and size == (1280, 720):  # tables grow (at one size: the CSS is the same)
                fonts = page.evaluate(TABLE_FONTS_JS)
                problems += table_font_problems(fonts, name, normal_mode_text_px(page, app_url, path, query, slug))
    finally:
        context.close()
    assert not problems, "\n".join(problems)


LARGEST_PAGES = {"explorer", "step_through"}  # the largest settings are slow: the pages that run the module itself


@pytest.mark.parametrize("scenario", ["defaults", "8x64", "largest"])
def test_every_page_at_each_setting_is_photographed_with_no_text_cut(browser, app_url, scenario):
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    problems = []
    try:
        for slug, path, query in PAGES:
            if scenario == "largest" and slug not in LARGEST_PAGES:
                continue
            name = f"{scenario}_{slug}"
            open_page(page, app_url, path, "&".join(q for q in (query, SCENARIOS[scenario]) if q))
            problems += [f"{name}: {p}" for p in clipped_text(page)]
            screenshot(page, name)
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_dark_mode_draws_figures_on_the_dark_theme(browser, app_url):
    """The visitor's system asks for dark: the app and its figures are dark, their text light (and nothing cut)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    problems = []
    try:
        for slug, path, query in PAGES:
            name = f"dark_{slug}"
            open_page(page, app_url, path, query)
            problems += [f"{name}: {p}" for p in clipped_text(page)]
            if slug in DRAWS_AT_ONCE:
                problems += [f"{name}: {p}" for p in page.evaluate(DARK_FIGURE_JS)]
            screenshot(page, name)
            first_screen(page, f"{name}_first_screen")
    finally:
        context.close()
    assert not problems, "\n".join(problems)


# A figure on the dark theme: its background is not white, and its axis labels are light (readable on it).
DARK_FIGURE_JS = """
() => {
  const found = [];
  const luminance = (color) => {
    const m = color.match(/[0-9.]+/g);
    if (!m) return null;
    const [r, g, b, a] = m.map(Number);
    if (a === 0) return null;  // transparent: the page's dark background shows
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  for (const plot of document.querySelectorAll(".js-plotly-plot")) {
    const paper = plot.querySelector(".main-svg");
    const paperFill = paper && getComputedStyle(paper).backgroundColor;
    const light = luminance(paperFill || "");
    if (light !== null && light > 0.5) found.push(`a figure's background is light (${paperFill})`);
    const tick = plot.querySelector(".xtick text, .ytick text");
    if (tick) {
      const ink = luminance(tick.style.fill || getComputedStyle(tick).fill);
      if (ink !== null && ink < 0.5) found.push(`a figure's axis labels are dark (${tick.style.fill})`);
    }
  }
  return found;
}
"""


def test_a_clicker_pages_through_the_steps_in_presenter_mode(browser, app_url):
    """Page Down / Page Up (a presentation clicker) move the step with the sidebar folded; each step's figure is
    on the first screen of a 1280 × 720 projector."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        open_page(page, app_url, "Step_through", "step=1&presenter=true")
        for key, expected in (("PageDown", "2"), ("PageDown", "3"), ("PageUp", "2")):
            page.locator("h1").first.click()  # focus the page, not a widget
            page.keyboard.press(key)
            page.wait_for_function(  # a step may queue behind another visitor's training (at most its 60 s budget)
                f"() => new URLSearchParams(location.search).get('step') === '{expected}'", timeout=150_000
            )
            wait_for_app(page)
            page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
            page.wait_for_timeout(800)
            assert page.locator("h1").first.inner_text().startswith(f"{expected}/12"), key
            problems = check_presenter_page(page, "step_through", f"step {expected}")
            if problems:  # a cold server may still be settling the layout (seen once): a real fault stays
                page.wait_for_timeout(2000)
                problems = check_presenter_page(page, "step_through", f"step {expected}")
            assert not problems, "\n".join(problems)
        first_screen(page, "presenter_1280x720_step_through_after_page_keys")
    finally:
        context.close()


# Every subplot's x tick texts, by chart: each plotly subplot draws its own g.xaxislayer-above.
PANEL_TICKS_JS = """
() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(chart =>
  Array.from(chart.querySelectorAll('.xaxislayer-above')).map(layer =>
    Array.from(layer.querySelectorAll('.xtick text')).map(t => t.textContent)))
"""
BOOK_TOKENS = ["Your", "journey", "starts", "with", "one", "step"]


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
def test_every_key_is_labelled_and_no_code_box_is_cut(browser, app_url, presenter):
    """Issue 21: presenter heatmaps labelled only "Your" of six keys (normal mode three). Read from the rendered
    SVG; the code boxes are read for a line that runs past their edge."""
    size = (1280, 720) if presenter else (1280, 800)
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, device_scale_factor=1)
    page = context.new_page()
    try:
        for path, query in (("", ""), ("Step_through", "step=7")):
            open_page(page, app_url, path, "&".join(q for q in (query, "presenter=true" if presenter else "") if q))
            panels = [ticks for ticks in page.evaluate(PANEL_TICKS_JS) if "Your" in ticks]
            assert panels, f"{path or 'Explorer'}: no panel labels its keys with the book's tokens"
            for ticks in panels:
                assert ticks == BOOK_TOKENS, f"{path or 'Explorer'}: {ticks}"
        cut = page.evaluate(CUT_CODE_JS)  # Step through's code boxes: nothing runs past (or scrolls in) a box
        assert not cut, cut
        screenshot(page, f"labels_{'presenter' if presenter else 'normal'}_step7")
    finally:
        context.close()


# Where a code line wraps between two characters of one name or number (the line box changes between them).
BROKEN_WORD_JS = """
() => { const found = [];
  for (const code of document.querySelectorAll("[data-testid='stMain'] pre code")) {
    const chars = [], walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      if (node.parentElement.closest('.linenumber')) continue;
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange(); range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (rect) chars.push([node.data[i], rect.top]);
      }
    }
    for (let k = 1; k < chars.length; k++) {
      if (chars[k][1] > chars[k - 1][1] + 2 && /\\w/.test(chars[k - 1][0]) && /\\w/.test(chars[k][0])) {
        const text = (from, to) => chars.slice(from, to).map((c) => c[0]).join('');
        found.push(`${text(Math.max(0, k - 12), k)}|${text(k, k + 6)}`);
      }
    }
  }
  return found; }
"""


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
def test_no_step_breaks_code_inside_a_name_or_scrolls_a_code_box(browser, app_url, presenter):
    """Issue 21: `context_lengt|h`, `transpose(2|, 3)`, `cont|iguous()`: code breaks at spaces and punctuation only,
    and still no code box scrolls (a projector cannot), on every step, presenter 1280 × 720 and normal 1280 × 800."""
    size = (1280, 720) if presenter else (1280, 800)
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, device_scale_factor=1)
    page = context.new_page()
    problems = []
    try:
        for step in range(1, 13):
            open_page(page, app_url, "Step_through", f"step={step}" + ("&presenter=true" if presenter else ""))
            problems += [f"step {step}: broken inside a word: {w}" for w in page.evaluate(BROKEN_WORD_JS)]
            problems += [f"step {step}: {cut}" for cut in page.evaluate(CUT_CODE_JS)]
        assert not problems, "\n".join(problems)
    finally:
        context.close()
