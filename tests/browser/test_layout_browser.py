"""Figures that fill their frame, read from the rendered SVG (issue 21, must-hold 3, 4 and 6): presenter mode's main
heatmap grows with the stage at 1280 × 720 and 1920 × 1080 with no tick label outside its figure; on a 390 × 844 phone
each head is at least about 150 px and Step through's figure comes before the listing; the head view at 16 heads ×
256 tokens labels its tokens and its lines span the frame; step 11's head bands keep their labels whole on a 720p
stage, and its colour bar sits beside its matrix; 16 heads × 256 tokens on a 1080p stage: square heads, and no head
title on the row above's key labels.
"""

from __future__ import annotations

import pytest

from .helpers import assert_no_exception, screenshot, wait_for_app

pytestmark = pytest.mark.browser

PHONE_AGENT = (  # iPhone 13's, as Playwright's device list gives it: the app stacks heads for a phone's agent
    "Mozilla/5.0 (iPhone; CPU iPhone OS 15_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/15.0 Mobile/15E148 Safari/604.1"
)

# The first chart's heatmap panels (plotly draws each as an <image>), its head titles, and every tick label that
# sits outside its figure's svg.
MAIN_HEATMAP_JS = """
() => {
  const chart = document.querySelector("[data-testid='stMain'] .js-plotly-plot");
  const svg = chart.querySelector(".main-svg").getBoundingClientRect();
  const box = (el) => { const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height}; };
  const cut = [...chart.querySelectorAll(".xtick text, .ytick text")].map(t => [t.textContent, box(t)])
    .filter(([, b]) => b.width && (b.left < svg.left - 1 || b.right > svg.right + 1 || b.top < svg.top - 1
                                   || b.bottom > svg.bottom + 1)).map(([text]) => text);
  const titles = [...chart.querySelectorAll(".annotation-text")].filter(t => t.textContent.startsWith("head "));
  const values = [...chart.querySelectorAll("g.heatmap-label text")].filter(t => t.getBoundingClientRect().width)
    .map(box);
  const stage = chart.closest("[class*='st-key-stage_']")?.getBoundingClientRect();
  return {images: [...chart.querySelectorAll(".hm image")].map(box), titles: titles.map(box), cut, values,
          stage: stage && [stage.width, stage.height],
          ticks: [...chart.querySelectorAll(".xaxislayer-above")][0]?.querySelectorAll(".xtick text").length ?? 0};
}
"""


def open_page(page, url: str) -> None:
    page.goto(url)
    wait_for_app(page, 240_000)  # the run over, every chart drawn
    assert_no_exception(page)


