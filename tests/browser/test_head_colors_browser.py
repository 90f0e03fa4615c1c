"""Sixteen heads in sixteen colours, read from the rendered SVG (issue 21, must-hold 8 / 2): on Follow a token at 16
heads, the head view's legend and the bar chart's legend each show all 16 heads, uncut, in 16 distinct colours, and
head k has the same colour in both figures and in the bars it draws. Plotly's 10-colour default fails it (head 10
was head 0's blue, and the bar chart's legend stopped at head 10).
"""

from __future__ import annotations

import pytest

from .helpers import assert_no_exception, screenshot, wait_for_app

pytestmark = pytest.mark.browser

HEADS = 16

# Every chart's legend: per entry its text, the colour of its symbol (a line's stroke, a bar's fill), and whether
# the entry lies inside both the legend's box and the figure's svg (a cut legend clips or scrolls entries away);
# and the fills of the bars each chart draws, by trace name.
LEGENDS_JS = """
() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")].map(chart => {
  const svg = chart.querySelector(".main-svg").getBoundingClientRect();
  const bg = chart.querySelector(".legend rect.bg")?.getBoundingClientRect();
  const inside = (b, r) => r && b.top >= r.top - 1 && b.bottom <= r.bottom + 1 && b.left >= r.left - 1
                           && b.right <= r.right + 1;
  const entries = [...chart.querySelectorAll(".legend .traces")].map(entry => {
    const text = entry.querySelector(".legendtext");
    const symbol = entry.querySelector(".legendlines path, .legendpoints path");
    const style = symbol ? getComputedStyle(symbol) : null;
    const color = !style ? null : (style.stroke && style.stroke !== "none" && !symbol.closest(".legendpoints")
                                   ? style.stroke : style.fill);
    const box = text.getBoundingClientRect();
    return {name: text.textContent, color, shown: inside(box, bg) && inside(box, svg) && box.height > 0};
  });
  const bars = {};
  for (const trace of chart.querySelectorAll(".barlayer .trace")) {
    const name = trace.__data__?.[0]?.trace?.name;
    const fills = [...trace.querySelectorAll(".point path")].map(p => getComputedStyle(p).fill);
    if (name) bars[name] = [...new Set(fills)];
  }
  return {entries, bars};
})
"""


def test_sixteen_heads_have_sixteen_colours_the_same_in_the_head_view_and_the_bar_chart(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 1400}, device_scale_factor=1)
    page = context.new_page()
    try:
        page.goto(f"{app_url}/Follow_a_token?num_heads={HEADS}&d_out={HEADS}")
        wait_for_app(page, 240_000)  # the run over, every chart drawn
        assert_no_exception(page)
        charts = page.evaluate(LEGENDS_JS)
        screenshot(page, "head_colors_follow_16_heads", max_height=9000)
        names = [f"head {k}" for k in range(HEADS)]
        legends = [c for c in charts if [e["name"] for e in c["entries"]][:HEADS] == names]
        assert len(legends) >= 2, f"{len(legends)} charts show a 16-head legend: {[c['entries'][:3] for c in charts]}"
        head_view, bar_chart = legends[0], legends[-1]
        assert bar_chart["bars"], "the second 16-head legend is not the bar chart's"
        for chart in (head_view, bar_chart):
            cut = [e["name"] for e in chart["entries"] if not e["shown"]]
            assert not cut, f"legend entries cut or scrolled away: {cut}"
            colors = [e["color"] for e in chart["entries"][:HEADS]]
            assert len(set(colors)) == HEADS, f"{len(set(colors))} distinct colours for {HEADS} heads: {colors}"
        assert [e["color"] for e in head_view["entries"][:HEADS]] == [e["color"] for e in bar_chart["entries"][:HEADS]]
        for entry in bar_chart["entries"][:HEADS]:
            drawn = bar_chart["bars"].get(entry["name"])
            assert drawn == [entry["color"]], f"{entry['name']}: bars drawn in {drawn}, legend {entry['color']}"
    finally:
        context.close()
