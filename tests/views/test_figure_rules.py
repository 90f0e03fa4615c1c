"""The figures' presentation rules (issue 11): one colour rule per kind on every page, honest shrinking, sizes from
the content, labels that fit, dark-mode-safe styling, wrapped titles, legends clear of titles, before-then-after.

Geometry is checked from what a figure says about itself (its height, margins, domains, scale anchors) and text
widths estimated at 0.55 em a character (digits 0.56 em): a label that would overlap fails here.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
import torch

from explorer.glue.settings import Settings
from explorer.views import (
    attention_explorer,
    heads_and_references,
    knobs_that_teach,
    masks_and_cross_attention,
    step_through,
    step_through_steps,
)
from explorer.views import figures as F
from explorer.views.figures import heatmap_layout, style
from mha_core import runs, teaching

CHAR = 0.55  # em per character: tick labels and titles in the UI font
DIGIT = 0.56


def values_of(fig) -> list[np.ndarray]:
    return [F.decode_array(t.z) for t in fig.data if t.meta and t.meta.get("role") == "values"]


def plot_height(fig) -> float:
    return fig.layout.height - fig.layout.margin.t - fig.layout.margin.b


def panel_px(fig, suffix: str = "") -> tuple[float, float]:
    """(width, height) in pixels of a square-celled panel, from its y domain and its data ranges."""
    y_domain = fig.layout[f"yaxis{suffix}"].domain
    height = (y_domain[1] - y_domain[0]) * plot_height(fig)
    z = next(t for t in fig.data if t.meta and t.meta.get("role") == "values" and t.yaxis == f"y{suffix}").z
    i, j = F.decode_array(z).shape
    return height * j / i, height


def run_at(**settings) -> runs.ExplorerRun:
    s = Settings(**settings)
    module = runs.build_module(s.module_spec())
    x, labels = runs.build_input(s.input_spec())
    return runs.run_explorer(module, x, labels, train=s.train, seed=s.seed, dropout=s.dropout)


@pytest.fixture(scope="module")
def run32():
    return run_at(num_heads=4, d_in=16, d_out=16, num_tokens=32, context_length=32, input="random")


def weights_figures(run) -> dict[str, object]:
    """Every attention-weights heatmap the pages draw, from one run, by page and panel."""
    module = runs.build_module(Settings(num_heads=4, d_in=16, d_out=16, context_length=32).module_spec())
    x, labels = run.trace.steps["x"][:1], run.labels
    shown = {}
    explorer = attention_explorer.build_view(run, section="attention", batch_index=0, enlarge=1, presenter=False)
    shown |= {f"explorer/{p.key}": p.figure for p in explorer.figures()}
    softmax = [s.key for s in step_through_steps.STEPS].index("softmax") + 1
    view = step_through.build_step_view(
        run.trace, labels, softmax, batch_index=0, presenter=False, dropout_active=False
    )
    shown |= {f"step/{p.key}": p.figure for p in view.panels}
    temperature = knobs_that_teach.build_temperature_view(runs.run_temperature(module, x, 1.0), labels, presenter=False)
    shown |= {f"knobs/{p.key}": p.figure for p in temperature.panels}
    heads = heads_and_references.build_heads_view(runs.run_heads(module, x), labels, batch_index=0, presenter=False)
    shown |= {f"heads/{p.key}": p.figure for p in heads.panels}
    return {k: f for k, f in shown.items() if f.layout.coloraxis.colorbar.title.text == "weight"}


# --- 1. one colour rule per kind ----------------------------------------------------------------------------------


def test_every_weights_heatmap_on_every_page_tops_out_at_the_99th_percentile(run32):
    shown = weights_figures(run32)
    pages = {key.split("/")[0] for key in shown}
    assert pages == {"explorer", "step", "knobs", "heads"}, shown.keys()
    pair = (shown.pop("heads/heads_separate"), shown.pop("heads/heads_batched"))
    enlarged = shown.pop("explorer/enlarged_head")  # one head on every head's scale (the panels it enlarges)
    assert enlarged.layout.coloraxis.cmax == shown["explorer/attn_weights"].layout.coloraxis.cmax
    for key, fig in shown.items():
        top = fig.layout.coloraxis.cmax
        assert top == pytest.approx(F.weights_top(*values_of(fig)), rel=1e-6), key
        assert fig.layout.coloraxis.cmin == 0, key
        assert top < 0.5, f"{key}: a 1/T weight is {(1 / 32) / top:.0%} of the scale"  # on 0..1 it was 3%
    both = [v for fig in pair for v in values_of(fig)]
    assert pair[0].layout.coloraxis.cmax == pair[1].layout.coloraxis.cmax == pytest.approx(F.weights_top(*both))


def test_the_colour_bar_shows_the_scales_top_and_says_when_values_go_above():
    weights = (
        np.random.default_rng(0).dirichlet(np.ones(40), size=(2, 40)).astype(np.float32)
    )  # (2, 40, 40) rows summing to 1
    fig = F.heads_heatmap(weights, None, None, title="w", kind="weights")
    colorbar, top = fig.layout.coloraxis.colorbar, fig.layout.coloraxis.cmax
    assert colorbar.tickvals[-1] == pytest.approx(top)
    assert colorbar.ticktext[-1].startswith("≥ ") and float(colorbar.ticktext[-1][2:]) == pytest.approx(top, rel=5e-3)
    assert weights.max() > top  # the "≥" is true


def shown_fraction(fig) -> float:
    """The mean colour of the unmasked shown cells, as a fraction of the scale (uint8 codes)."""
    codes = np.concatenate([v.ravel() for v in values_of(fig)])
    masked = np.concatenate([F.decode_array(t.z).ravel() for t in fig.data if t.meta and t.meta["role"] == "masked"])
    return float(codes[masked == 0].mean() / 255)


def test_a_shrunk_keep_mask_shows_the_fraction_kept_not_the_block_maximum():
    rng = np.random.default_rng(1)
    T, p = 512, 0.5
    keep = (rng.random((2, T, T)) > p).astype(np.float32)
    keep[:, ~np.tri(T, dtype=bool)] = -np.inf  # causally masked
    fig = knobs_that_teach.keep_mask_figure(keep, [f"t{k}" for k in range(T)], False)
    assert "fraction kept" in fig.layout.title.subtitle.text
    kept = keep[np.isfinite(keep)].mean()
    assert shown_fraction(fig) == pytest.approx(kept, abs=0.03)  # about 50%, as the page's metric says
    by_max = F.heads_heatmap(keep, None, None, title="w", kind="weights", zmax=1.0)
    assert shown_fraction(by_max) > 0.9  # what the block maximum showed: nearly all kept


def test_an_all_zero_difference_has_a_plain_colour_bar():
    module = runs.build_module(Settings().module_spec())
    x, labels = runs.build_input(Settings().input_spec())
    view = heads_and_references.build_heads_view(runs.run_heads(module, x), labels, batch_index=0, presenter=False)
    fig = next(p.figure for p in view.panels if p.key == "heads_difference")
    colorbar = fig.layout.coloraxis.colorbar
    assert colorbar.tickmode == "array" and "0" in colorbar.ticktext
    for text in colorbar.ticktext:
        assert not re.search(r"[a-zµ]$", text), text  # no SI prefix such as "100n"
        float(text)
    zero = F.heads_heatmap(np.zeros((2, 4, 4)), None, None, title="d", kind="difference")
    assert list(zero.layout.coloraxis.colorbar.ticktext)[0] == "-0.5" and zero.layout.coloraxis.cmax == 0.5
    tiny = F.heads_heatmap(np.full((1, 3, 3), 3e-8), None, None, title="d", kind="difference")
    assert all(not re.search(r"[a-zµ]$", t) for t in tiny.layout.coloraxis.colorbar.ticktext)


def test_a_float_noise_difference_is_grey_equal_to_rounding_with_its_size_printed():
    """Seen: separate − batched (6e-8) at full red–blue saturation, its "0.00" cells dark blue."""
    module = runs.build_module(Settings().module_spec())
    x, labels = runs.build_input(Settings().input_spec())
    view = heads_and_references.build_heads_view(runs.run_heads(module, x), labels, batch_index=0, presenter=True)
    fig = next(p.figure for p in view.panels if p.key == "heads_difference")
    colours = {c for _, c in fig.layout.coloraxis.colorscale}
    assert colours == {style.ROUNDING_COLOR}  # one grey: nothing saturated
    assert "equal to" in fig.layout.coloraxis.colorbar.title.text and "rounding" in fig.layout.title.subtitle.text
    assert re.search(r"≤ (0|\d(\.\d)?e-0\d):", fig.layout.title.subtitle.text)  # the magnitude: "≤ 0", "≤ 6e-08"
    noise = F.heads_heatmap(
        np.full((2, 4, 4), 6e-8) * np.array([1, -1])[:, None, None], None, None, title="d", kind="difference"
    )
    assert "≤ 6e-08:" in noise.layout.title.subtitle.text and "6e-08" in noise.layout.coloraxis.colorbar.title.text
    assert {c for _, c in noise.layout.coloraxis.colorscale} == {style.ROUNDING_COLOR}
    for trace in fig.data:
        if (trace.meta or {}).get("role") == "values" and trace.texttemplate:
            assert trace.texttemplate == "%{z:.0e}"  # "6e-08", never "0.00"
    real = F.heads_heatmap(np.full((1, 3, 3), 0.3), None, None, title="d", kind="difference")
    assert len({c for _, c in real.layout.coloraxis.colorscale}) > 2  # a real difference keeps red–blue


# --- 2. sizes from the content, labels that fit -------------------------------------------------------------------


def test_a_six_by_six_matrix_is_a_small_square():
    rng = np.random.default_rng(2)
    fig = F.heads_heatmap(rng.random((2, 6, 6)), list("abcdef"), list("abcdef"), title="w", kind="weights")
    assert fig.layout.height < 450 and fig.layout.width < 800
    assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.yaxis2.scaleanchor == "x2"
    width, height = panel_px(fig)
    assert width <= 6 * heatmap_layout.CELL_MAX_PX + 1 and height <= 6 * heatmap_layout.CELL_MAX_PX + 1
    q = F.matrix_heatmap(rng.normal(size=(6, 2)), list("abcdef"), None, title="q")
    assert q.layout.height < 400


@pytest.mark.parametrize("presenter", [False, True])
@pytest.mark.parametrize("width_px", [F.NARROW_FIGURE_PX, F.FULL_FIGURE_PX])
@pytest.mark.parametrize("heads", [1, 2, 8, 16])
@pytest.mark.parametrize("tokens", [2, 6, 16, 64, 300])
def test_tick_labels_label_every_token_up_to_32_and_fit_their_panel_upright_or_turned(
    tokens, heads, width_px, presenter
):
    """Seen: at 6 tokens in presenter mode the key axis said only "Your"; in normal mode 3 of 6."""
    labels = ["journey", "with", "<|endoftext|>", "step"] * (tokens // 4) + ["x"] * (tokens % 4)
    z = np.random.default_rng(3).random((heads, tokens, tokens)).astype(np.float32)
    fig = F.heads_heatmap(z, labels, labels, title="w", kind="weights", presenter=presenter, width_px=width_px)
    font = fig.layout.xaxis.tickfont.size
    width, height = panel_px(fig)
    room = heatmap_layout.label_room_px(presenter)
    if fig.layout.yaxis.scaleanchor:  # square cells: drawn at its own width, it fits its place or the labels' room
        assert fig.layout.width <= width_px or width / tokens == pytest.approx(room, rel=0.02)
    else:  # shrunk bricks: no scale anchor, which would cut the rows that autorange keeps (seen at 1024 tokens)
        assert fig.layout.width is None and fig.layout.yaxis.autorangeoptions.maxallowed == tokens - 0.5
    bar = fig.layout.coloraxis.colorbar  # colour-bar labels, one line of text each, along the bar
    assert len(bar.ticktext) * 1.2 * bar.tickfont.size <= max(bar.len * plot_height(fig), 2.4 * bar.tickfont.size)
    shown = [style._short(style.escape_label(t)) for t in labels]
    for k in range(heads):
        for name in (f"xaxis{k + 1 if k else ''}", f"yaxis{k + 1 if k else ''}"):
            axis = fig.layout[name]
            if tokens <= 32:  # every token, on every panel's axes
                assert list(axis.tickvals) == list(range(tokens)) and list(axis.ticktext) == shown, name
            else:  # a regular subset, the first and the last always
                assert axis.tickvals[0] == 0 and axis.tickvals[-1] == tokens - 1 and len(axis.tickvals) <= F.MAX_TICKS
    for name in ("xaxis", "yaxis"):
        axis = fig.layout[name]
        widest = max(len(re.sub("&[a-z]+;", "x", t)) for t in axis.ticktext) * CHAR * font
        if name == "yaxis":
            assert len(axis.tickvals) * 1.1 * font <= max(height, 1.1 * font)
        elif axis.tickangle == 0:
            assert len(axis.tickvals) * (widest + 4) <= max(width, widest + 4), (len(axis.tickvals), widest, width)
        else:  # turned: one line of text across each labelled cell
            assert axis.tickangle == -90 and len(axis.tickvals) * 1.1 * font <= width


@pytest.mark.parametrize("presenter", [False, True])
@pytest.mark.parametrize("width_px", [F.NARROW_FIGURE_PX, F.FULL_FIGURE_PX])
@pytest.mark.parametrize("tokens", [4, 6, 9, 16])
def test_a_panels_last_label_never_runs_into_the_next_panels_first(tokens, width_px, presenter):
    """Seen in presenter mode: "stepYour", head 0's last key label touching head 1's first."""
    labels = ["Your", "journey", "starts", "with", "one", "step", "a", "b", "c"] + ["t"] * 7
    labels = labels[: tokens - 1] + ["step"]
    z = np.random.default_rng(5).random((2, tokens, tokens)).astype(np.float32)
    fig = F.heads_heatmap(z, labels, labels, title="w", kind="weights", presenter=presenter, width_px=width_px)
    font = fig.layout.xaxis.tickfont.size
    cell = panel_px(fig)[0] / tokens  # the page may squeeze the gap between panels: count on none

    turned = fig.layout.xaxis.tickangle == -90

    def half(axis, k: int) -> float:  # half a label's width across the axis: half a glyph's height when turned
        return 0.5 * font if turned else len(fig.layout[axis].ticktext[k]) * CHAR * font / 2

    assert list(fig.layout.xaxis.ticktext) == labels and list(fig.layout.xaxis2.ticktext) == labels  # none dropped

    last_right = (fig.layout.xaxis.tickvals[-1] + 0.5) * cell + half("xaxis", -1)  # from panel 0's left edge
    next_left = tokens * cell + (fig.layout.xaxis2.tickvals[0] + 0.5) * cell - half("xaxis2", 0)
    assert last_right + (0.2 if turned else 0.5) * font <= next_left  # a space apart (a fifth of a line, turned)


def test_rows_of_panels_leave_room_for_the_tick_labels_and_titles_between_them():
    fig = F.heads_heatmap(np.random.default_rng(4).random((8, 64, 64)), None, None, title="w", kind="weights")
    top_row, next_row = fig.layout.yaxis.domain, fig.layout.yaxis5.domain
    gap_px = (top_row[0] - next_row[1]) * plot_height(fig)
    font = fig.layout.xaxis.tickfont.size
    assert gap_px >= 1.2 * font + 1.2 * fig.layout.annotations[4].font.size  # tick labels above, head title below


@pytest.mark.parametrize("presenter", [False, True])
@pytest.mark.parametrize("width_px", [F.NARROW_FIGURE_PX, F.FULL_FIGURE_PX])
@pytest.mark.parametrize("stage", F.RESHAPE_STAGES)
@pytest.mark.parametrize("shape", [(6, 2, 1), (6, 4, 4), (64, 8, 8), (1024, 16, 64)])
def test_view_diagram_numbers_fit_their_cells_and_the_diagram_its_place(shape, stage, width_px, presenter):
    T, h, hd = shape
    values = np.random.default_rng(5).normal(size=(T, h * hd)) * 10  # "19.60", "-13.42"
    fig = F.reshape_figure(
        T, h, hd, token_labels=None, stage=stage, values=values, presenter=presenter, width_px=width_px
    )
    cells = fig.data[0]
    rows, cols = np.asarray(cells.z).shape
    cell_h = plot_height(fig) / rows
    cell_w = cell_h / fig.layout.yaxis.scaleratio
    texts = [str(t) for t in np.asarray(cells.text).ravel() if t]
    widest = max(len(t) for t in texts) * DIGIT * cells.textfont.size
    assert widest + 4 <= cell_w, (widest, cell_w)
    assert cols * cell_w <= width_px - 100
    for note in fig.layout.annotations:  # "head k" labels inside their coloured header
        assert len(note.text) * CHAR * note.font.size <= cell_w * cols


def test_head_band_labels_never_run_into_each_other():
    for width_px in (F.NARROW_FIGURE_PX, F.FULL_FIGURE_PX):
        fig = F.matrix_heatmap(np.zeros((6, 64)), None, None, title="q", column_groups=16, width_px=width_px)
        size = heatmap_layout.panel_size(6, 64, 1, False, width_px)
        for note in fig.layout.annotations:
            assert len(note.text) * CHAR * note.font.size <= 4 * size.cell_width


def test_presenter_band_labels_fit_the_cells_a_720p_stage_draws():
    """Step 11's 2-column matrix was planned at 74 px cells but drawn at 46 on a 1280 × 720 stage: "head 0" (55 px)
    ran into "head 1". Labels are chosen for the smallest stage's cells, and the lone matrix sits against its bar."""
    fig = F.matrix_heatmap(np.zeros((6, 2)), None, None, title="context", column_groups=2, presenter=True)
    assert [note.text for note in fig.layout.annotations] == ["h0", "h1"]
    plot_h = heatmap_layout.STAGE_LEAST_PX[1] - fig.layout.margin.t - fig.layout.margin.b
    for note in fig.layout.annotations:
        assert len(note.text) * CHAR * note.font.size + 4 <= plot_h / 6
    assert fig.layout.xaxis.constraintoward == "right"
    wide = F.matrix_heatmap(np.zeros((6, 8)), None, None, title="context", column_groups=2)
    assert [note.text for note in wide.layout.annotations] == ["head 0", "head 1"]  # 4 columns a head: room


