"""The figures' presentation rules (issue 11), continued: light and dark pages with colour-blind-safe scales, line
charts, wrapped titles, before-then-after and the final output (tests/views/test_figure_rules.py has colour rules and
sizes).
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
import torch

from explorer.glue.state.settings import Settings
from explorer.views import (
    attention_explorer,
    attention_variants,
    knobs_that_teach,
    masks_and_cross_attention,
    step_through,
    step_through_steps,
)
from explorer.views import figures as F
from explorer.views.figures import style
from mha_core.runs import forward as runs
from mha_core.runs import teaching
from mha_core.variants.page_runs import VariantSpec, run_variants

from .figure_checks import DIGIT, panel_px, plot_height, run_at, values_of, weights_figures

# --- 3. light and dark pages, colour-blind-safe scales -------------------------------------------------------------


def every_figure(run):
    view = attention_explorer.build_view(run, section="reshapes", batch_index=0, enlarge=0, presenter=True)
    yield from (p.figure for p in view.figures())
    yield from weights_figures(run).values()
    yield F.line_chart([1, 2], {"a": [1, 2]}, title="l", x_title="x", y_title="y")
    yield F.bar_chart(["a"], [1.0], title="b", y_title="y")


def test_an_axis_without_tick_labels_draws_no_tick_marks(run32):
    """Seen: a dash left of Attention variants' K/V strip, whose one row is unnamed. The page's template colours the
    ticks, which makes plotly.js draw them unless the figure says ``ticks: ""``."""
    torch.manual_seed(0)
    spec = VariantSpec(d_in=3, d_out=12, num_heads=6, context_length=10, num_kv_groups=2, latent_dim=4, window=3)
    variants = run_variants(spec, torch.rand(2, 8, 3), [f"t{i}" for i in range(8)])
    figures = [*every_figure(run32), *(p.figure for p in attention_variants.heads_panels(variants, "GQA", 0, False))]
    unlabelled = 0
    for fig in figures:
        for name in fig.layout:
            axis = fig.layout[name]
            if re.fullmatch("[xy]axis[0-9]*", name) and axis.showticklabels is False:
                unlabelled += 1
                assert axis.ticks == "", (fig.layout.title.text, name)
    assert unlabelled >= 2  # the strip's y axis and the heads grid's other panels at least


def test_no_figure_paints_a_background_or_fixes_the_text_colour(run32):
    for fig in every_figure(run32):
        for colour in (fig.layout.paper_bgcolor, fig.layout.plot_bgcolor):
            assert colour in (None, style.TRANSPARENT), (fig.layout.title.text, colour)
        assert fig.layout.font.color is None and fig.layout.title.font.color is None


def test_magnitudes_use_viridis_and_signed_values_a_diverging_scale():
    import plotly.colors as pcolors

    assert [c for _, c in style.COLOR_KINDS["weights"].colorscale] == pcolors.sequential.Viridis
    assert [c for _, c in style.COLOR_KINDS["keep"].colorscale] == pcolors.sequential.Viridis
    for kind in ("scores", "values", "difference"):
        assert (
            style.COLOR_KINDS[kind].diverging
            and [c for _, c in style.COLOR_KINDS[kind].colorscale] == pcolors.diverging.RdBu[::-1]
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
    from mha_core.toy.tiny_training import train

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
