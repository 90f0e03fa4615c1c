"""Text cut by its box, text on text, and cell numbers smaller than the page's type (issue 42, item 3), read from
the rendered page: the JS below and the walk over every page's tabs that uses it (test_clipping_browser).

Before: at 1280 px Heads and references' third tab "Against torch's own attention" ran past the tab list's right
edge; Real heads' "Each head's score on random tokens repeated" was clipped ("…repeatec") and two subtitles ran
together ("previous tokenfirst token"); in presenter mode step 6's "masked (−∞)" legend sat on the colour bar's
"-0.263" and step 2's cell numbers ran into each other ("-0.14-0.10"); score heatmaps printed 13 px numbers.
"""

from __future__ import annotations

# Problems on the page as shown (charts in a closed tab or expander are skipped: they are read when opened):
# a tab past its tab list's edge; any SVG text of a chart outside the chart's own SVG; two texts of one chart that
# overlap (titles, subtitles, legend, colour bar, cell numbers); cell numbers smaller than the page's body type.
LAYOUT_JS = """
() => {
  const found = [], small = [];
  const shown = (el) => el.getClientRects().length > 0 && el.getBoundingClientRect().width > 0;
  const r = (el) => el.getBoundingClientRect();
  const words = (el) => (el.textContent || "").trim().slice(0, 50);
  for (const list of document.querySelectorAll("[data-testid='stMain'] [role='tablist']")) {
    if (!shown(list)) continue;
    const box = r(list);
    for (const tab of list.querySelectorAll("[role='tab']")) {
      const t = r(tab);
      if (t.right > box.right + 1 || t.left < box.left - 1) {
        found.push(`tab "${words(tab)}" runs past its tab list (${Math.round(t.right)} > ${Math.round(box.right)} px)`);
      }
    }
  }
  const body = document.querySelector("[data-testid='stMain'] [data-testid='stMarkdownContainer'] p");
  const bodyPx = body ? parseFloat(getComputedStyle(body).fontSize) : 16;
  const groups = {title: ".gtitle", subtitle: ".annotation-text", legend: ".legendtext",
                  colorbar: ".cbaxis text, .colorbar text, .cbtitle text", cell: "g.heatmap-label text"};
  for (const chart of document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")) {
    if (!shown(chart)) continue;
    const name = (chart.getAttribute("aria-label") || "chart").slice(0, 50);
    const svg = r(chart.querySelector(".main-svg"));
    for (const text of chart.querySelectorAll("text")) {
      const t = r(text);
      if (!t.width || !words(text)) continue;
      if (t.left < svg.left - 1 || t.right > svg.right + 1 || t.top < svg.top - 1 || t.bottom > svg.bottom + 1) {
        found.push(`${name}: "${words(text)}" cut by the chart's edge`);
      }
    }
    const boxes = [];
    for (const [group, selector] of Object.entries(groups)) {
      for (const text of chart.querySelectorAll(selector)) {
        const t = r(text);
        if (t.width && words(text)) boxes.push({group, text, t});
      }
    }
    const seen = new Set();
    for (let a = 0; a < boxes.length; a++) {
      for (let b = a + 1; b < boxes.length; b++) {
        const [p, q] = [boxes[a], boxes[b]];
        if (p.text.contains(q.text) || q.text.contains(p.text)) continue;
        const w = Math.min(p.t.right, q.t.right) - Math.max(p.t.left, q.t.left);
        const h = Math.min(p.t.bottom, q.t.bottom) - Math.max(p.t.top, q.t.top);
        const key = `${p.group}/${q.group}`;
        // a text's box holds its line's whole height: boxes that only touch (a colour bar's title and its top
        // label) are not text on text; a third of the smaller one's height is
        if (w > 1 && h > Math.min(p.t.height, q.t.height) / 3 && !seen.has(key)) {
          seen.add(key);
          found.push(`${name}: ${p.group} "${words(p.text)}" overlaps ${q.group} "${words(q.text)}"`);
        }
      }
    }
    const cells = boxes.filter((b) => b.group === "cell").map((b) => parseFloat(getComputedStyle(b.text).fontSize));
    if (cells.length && Math.min(...cells) < bodyPx - 0.5) {
      small.push(`${name}: cell numbers at ${Math.min(...cells)} px, under the body type's ${bodyPx} px`);
    }
  }
  return {found, small};
}
"""


def layout_problems(page) -> list[str]:
    """Text cut or on other text (asserted by test_clipping_browser)."""
    return page.evaluate(LAYOUT_JS)["found"]


def small_cell_numbers(page) -> list[str]:
    """Charts whose cell numbers are smaller than the page's body type."""
    return page.evaluate(LAYOUT_JS)["small"]


# Presenter mode's Step through at 1280 × 720: the step's heading, its main figure's top and its first sentence are
# on the first screen (the sentences sat under the code, below the fold, on every step).
STEP_FIRST_SCREEN_JS = """
() => {
  const h1 = document.querySelector("[data-testid='stMain'] h1");
  const chart = document.querySelector("[data-testid='stMain'] .mha-chart");
  const words = [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stColumn'] "
                                              + "[data-testid='stMarkdownContainer'] p")].filter((p) => p.innerText);
  const top = (el) => el ? el.getBoundingClientRect().top : null;
  const bottom = (el) => el ? el.getBoundingClientRect().bottom : null;
  return {height: window.innerHeight, heading: bottom(h1), figure: top(chart),
          sentence: words.length ? top(words[0]) + 3 * parseFloat(getComputedStyle(words[0]).lineHeight) : null};
}
"""