def test_cell_values_are_printed_only_when_they_fit():
    rng = np.random.default_rng(6)
    scores = rng.normal(size=(2, 6, 6)).astype(np.float32)
    wide = F.heads_heatmap(scores, None, None, title="s", kind="scores")
    narrow = F.heads_heatmap(scores, None, None, title="s", kind="scores", width_px=300)
    assert values_of(wide) and wide.data[0].texttemplate == "%{z:.2f}"
    width, _ = panel_px(wide)
    assert len("-0.00") * DIGIT * wide.data[0].textfont.size < width / 6
    assert narrow.data[0].texttemplate is None


# --- 3. light and dark pages, colour-blind-safe scales -------------------------------------------------------------


def every_figure(run):
    view = attention_explorer.build_view(run, section="reshapes", batch_index=0, enlarge=0, presenter=True)
    yield from (p.figure for p in view.figures())
    yield from weights_figures(run).values()
    yield F.line_chart([1, 2], {"a": [1, 2]}, title="l", x_title="x", y_title="y")
    yield F.bar_chart(["a"], [1.0], title="b", y_title="y")


def test_no_figure_paints_a_background_or_fixes_the_text_colour(run32):
    for fig in every_figure(run32):
        for colour in (fig.layout.paper_bgcolor, fig.layout.plot_bgcolor):
            assert colour in (None, style.TRANSPARENT), (fig.layout.title.text, colour)
        assert fig.layout.font.color is None and fig.layout.title.font.color is None