@pytest.mark.parametrize(
    ("size", "least_cell", "printed"),
    [((1280, 720), 34, False), ((1920, 1080), 64, True)],
    ids=["1280x720", "1920x1080"],
)
def test_presenter_main_heatmap_grows_with_the_stage_and_cuts_no_tick_label(
    browser, app_url, size, least_cell, printed
):
    """Before: 2 heads of 155 px (26 px cells) in a 614 × 490 chart at 720p; 56 px cells and a 190 px gap between
    the head titles and their grids at 1080p, where the 73 px cells stayed blank (the plan gave 50 px). Cell values
    print wherever the drawn cell holds them, and never spill out of it."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, device_scale_factor=1)
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/?presenter=true")
        found = page.evaluate(MAIN_HEATMAP_JS)
        screenshot(page, f"layout_presenter_{size[0]}x{size[1]}")
        assert len(found["images"]) == 2 and found["ticks"] == 6, found
        cells = [image["width"] / 6 for image in found["images"]]
        assert min(cells) >= least_cell, f"cells {cells} px at {size}: the heads do not fill the stage"
        assert not found["cut"], f"tick labels outside the figure: {found['cut']}"
        spill = [v for v in found["values"] if v["width"] > min(cells) or v["height"] > min(cells)]
        assert not spill, f"cell values wider than their {min(cells):.0f} px cells: {spill[:3]}"
        if printed:  # 2 heads of 6 × 6
            assert len(found["values"]) == 72, f"{len(found['values'])} cell values in {cells} px cells, {found}"
        for title, image in zip(found["titles"], found["images"], strict=True):
            assert 0 <= image["top"] - title["bottom"] <= 24, (title, image)  # each title sits on its grid
    finally:
        context.close()


def test_a_phone_stacks_heads_at_least_150_px_wide_and_puts_the_step_before_the_listing(browser, app_url):
    """Before: the Explorer's heads side by side at 76-90 px; Step through's listing (3,000 px) first."""
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=1, user_agent=PHONE_AGENT, is_mobile=True
    )
    page = context.new_page()
    try:
        open_page(page, app_url)
        widths = page.evaluate(
            "() => [...document.querySelectorAll(\"[data-testid='stMain'] .js-plotly-plot\")]"
            "  .filter(c => c.querySelectorAll('.hm image').length > 1)"
            "  .flatMap(c => [...c.querySelectorAll('.hm image')].map(i => i.getBoundingClientRect().width))"
        )
        screenshot(page, "layout_phone_explorer")
        assert widths and min(widths) >= 140, f"heads {widths} px wide on a phone"
        open_page(page, f"{app_url}/Step_through?step=7")
        tops = page.evaluate(
            "() => ({figure: document.querySelector(\"[data-testid='stMain'] .js-plotly-plot\")"
            "  .getBoundingClientRect().top, listing: document.querySelector('.st-key-step_listing')"
            "  .getBoundingClientRect().top})"
        )
        screenshot(page, "layout_phone_step_through", max_height=8000)
        assert tops["figure"] < tops["listing"], f"the listing comes first: {tops}"
    finally:
        context.close()


HEAD_VIEW_JS = """
() => {
  const chart = document.querySelector("[data-testid='stMain'] .js-plotly-plot");
  const svg = chart.querySelector(".main-svg").getBoundingClientRect();
  const lines = [...chart.querySelectorAll(".scatterlayer path.js-line")].map(l => l.getBoundingClientRect())
    .filter(b => b.height > 0);
  return {labels: [...chart.querySelectorAll(".scatterlayer .textpoint text")].map(t => t.textContent),
          height: svg.height, top: Math.min(...lines.map(b => b.top)) - svg.top,
          bottom: Math.max(...lines.map(b => b.bottom)) - svg.top};
}
"""


def test_the_head_view_at_16_heads_and_256_tokens_labels_a_window_and_fills_its_frame(browser, app_url):
    """Before: no token labels, and the lines in the top fifth of the frame (153-322 px of 900)."""
    context = browser.new_context(viewport={"width": 1280, "height": 1200}, device_scale_factor=1)
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/Follow_a_token?num_heads=16&d_out=64&num_tokens=256&context_length=256")
        found = page.evaluate(HEAD_VIEW_JS)
        screenshot(page, "layout_head_view_16x256")
        assert len(found["labels"]) >= 2 * 24 and "journey (1)" in found["labels"], found["labels"][:8]
        span = (found["bottom"] - found["top"]) / found["height"]
        assert span >= 0.7, f"lines span {found['top']:.0f}-{found['bottom']:.0f} of {found['height']:.0f} px"
    finally:
        context.close()


# The first chart's head bands (filled shapes above its heatmap), their labels, its heatmap and its colour bar.
BANDS_JS = """
() => {
  const chart = document.querySelector("[data-testid='stMain'] .js-plotly-plot");
  const box = (el) => { const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width}; };
  const image = box(chart.querySelector(".hm image"));
  const bands = [...chart.querySelectorAll(".shapelayer path")].map(box)
    .filter(b => b.width > 2 && b.bottom <= image.top + 4);
  const labels = [...chart.querySelectorAll(".annotation-text")].map(t => [t.textContent, box(t)]);
  const bar = chart.querySelector(".colorbar .cbfills");
  return {svg: box(chart.querySelector(".main-svg")), image, bands, labels, bar: bar && box(bar)};
}
"""


def test_step_11_band_labels_are_whole_and_its_colour_bar_sits_beside_its_matrix(browser, app_url):
    """Before, presenter 1280 × 720: "head 0" / "head 1" (55 px) in 46 px bands, printed over each other ("head (")
    since the plan gave 74 px cells; the colour bar 376 px right of the 2-column matrix."""
    context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/Step_through?step=11&presenter=true")
        found = page.evaluate(BANDS_JS)
        screenshot(page, "layout_presenter_1280x720_step11")
        svg, bands = found["svg"], sorted(found["bands"], key=lambda b: b["left"])
        assert len(bands) == 2, found
        assert len(found["labels"]) == 2, found["labels"]
        for k, (text, label) in enumerate(sorted(found["labels"], key=lambda t: t[1]["left"])):
            band = bands[k]
            assert text in (f"head {k}", f"h{k}", str(k)), f"band {k} labelled {text!r}"
            assert svg["left"] <= label["left"] and label["right"] <= svg["right"], (text, label, svg)
            inside = band["left"] - 1 <= label["left"] and label["right"] <= band["right"] + 1
            assert inside, f"{text!r} spans {label['left']:.0f}-{label['right']:.0f} px, its band {band}"
        gap = found["bar"]["left"] - found["image"]["right"]
        assert 0 <= gap <= 60, f"the colour bar is {gap:.0f} px right of its matrix: {found['bar']}, {found['image']}"
    finally:
        context.close()


# The first chart's heads (their <image>), head titles and every x tick label, as boxes.
GRID_JS = """
() => {
  const chart = document.querySelector("[data-testid='stMain'] .js-plotly-plot");
  const box = (el) => { const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height}; };
  return {images: [...chart.querySelectorAll(".hm image")].map(box),
          titles: [...chart.querySelectorAll(".annotation-text")].filter(t => t.textContent.startsWith("head "))
            .map(t => [t.textContent, box(t)]),
          ticks: [...chart.querySelectorAll(".xaxislayer-above text")].map(t => [t.textContent, box(t)])
            .filter(([, b]) => b.width)};
}
"""


def test_16_heads_of_256_tokens_on_a_1080p_stage_are_square_and_titles_clear_the_row_above(browser, app_url):
    """Before: each head drawn 201 × 79 px (a 256 × 256 matrix), and the turned key labels of each row ("Your",
    "t255") printed over the next row's head titles (labels at 507-554 px, "head 4" at 522-555)."""
    context = browser.new_context(viewport={"width": 1920, "height": 1080}, device_scale_factor=1)
    page = context.new_page()
    try:
        query = "presenter=true&num_heads=16&d_out=64&num_tokens=256&context_length=256"
        open_page(page, f"{app_url}/?{query}")
        found = page.evaluate(GRID_JS)
        screenshot(page, "layout_presenter_1920x1080_16x256")
        assert len(found["images"]) == 16 and len(found["titles"]) == 16, found
        shapes = [(round(b["width"]), round(b["height"])) for b in found["images"]]
        assert all(0.8 <= w / h <= 1.25 for w, h in shapes), f"heads drawn {shapes} px (square matrices)"
        assert found["ticks"], "no key labels"
        for name, title in found["titles"]:
            for text, tick in found["ticks"]:
                apart = (
                    tick["right"] <= title["left"]
                    or title["right"] <= tick["left"]
                    or tick["bottom"] <= title["top"]
                    or title["bottom"] <= tick["top"]
                )
                assert apart, f"{name!r} {title} overlaps the key label {text!r} {tick}"
    finally:
        context.close()


