"""The figures' presentation rules (issue 11): one colour rule per kind on every page, honest shrinking, sizes from
the content, labels that fit, dark-mode-safe styling, wrapped titles, legends clear of titles, before-then-after.

Geometry is checked from what a figure says about itself (its height, margins, domains, scale anchors) and text
widths estimated at 0.55 em a character (digits 0.56 em): a label that would overlap fails here.
The light and dark pages, line charts and before-then-after are in test_figure_styles.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from explorer.glue.state.settings import Settings
from explorer.views import figures as F
from explorer.views import (
    heads_and_references,
    knobs_that_teach,
)
from explorer.views.figures import heatmap_layout, style
from mha_core.runs import forward as runs

from .figure_checks import CHAR, DIGIT, panel_px, plot_height, values_of, weights_figures

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
    assert fig.layout.height < 450 and fig.layout.width <= heatmap_layout.FULL_FIGURE_PX  # fits the page column
    assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.yaxis2.scaleanchor == "x2"
    width, height = panel_px(fig)
    assert width <= 6 * heatmap_layout.CELL_MAX_PX + 1 and height <= 6 * heatmap_layout.CELL_MAX_PX + 1
    q = F.matrix_heatmap(rng.normal(size=(6, 2)), list("abcdef"), None, title="q")
    assert q.layout.height < 6 * heatmap_layout.CELL_MAX_PX + 100  # six cells and a title, no more


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
    shown = [style.shorten(style.escape_label(t)) for t in labels]
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