def test_magnitudes_use_viridis_and_signed_values_a_diverging_scale():
    import plotly.colors as pcolors

    assert [c for _, c in style._KINDS["weights"].colorscale] == pcolors.sequential.Viridis
    assert [c for _, c in style._KINDS["keep"].colorscale] == pcolors.sequential.Viridis
    for kind in ("scores", "values", "difference"):
        assert (
            style._KINDS[kind].diverging
            and [c for _, c in style._KINDS[kind].colorscale] == pcolors.diverging.RdBu[::-1]
        )


def _luminance(color: str) -> float:
    r, g, b = (int(color[k : k + 2], 16) / 255 for k in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_on_a_dark_page_zero_is_the_background_and_the_darkest_weight_keeps_its_edge():
    """Seen: RdBu's white 0 the brightest cell of a dark page; viridis's #440154 merging into the background."""
    from explorer.views.figures import theme

    z = np.random.default_rng(3).standard_normal((2, 6, 6))
    scores = F.heads_heatmap(z, None, None, title="s", kind="scores")
    before = scores.to_json()
    dark = F.for_theme(scores, dark=True)
    assert scores.to_json() == before and dark is not scores  # the cached figure is not touched
    scale = dict((float(p), c) for p, c in dark.layout.coloraxis.colorscale)
    assert scale[0.5] == theme.DARK_BACKGROUND  # 0 draws as the page
    stops = sorted(scale.items())
    lightness = [_luminance(c) for _, c in stops]
    half = len(stops) // 2
    assert lightness[:half] == sorted(lightness[:half], reverse=True) and lightness[half:] == sorted(lightness[half:])
    assert min(lightness) == _luminance(theme.DARK_BACKGROUND)  # nothing darker than 0, the largest the lightest
    weights = F.for_theme(F.heads_heatmap(np.abs(z), None, None, title="w", kind="weights"), dark=True)
    darkest = weights.layout.coloraxis.colorscale[0][1]
    assert _contrast(darkest, theme.DARK_BACKGROUND) >= 2  # #440154 was 1.4:1
    noise = F.for_theme(F.heads_heatmap(z * 1e-8, None, None, title="d", kind="difference"), dark=True)
    grey = noise.layout.coloraxis.colorscale[0][1]
    assert _contrast(grey, theme.DARK_BACKGROUND) < _contrast(style.MASKED_COLOR, theme.DARK_BACKGROUND)
    assert F.for_theme(scores, dark=False) is scores  # a light page draws the built figure itself
    line = F.line_chart([1, 2], {"a": [1, 2]}, title="l", x_title="x", y_title="y")
    assert F.for_theme(line, dark=True) is line  # no house colour scale: no copy


def test_neighbours_the_eye_compares_share_one_colour_scale_and_say_so():
    """Seen at the book's settings: raw scores ±0.308 and masked scores ±0.263, so one number got two colours."""
    run = run_at()  # the book's 2 heads × 6 tokens
    view = attention_explorer.build_view(run, section="attention", batch_index=0, enlarge=1, presenter=False)
    panels = {p.key: p for p in view.figures()}
    raw, masked = panels["attn_scores"].figure.layout.coloraxis, panels["masked_scores"].figure.layout.coloraxis
    top = float(np.abs(run.trace.numpy("attn_scores")[0]).max())
    assert (raw.cmin, raw.cmax) == (masked.cmin, masked.cmax) == (-top, top)
    assert f"±{top:.3g}" in panels["masked_scores"].caption and "one colour scale" in panels["masked_scores"].caption
    weights, enlarged = panels["attn_weights"].figure.layout.coloraxis, panels["enlarged_head"].figure.layout.coloraxis
    assert weights.cmax == enlarged.cmax == F.weights_top(run.trace.numpy("attn_weights")[0])
    dropped = run_at(train=True, dropout=0.5)
    view = attention_explorer.build_view(dropped, section="attention", batch_index=0, enlarge=None, presenter=False)
    panels = {p.key: p for p in view.figures()}
    before, after = (panels[k].figure.layout.coloraxis.cmax for k in ("attn_weights", "attn_weights_dropped"))
    assert before == after and "one colour scale" in panels["attn_weights_dropped"].caption


def test_shrunk_scores_and_weights_say_how_a_block_is_reduced():
    """Seen at 256 tokens: scores were block means, weights block maxima, and no caption said so."""
    run = run_at(num_heads=4, d_in=8, d_out=8, num_tokens=256, context_length=256, input="random")
    view = attention_explorer.build_view(run, section="attention", batch_index=0, enlarge=None, presenter=False)
    for panel in view.figures():
        if panel.key in ("attn_scores", "masked_scores", "attn_weights"):
            assert "scores show each block's mean" in panel.caption and "weights its max" in panel.caption


@pytest.mark.parametrize("presenter", [False, True])
def test_a_short_heatmaps_colour_bar_keeps_a_readable_length_and_its_legend_sits_below_it(presenter):
    """Seen at step 7 (2 heads × 6 tokens): a 65 px bar whose bottom label '-0.263' lay under 'masked (−∞)'."""
    z = np.random.default_rng(5).standard_normal((2, 6, 6)).astype(np.float32)
    z[:, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] = -np.inf
    fig = F.heads_heatmap(z, None, None, title="scaled_scores", kind="scores", presenter=presenter)
    bar, legend, font = fig.layout.coloraxis.colorbar, fig.layout.legend, fig.layout.font.size
    line = 1.5 * font
    assert bar.lenmode == "pixels" and bar.len >= 6 * line + 20  # five lines of labels, the title, the padding
    assert len(bar.ticktext) >= 3
    plot = plot_height(fig)
    legend_top_px = (1 - legend.y) * plot  # from the plot's top, as the bar's
    assert legend.yanchor == "top" and legend_top_px >= bar.len + 10  # under the bar's last label, not over it
    entries = sum(1 for t in fig.data if t.meta and t.meta.get("role") == "legend")
    assert legend_top_px + entries * (1.3 * font + 15) <= plot + fig.layout.margin.b  # inside the figure


def test_the_mask_buffer_at_64_tokens_labels_only_what_its_half_of_the_page_holds():
    """Seen: the buffer beside the slice used (half the page, about 400 px) printed "0 5 101520253035…"."""
    run = run_at(num_tokens=8, context_length=64)
    view = attention_explorer.build_view(run, section="attention", batch_index=0, enlarge=None, presenter=False)
    buffer = next(p.figure for p in view.figures() if p.key == "mask_buffer")
    ticks, font = buffer.layout.xaxis.ticktext, buffer.layout.xaxis.tickfont.size
    drawn = min(buffer.layout.width, 400)  # its box: its own width, or the half page when that is narrower
    panel = drawn - (buffer.layout.width - panel_px(buffer)[0])  # what is left beside the labels and the bar
    assert ticks[0] == "0" and ticks[-1] == "63"
    assert len(ticks) * (max(len(t) for t in ticks) * DIGIT * font + 8) <= panel, list(ticks)


def test_a_panel_without_y_labels_draws_no_y_tick_marks():
    """Seen: head 1's y tick marks sat inside head 0's grid, without their labels."""
    fig = F.heads_heatmap(np.random.default_rng(1).random((3, 6, 6)), None, None, title="w", kind="weights")
    assert fig.layout.yaxis.ticks == "outside" and fig.layout.yaxis.showticklabels
    assert all(fig.layout[f"yaxis{k}"].ticks == "" and not fig.layout[f"yaxis{k}"].showticklabels for k in (2, 3))


def test_trained_heads_axes_name_each_position_once():
    """Seen: the axes were token ids, with duplicates, so two keys read the same."""
    from explorer.views import trained_heads
    from mha_core.training import train

    result = train("previous_token", seed=0, steps=10)
    inspection = result.inspect()
    assert len(set(inspection.labels)) < len(inspection.labels)  # the tokens repeat
    for panel in trained_heads.head_panels(result, inspection):
        ticks = list(panel.figure.layout.xaxis.ticktext)
        assert len(ticks) == len(inspection.labels) == len(set(ticks))  # every key, each its own
        assert [t.split(":")[0] for t in ticks] == [str(k) for k in range(len(ticks))]


# --- 4. line charts, before and after, the final output --------------------------------------------------------


def test_line_chart_legend_sits_beside_the_plot_and_every_series_looks_different():
    series = {"uniform": [1.0] * 5} | {f"head {k}": list(np.linspace(0, 1, 5) + k) for k in range(16)}
    fig = F.line_chart(list(range(5)), series, title="t", x_title="x", y_title="y", references=("uniform",))
    assert fig.layout.legend.x >= 1 and fig.layout.legend.xanchor == "left"  # right of the plot, clear of the title
    looks = [(t.line.color, t.line.dash, t.marker.symbol) for t in fig.data]
    assert len(set(looks)) == len(looks)
    assert fig.data[0].line.color == "rgb(136, 136, 136)" and fig.data[0].line.dash == "dot"
    heads = F.head_colors(16)
    assert [t.line.color for t in fig.data[1:]] == heads  # "head k" is head k's colour, as in the heatmaps
    two = F.line_chart([1, 2], {"traced": [1, 2], "Listing 3.5": [1, 2]}, title="t", x_title="x", y_title="y")
    traced, book = two.data
    assert book.line.dash != "solid" and book.line.width < traced.line.width  # drawn over it, but shows through
    assert traced.line.color not in heads and book.line.color not in heads


def test_a_line_on_an_earlier_one_stays_visible_and_lines_thicken_for_a_projector():
    """Seen on Cost: Listing 3.5's line lay on the traced line and hid it; dotted lines too thin for a projector."""
    series = {"traced": [1.0, 2.0, 4.0], "Listing 3.5": [1.0, 2.001, 4.0], "uniform": [2.0, 2.0, 2.0]}
    normal, big = (
        F.line_chart([1, 2, 3], series, title="t", x_title="x", y_title="y", references=("uniform",), presenter=p)
        for p in (False, True)
    )
    traced, book, uniform = normal.data
    assert book.marker.symbol == "circle-open" and book.marker.size > 1.5 * traced.marker.size  # rings round it
    assert traced.marker.symbol != "circle-open" and uniform.line.width >= 3
    assert all(b.line.width == pytest.approx(1.6 * n.line.width) for n, b in zip(normal.data, big.data, strict=True))


def test_knobs_entropy_plots_keep_noise_small_uncrammed_and_mark_the_pages_scale():
    """Seen: the entropy gap zoomed to 0.001 nats (noise looked dramatic), 12 crammed scale ticks, no mark of the
    page's own scale on the sweep."""
    module = runs.build_module(Settings().module_spec())
    x, labels = runs.build_input(Settings().input_spec())
    view = knobs_that_teach.build_temperature_view(runs.run_temperature(module, x[:1], 2.0), labels, presenter=False)
    panels = {p.key: p.figure for p in view.panels}
    gap = panels["temperature_entropy"].layout.yaxis.range
    assert gap[0] == 0 and gap[1] >= knobs_that_teach.ENTROPY_AXIS_MIN
    sweep = panels["temperature_sweep"]
    assert len(sweep.layout.xaxis.ticktext) <= 6  # decades, not all twelve scales
    star = next(t for t in sweep.data if t.name and t.name.startswith("this page"))
    assert list(star.x) == [2.0] and star.y[0] == pytest.approx(view.mean_entropy, rel=1e-5)


@pytest.mark.parametrize(
    "title", ["Head scores: mean weight on the previous token", "Training loss (cross-entropy, training batch)"]
)
def test_long_titles_wrap_in_presenter_mode_and_get_room(title):
    fig = F.line_chart([1, 2], {"a": [1, 2]}, title=title, x_title="x", y_title="y", presenter=True)
    lines = fig.layout.title.text.split("<br>")
    assert " ".join(lines) == title and len(lines) >= 2
    assert all(len(line) <= style.TITLE_CHARS_PRESENTER for line in lines)
    assert fig.layout.margin.t >= len(lines) * fig.layout.title.font.size
    assert fig.layout.title.pad.t >= 10 + (len(lines) - 1) / 2 * fig.layout.title.font.size  # plotly centres lines


def test_presenter_mode_grows_tick_labels_and_colour_bar_text():
    z = np.random.default_rng(7).random((2, 6, 6))
    normal = F.heads_heatmap(z, None, None, title="w", kind="weights")
    big = F.heads_heatmap(z, None, None, title="w", kind="weights", presenter=True)
    for path in ("xaxis.tickfont.size", "yaxis.title.font.size", "coloraxis.colorbar.tickfont.size"):
        sizes = [functools.reduce(getattr, path.split("."), fig.layout) for fig in (normal, big)]
        assert sizes[1] / sizes[0] == pytest.approx(F.PRESENTER_SCALE, rel=0.05), path


def test_before_comes_before_after_and_presenter_mode_shows_the_result(run32):
    keys = [s.key for s in step_through_steps.STEPS]
    order = {
        "view": ["step_queries_flat", "step_queries_split_view"],
        "softmax": ["step_scaled_scores", "step_attn_weights"],
        "mask": ["step_mask", "step_masked_scores"],
        "out_proj": ["step_context", "step_output"],
    }
    for step, expected in order.items():
        view = step_through.build_step_view(
            run32.trace, run32.labels, keys.index(step) + 1, batch_index=0, presenter=False, dropout_active=False
        )
        assert [p.key for p in view.panels][: len(expected)] == expected
        assert view.main.key == expected[-1]
    module = runs.build_module(Settings(dropout=0.5).module_spec())
    x, labels = runs.build_input(Settings().input_spec())
    dropout = knobs_that_teach.build_dropout_view(runs.run_dropout(module, x, 0.5, seed=1), labels, presenter=False)
    assert [p.key for p in dropout.panels] == ["dropout_before", "dropout_keep", "dropout_after", "dropout_row_sums"]
    assert dropout.panels[dropout.main_index].key == "dropout_after"


def test_a_large_output_is_a_heatmap_under_final_output():
    run = run_at(num_heads=4, d_in=8, d_out=64, num_tokens=32, context_length=32, input="random")  # 32 × 64 > 1024
    view = attention_explorer.build_view(run, section="attention", batch_index=1, enlarge=None, presenter=False)
    assert view.output is None and view.output_panel is not None
    (shown,) = values_of(view.output_panel.figure)
    np.testing.assert_array_equal(shown, run.trace.numpy("output")[1])
    small = attention_explorer.build_view(run_at(), section="attention", batch_index=0, enlarge=None, presenter=False)
    assert small.output is not None and small.output_panel is None


def test_captions_of_query_key_matrices_say_what_rows_and_columns_are(run32):
    view = attention_explorer.build_view(run32, section="attention", batch_index=0, enlarge=None, presenter=False)
    square = [p for p in view.panels if "T, T)" in p.caption]
    assert len(square) >= 3
    for panel in square:
        assert "rows: queries (the token that reads), columns: keys (the tokens it reads)" in panel.caption
    query, source, q_labels, k_labels = teaching.cross_inputs(1, 3, 4, 8, seed=0)
    cross = teaching.run_cross(
        8, 2, bias=False, seed=0, device="cpu", dtype="float32", query=query, source=source, mask=None
    )
    masks = masks_and_cross_attention.build_masks_view(
        cross,
        torch.ones(1, 3, 4, dtype=torch.bool),
        q_labels,
        k_labels,
        batch_index=0,
        implementation="explicit",
        presenter=False,
    )
    assert all("rows: queries" in p.caption for p in masks.panels if p.key in ("mask", "weights"))


def test_a_series_with_gaps_is_compared_only_where_both_have_values():
    """Real heads' induction curve has gaps (None); comparing it with an earlier series raised TypeError."""
    series = {"a": [1.0, None, 3.0], "b": [1.0, None, 3.0], "c": [1.0, 2.0, 3.0]}
    figure = F.line_chart([1, 2, 3], series, title="t", x_title="x", y_title="y")
    a, b, c = figure.data
    assert b.marker.symbol == "circle-open"  # the same gap and the same values: drawn as rings over a
    assert c.marker.symbol != "circle-open"  # a value where a has a gap: not on it