# Every shown "−∞" in the first chart, and its heads' images (the masked layer's image lies over its values').
MINUS_INFINITY_JS = """
() => {
  const chart = document.querySelector("[data-testid='stMain'] .js-plotly-plot");
  const box = (el) => { const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height}; };
  return {images: [...chart.querySelectorAll(".hm image")].map(box),
          texts: [...chart.querySelectorAll("g.heatmap-label text")].filter(t => t.textContent === "−∞")
            .map(box).filter(b => b.width)};
}
"""


SIZES = [((1280, 720), 0), ((1920, 1080), 0), ((2560, 1440), 30)]


@pytest.mark.parametrize(("size", "shown"), SIZES, ids=["1280x720", "1920x1080", "2560x1440"])
def test_step_6_prints_minus_infinity_inside_its_masked_cells_on_the_stage(browser, app_url, size, shown):
    """The stage prints "−∞" in the 30 grey cells together with the values, at the page's body type (27 px in
    presenter mode): on a 1440p stage the cells (about 90 px) hold "-0.26"; at 720p (37 px) and 1080p (67 px) they
    do not, and neither is printed, so nothing spills and nothing is smaller than the text around it."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, device_scale_factor=1)
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/Step_through?step=6&presenter=true")
        found = page.evaluate(MINUS_INFINITY_JS)
        screenshot(page, f"layout_presenter_{size[0]}x{size[1]}_step6")
        assert len(found["texts"]) == shown, found["texts"][:3]
        for text in found["texts"]:
            image = next(i for i in found["images"] if i["left"] <= text["left"] and text["right"] <= i["right"])
            cell = image["width"] / 6
            column = int(((text["left"] + text["right"]) / 2 - image["left"]) // cell)
            row = int(((text["top"] + text["bottom"]) / 2 - image["top"]) // cell)
            left, top = image["left"] + column * cell, image["top"] + row * cell
            inside = left <= text["left"] and text["right"] <= left + cell and top <= text["top"]
            assert inside and text["bottom"] <= top + cell, f"−∞ at {text} outside its cell at ({left}, {top})"
    finally:
        context.close()


# The first chart's tick labels, each with its box, axis by axis.
TICK_BOXES_JS = """
() => {
  const chart = document.querySelector("[data-testid='stMain'] .js-plotly-plot");
  const box = (el) => { const r = el.getBoundingClientRect();
    return {text: el.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom,
            font: parseFloat(getComputedStyle(el).fontSize)}; };
  const axes = [...chart.querySelectorAll("g.xaxislayer-above, g.yaxislayer-above")];
  return axes.map(axis => [...axis.querySelectorAll(".xtick text, .ytick text")].map(box)
    .filter(b => b.right > b.left));
}
"""


@pytest.mark.parametrize(
    "query", ["num_tokens=16", "num_tokens=32&num_heads=4"], ids=["2 heads x 16 tokens", "4 heads x 32 tokens"]
)
def test_a_720p_stage_never_squeezes_its_figure_so_tick_labels_never_overprint(browser, app_url, query):
    """Before: a figure planned taller or wider than the stage was squeezed into it (2 heads × 16 tokens, planned
    1,480 px tall, drawn 490; 4 × 32 planned 1,422 × 5,018 drawn 787 × 490): its labels printed over each other.
    Now the stage keeps at least boundary.STAGE_SQUEEZE of the plan, and scrolls."""
    context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/?presenter=true&{query}")
        axes = page.evaluate(TICK_BOXES_JS)
        screenshot(page, f"layout_presenter_1280x720_{query.replace('&', '_')}")
        tokens = int(query.split("num_tokens=")[1].split("&")[0])
        labelled = [labels for labels in axes if labels]  # a stacked head below another may share its key labels
        assert len(labelled) >= 2 and all(len(labels) == tokens for labels in labelled), [len(a) for a in axes]
        for labels in labelled:
            for a, b in zip(labels, labels[1:], strict=False):
                # neighbours' centres at least 0.9 of the type size apart across their lines (a glyph's ink, ascent
                # to descent, is about that; a line's box is 1.3 of it): squeezed, they lay 1-2 px apart
                pitch_x = abs(a["left"] + a["right"] - b["left"] - b["right"]) / 2
                pitch_y = abs(a["top"] + a["bottom"] - b["top"] - b["bottom"]) / 2
                apart = max(pitch_x, pitch_y) >= 0.9 * a["font"]
                assert apart, f"tick labels {a['text']!r} and {b['text']!r} {a['font']} px overlap: {a} {b}"
    finally:
        context.close()
