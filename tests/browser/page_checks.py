"""What the page-walking browser tests read on a page, and how they open one: the JS that finds clipped text, a main
figure off the first screen, small table text, cut code, a figure on the dark theme, and code broken inside a word.

Each page is opened once per viewport and every check for it runs on that one visit (test_presenter_browser,
test_scenarios_browser, test_steps_browser, test_pages_browser); these are their shared parts.
"""

from __future__ import annotations

from .helpers import SCREENSHOTS, assert_no_exception, settle, wait_for_app

# (slug, page path, query): every page of the navigation, Trained heads and Cost drawing after a click.
PAGES = [
    ("explorer", "", ""),
    ("step_through", "Step_through", "step=5"),
    ("heads", "Heads_and_references", ""),
    ("masks", "Masks_and_cross_attention", ""),
    ("knobs", "Knobs_that_teach", ""),
    ("follow", "Follow_a_token", ""),
    ("trained", "Trained_heads", "steps=10"),  # the fewest steps the page offers: trained in a second or two
    ("cost", "Cost", "max_tokens=128"),
    ("real_heads", "Real_heads", ""),
    ("variants", "Attention_variants", ""),
]
DRAWS_AT_ONCE = {"explorer", "step_through", "heads", "masks", "knobs", "follow", "real_heads", "variants"}
# The pages whose first chart is the figure a teacher shows in presenter mode (Trained heads and Cost once their
# button has been pressed, see press_for_results).
MAIN_FIGURE_PAGES = {"explorer", "step_through", "masks", "knobs", "follow", "heads", "trained", "cost"}
TABLE_PAGES = {"heads", "follow", "trained", "cost"}  # the pages that show tables


def joined(*queries: str) -> str:
    return "&".join(q for q in queries if q)


def open_page(page, app_url: str, path: str, query: str, *, timeout: float = 240_000) -> None:
    """Open a page and wait until it has settled (its run over, its charts drawn); it shows no exception."""
    page.goto(f"{app_url}/{path}{'?' + query if query else ''}")
    wait_for_app(page, timeout=timeout)
    assert_no_exception(page)


def press_for_results(page, slug: str) -> None:
    """Trained heads trains and Cost measures on a click (Train is disabled once this config is trained)."""
    button = {"trained": "Train", "cost": "Measure"}.get(slug)
    if button is None:
        return
    target = page.get_by_role("button", name=button, exact=True)
    if target.is_enabled():
        target.click()  # the app marks the rerun requested at once: settle waits for it to end
        settle(page, 240_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=120_000)
    settle(page, 120_000)
    assert_no_exception(page)


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
    // Streamlit 1.67: the knob is the value label's parent (it also holds the hidden input[type=range]).
    const value = slider.querySelector("[data-testid='stSliderThumbValue']");
    const thumb = value && value.parentElement.querySelector("input[type='range']") ? value.parentElement : null;
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
    """Unfold the sidebar, photograph it and read it for clipped text, and fold it again."""
    page.locator("[data-testid='stExpandSidebarButton']").click()
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='stSidebar']\").getAttribute('data-collapsed') === 'false'"
    )
    settle(page)  # the charts follow their narrower place
    first_screen(page, name)
    problems = [f"{name}: {p}" for p in clipped_text(page)]
    page.locator("[data-testid='stSidebarCollapseButton'] button").click()  # fold it again (the browser keeps this)
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='stSidebar']\").getAttribute('data-collapsed') === 'true'"
    )
    settle(page)
    return problems


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


# Every subplot's x tick texts, by chart: each plotly subplot draws its own g.xaxislayer-above.
PANEL_TICKS_JS = """
() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(chart =>
  Array.from(chart.querySelectorAll('.xaxislayer-above')).map(layer =>
    Array.from(layer.querySelectorAll('.xtick text')).map(t => t.textContent)))
"""
BOOK_TOKENS = ["Your", "journey", "starts", "with", "one", "step"]


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
