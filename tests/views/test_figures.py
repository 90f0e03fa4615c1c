"""explorer.views.figures: pure plotly builders, checked on small arrays (and one large one) without Streamlit."""

import json
import time

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.views import figures as F
from explorer.views.figures import downsample, heatmap_layout

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]  # "the" twice: duplicates must survive


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def causal_scores(rng, h, T):
    """(h, T, T) float32 scores with −∞ above the diagonal, as the explicit attention path produces."""
    scores = rng.normal(size=(h, T, T)).astype(np.float32)
    scores[:, ~np.tri(T, dtype=bool)] = -np.inf
    return scores


def softmax(scores):
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def traces(fig, role, head=None):
    return [t for t in fig.data if t.meta and t.meta["role"] == role and (head is None or t.meta.get("head") == head)]


def heatmap_yaxes(fig):
    return [fig.layout[name] for name in fig.layout if name.startswith("yaxis")]


# --- heads_heatmap: layout -------------------------------------------------------------------------------------


def test_row_zero_is_on_top_in_every_panel(rng):
    fig = F.heads_heatmap(rng.random((3, 6, 6)), TOKENS, TOKENS, title="w", kind="weights")
    yaxes = heatmap_yaxes(fig)
    assert len(yaxes) == 3
    assert all(axis.autorange == "reversed" for axis in yaxes)


def test_duplicate_labels_are_kept_on_numeric_axes(rng):
    fig = F.heads_heatmap(rng.random((2, 6, 6)), TOKENS, TOKENS, title="w", kind="weights")
    for axis in [fig.layout.xaxis, fig.layout.yaxis, fig.layout.xaxis2, fig.layout.yaxis2]:
        assert axis.type == "linear"
        assert list(axis.tickvals) == list(range(6))
        assert list(axis.ticktext) == TOKENS
    assert all(t.x is None and t.y is None for t in traces(fig, "values"))  # cells sit at positions 0..5


def test_many_labels_are_thinned_to_at_most_16_ticks(rng):
    labels = [f"t{k}" for k in range(1024)]
    fig = F.matrix_heatmap(rng.random((1024, 40)), labels, None, title="x", kind="values")
    ticks = fig.layout.yaxis.tickvals
    assert 2 <= len(ticks) <= 16
    assert list(fig.layout.yaxis.ticktext) == [labels[k] for k in ticks]
    assert len(fig.layout.xaxis.tickvals) <= 16


def test_panels_wrap_into_rows_beyond_four_heads(rng):
    fig = F.heads_heatmap(rng.random((8, 4, 4)), None, None, title="w", kind="weights")
    domains_y = {tuple(axis.domain) for axis in heatmap_yaxes(fig)}
    domains_x = {tuple(fig.layout[name].domain) for name in fig.layout if name.startswith("xaxis")}
    assert len(domains_y) == 2
    assert len(domains_x) == 4
    assert [a.text for a in fig.layout.annotations] == [f"head {k}" for k in range(8)]


def test_labels_are_escaped_so_special_tokens_are_not_read_as_html(rng):
    fig = F.heads_heatmap(rng.random((1, 2, 2)), ["<|endoftext|>", "a&b"], None, title="w", kind="weights")
    assert list(fig.layout.yaxis.ticktext) == ["&lt;|endoftext|&gt;", "a&amp;b"]


def test_wrong_label_count_and_unknown_kind_are_errors(rng):
    with pytest.raises(ValueError, match="5 query labels for 6"):
        F.heads_heatmap(rng.random((1, 6, 6)), TOKENS[:5], TOKENS, title="w", kind="weights")
    with pytest.raises(ValueError, match="kind must be one of"):
        F.heads_heatmap(rng.random((1, 6, 6)), TOKENS, TOKENS, title="w", kind="probabilities")


# --- heads_heatmap: colour scale, masked and NaN cells ---------------------------------------------------------


def test_one_colour_scale_is_shared_by_every_head(rng):
    scores = causal_scores(rng, 3, 6)
    scores[2, 5, 0] = 9.0  # only head 2 reaches 9
    fig = F.heads_heatmap(scores, TOKENS, TOKENS, title="s", kind="scores")
    main = traces(fig, "values")
    assert len(main) == 3
    assert {t.coloraxis for t in main} == {"coloraxis"}
    assert all(t.zmin is None and t.zmax is None for t in main)  # no per-trace range to drift apart
    assert fig.layout.coloraxis.cmax == pytest.approx(9.0)
    assert fig.layout.coloraxis.cmin == pytest.approx(-9.0)  # scores: symmetric about 0
    assert sum(t.showscale is not False for t in fig.data if isinstance(t, go.Heatmap)) == 3  # all on one bar


def test_weights_default_to_zero_and_their_99th_percentile_and_given_range_wins(rng):
    weights = rng.random((2, 30, 30)) * 0.2
    fig = F.heads_heatmap(weights, None, None, title="w", kind="weights")
    assert fig.layout.coloraxis.cmin == 0.0
    assert fig.layout.coloraxis.cmax == pytest.approx(np.quantile(weights, 0.99), rel=1e-6)
    fig = F.heads_heatmap(rng.random((2, 3, 3)), None, None, title="v", kind="values", zmin=-2, zmax=3)
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (-2.0, 3.0)


def test_masked_cells_leave_the_main_trace_for_the_grey_overlay(rng):
    scores = causal_scores(rng, 2, 6)
    fig = F.heads_heatmap(scores, TOKENS, TOKENS, title="s", kind="scores")
    upper = ~np.tri(6, dtype=bool)
    for k in range(2):
        (main,) = traces(fig, "values", k)
        (masked,) = traces(fig, "masked", k)
        assert np.isnan(main.z[upper]).all()
        assert np.array_equal(main.z[~upper], scores[k][~upper])
        assert np.array_equal(masked.z[upper], np.ones(upper.sum()))
        assert np.isnan(masked.z[~upper]).all()
        assert masked.colorscale[0][1] == masked.colorscale[-1][1] == F.MASKED_COLOR  # one fixed colour
        assert "masked (−∞)" in masked.hovertemplate
        assert masked.coloraxis is None
    assert [t.name for t in traces(fig, "legend")] == ["masked (−∞)"]


def test_nan_cells_get_their_own_colour_and_legend_entry(rng):
    weights = softmax(causal_scores(rng, 2, 6))
    weights[1, 3] = np.nan  # a fully masked row's softmax
    fig = F.heads_heatmap(weights, TOKENS, TOKENS, title="w", kind="weights")
    (nan_layer,) = traces(fig, "nan", 1)
    assert np.array_equal(nan_layer.z[3], np.ones(6))
    assert np.isnan(np.delete(nan_layer.z, 3, axis=0)).all()
    assert nan_layer.colorscale[0][1] == F.NAN_COLOR
    assert not traces(fig, "masked")  # weights hold no −∞
    assert [t.name for t in traces(fig, "legend")] == ["NaN"]


def test_mask_kind_names_its_two_colours(rng):
    fig = F.heads_heatmap(np.tri(4, dtype=bool)[None], None, None, title="mask", kind="mask")
    assert list(fig.layout.coloraxis.colorbar.ticktext) == ["blocked", "may attend"]
    (main,) = traces(fig, "values")
    assert np.array_equal(main.z, np.tri(4, dtype=np.float32))


# --- heads_heatmap: hover and exact values ---------------------------------------------------------------------


def test_small_matrices_carry_exact_values_and_tokens_for_hover(rng):
    weights = softmax(causal_scores(rng, 2, 6))
    fig = F.heads_heatmap(weights, TOKENS, TOKENS, title="w", kind="weights")
    for k, main in enumerate(traces(fig, "values")):
        assert main.z.dtype == np.float32
        assert np.array_equal(main.z, weights[k])  # bit for bit
        assert "%{z:.4f}" in main.hovertemplate
        assert main.customdata[4, 1].tolist() == ["the", "cat"]  # (query token, key token)
        assert main.texttemplate == "%{z:.2f}"  # 36 cells: values printed in the cells
    decoded = json.loads(fig.to_json())["data"][0]["z"]
    assert decoded["dtype"] == "f4"  # sent as a typed array, not as decimal text


def test_medium_matrices_keep_exact_values_but_drop_token_text(rng):
    weights = rng.random((16, 64, 64)).astype(np.float32)
    fig = F.heads_heatmap(weights, None, None, title="w", kind="weights")
    main = traces(fig, "values")
    assert all(t.customdata is None for t in main)
    assert np.array_equal(main[5].z, weights[5])
    assert "%{z:.4f}" in main[5].hovertemplate
    assert main[5].texttemplate is None


# --- heads_heatmap: large inputs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_scores():
    """16 heads × 1024 × 1024 causal scores: 16.8 M cells, 64 MB of float32."""
    scores = np.random.default_rng(1).normal(size=(16, 1024, 1024)).astype(np.float32)
    scores[:, ~np.tri(1024, dtype=bool)] = -np.inf
    return scores


@pytest.mark.parametrize("kind", ["scores", "weights"])
def test_16_heads_of_1024_tokens_stay_small_and_fast(big_scores, kind):
    matrices = big_scores if kind == "scores" else softmax(big_scores)
    labels = [f"t{k}" for k in range(1024)]
    start = time.perf_counter()
    fig = F.heads_heatmap(matrices, labels, labels, title=f"{kind} (16, 1024, 1024)", kind=kind)
    nbytes = F.figure_nbytes(fig)
    assert time.perf_counter() - start < 15
    assert nbytes < 1_500_000
    main = traces(fig, "values")
    assert len(main) == 16
    for t in main:
        assert t.z.dtype == np.uint8  # quantised codes, not the exact values
        assert max(t.z.shape) <= 200
        blocks = t.z.shape[0]  # uniform bricks in token positions: the first starts at -0.5, the last covers 1023
        assert t.x0 - t.dx / 2 == -0.5 and t.x0 + (blocks - 0.5) * t.dx >= 1023.5
        assert t.y0 - t.dy / 2 == -0.5 and t.y0 + (blocks - 0.5) * t.dy >= 1023.5
    for axis in (fig.layout.xaxis, fig.layout.yaxis):  # ... and the axes stop at the matrix's edge
        assert (axis.autorangeoptions.minallowed, axis.autorangeoptions.maxallowed) == (-0.5, 1023.5)
        assert t.customdata is None and "%{z" not in t.hovertemplate
    # square cells (a scale anchor) on a fixed range, row 0 at the top: autorange's clip is lost to the anchor
    assert tuple(fig.layout.yaxis.range) == (1023.5, -0.5) and tuple(fig.layout.xaxis.range) == (-0.5, 1023.5)
    assert fig.layout.yaxis.scaleanchor == "x"
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 255
    assert len(fig.layout.coloraxis.colorbar.tickvals) == len(fig.layout.coloraxis.colorbar.ticktext) >= 2
    if kind == "scores":
        masked = traces(fig, "masked", 0)[0]
        assert masked.z.dtype == np.uint8
        n = masked.z.shape[0]
        assert masked.z[0, -1] == 1 and masked.z[-1, 0] == 0  # top right fully masked, bottom left not
        assert masked.z[np.triu_indices(n, 1)].all()  # every block strictly above the diagonal is masked
        assert not masked.z[np.diag_indices(n)].any()  # diagonal blocks hold the diagonal's finite scores


def test_colour_bar_ticks_map_codes_back_to_values(rng):
    values = rng.normal(size=(4, 300, 300)).astype(np.float32)
    fig = F.heads_heatmap(values, None, None, title="v", kind="values")
    colorbar = fig.layout.coloraxis.colorbar
    lo, hi = -np.abs(values).max(), np.abs(values).max()
    for code, text in zip(colorbar.tickvals, colorbar.ticktext, strict=True):
        assert lo + code / 255 * (hi - lo) == pytest.approx(float(text), abs=1e-3 * (hi - lo) + 1e-9)


def test_block_max_keeps_a_sparse_peak_and_block_mean_averages():
    z = np.zeros((1, 4, 4), dtype=np.float32)
    z[0, 1, 2] = 1.0
    assert downsample._block_reduce(z, 2, 2, "max")[0].tolist() == [[0, 1], [0, 0]]
    assert downsample._block_reduce(z, 2, 2, "mean")[0].tolist() == [[0, 0.25], [0, 0]]


def test_block_reduce_keeps_fully_masked_blocks_masked_and_nan_visible():
    z = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    z[0, :2, 2:] = -np.inf  # a fully masked block
    z[0, 2, 0] = -np.inf  # a partly masked block: its mean skips the −∞ cell
    z[0, 3, 3] = np.nan
    for how in ("max", "mean"):
        out = downsample._block_reduce(z, 2, 2, how)[0]
        assert out[0, 1] == -np.inf
        assert np.isnan(out[1, 1])
    assert downsample._block_reduce(z, 2, 2, "mean")[0, 1, 0] == pytest.approx((9 + 12 + 13) / 3)


def test_uneven_blocks_cover_exactly_the_token_range():
    z = np.ones((1, 10, 7), dtype=np.float32)
    out = downsample._block_reduce(z, 4, 3, "mean")
    assert out.shape == (1, 3, 3)
    assert np.array_equal(out, np.ones_like(out))  # padding does not dilute the last blocks
    fig = F.heads_heatmap(np.ones((1, 410, 250)), None, None, title="t", kind="values", hover_exact_limit=1)
    trace = traces(fig, "values")[0]  # at most 200 blocks a side: blocks of 3 queries × 2 keys
    assert trace.z.shape == (137, 125)
    assert (trace.x0, trace.dx, trace.y0, trace.dy) == (0.5, 2, 1.0, 3)  # brick k covers keys 2k, 2k + 1
    assert fig.layout.yaxis.autorangeoptions.maxallowed == 409.5  # the last block, 2 queries tall, is cut there
    assert fig.layout.xaxis.autorangeoptions.maxallowed == 249.5


# --- matrix_heatmap ---------------------------------------------------------------------------------------------


def test_matrix_heatmap_bands_one_coloured_block_per_head(rng):
    q = rng.normal(size=(6, 8)).astype(np.float32)
    fig = F.matrix_heatmap(q, TOKENS, None, title="Q (6, 8)", column_groups=4)
    bands = [s for s in fig.layout.shapes if s.name and s.name.startswith("head band")]
    assert len(bands) == 4
    assert [s.fillcolor for s in bands] == F.head_colors(4)
    assert [(s.x0, s.x1) for s in bands] == [(-0.5, 1.5), (1.5, 3.5), (3.5, 5.5), (5.5, 7.5)]
    assert sum(s.name == "head separator" for s in fig.layout.shapes) == 3
    assert [a.text for a in fig.layout.annotations] == ["head 0", "head 1", "head 2", "head 3"]
    (main,) = traces(fig, "values")
    assert np.array_equal(main.z, q)
    assert fig.layout.yaxis.autorange == "reversed"


def test_matrix_heatmap_bands_survive_downsampling(rng):
    fig = F.matrix_heatmap(rng.normal(size=(1024, 768)), None, None, title="out", column_groups=12)
    assert sum(bool(s.name and s.name.startswith("head band")) for s in fig.layout.shapes) == 12
    assert F.figure_nbytes(fig) < 300_000


def test_matrix_heatmap_rejects_uneven_head_blocks(rng):
    with pytest.raises(ValueError, match="do not split into 3"):
        F.matrix_heatmap(rng.normal(size=(6, 8)), None, None, title="Q", column_groups=3)


# --- reshape_figure ---------------------------------------------------------------------------------------------


def cells_of(fig):
    """Grid cells that are drawn: their head index (z) and printed text."""
    z = np.asarray(fig.data[0].z, dtype=float)
    text = np.asarray(fig.data[0].text, dtype=object)
    return z, text


def test_reshape_stages_move_the_numbers_as_numpy_does(rng):
    T, h, hd = 6, 2, 3
    values = rng.normal(size=(T, h * hd))
    heads = values.reshape(T, h, hd).transpose(1, 0, 2)  # (h, T, hd), as the module does per batch element
    flat = F.reshape_figure(T, h, hd, token_labels=TOKENS, stage="flat", values=values)
    z, text = cells_of(flat)
    assert np.isfinite(z).sum() == T * h * hd
    assert text[1:].tolist() == [[f"{v:.2f}" for v in row] for row in values]  # row 0 holds the head names

    transposed = F.reshape_figure(T, h, hd, token_labels=TOKENS, stage="transpose", values=values)
    z, text = cells_of(transposed)
    for k in range(h):
        block = slice(k * (T + 1) + 1, (k + 1) * (T + 1))  # a header row, then T token rows
        assert text[block].tolist() == [[f"{v:.2f}" for v in row] for row in heads[k]]
        assert (z[block] == k).all()  # tinted in head k's colour
    assert list(transposed.layout.yaxis.ticktext) == TOKENS * h
    assert transposed.layout.yaxis.range[0] > transposed.layout.yaxis.range[1]  # row 0 on top


def test_reshape_view_without_values_shows_flat_column_indices():
    fig = F.reshape_figure(2, 3, 2, token_labels=["a", "b"], stage="view")
    z, text = cells_of(fig)
    assert text[1].tolist() == ["0", "1", "", "2", "3", "", "4", "5"]  # a gap column between heads
    assert np.isnan(z[:, 2]).all()
    assert [a.text for a in fig.layout.annotations] == ["head 0", "head 1", "head 2"]
    assert fig.layout.title.text == "view: (T, h, head_dim) = (2, 3, 2)"


def test_reshape_large_shapes_are_cut_and_say_so():
    fig = F.reshape_figure(1024, 12, 64, token_labels=None, stage="transpose")
    assert "8 of 1024 tokens" in fig.layout.title.subtitle.text.replace("<br>", " ")
    assert F.figure_nbytes(fig) < 50_000


# --- line and bar charts, template, config ----------------------------------------------------------------------


def test_line_chart_draws_each_series_on_log_axes():
    fig = F.line_chart(
        [1, 2, 4, 8],
        {"explicit": [1, 2, 4, 9], "fused": [1, 1, 2, 3]},
        title="cost",
        x_title="T",
        y_title="ms",
        log_x=True,
        log_y=True,
    )
    assert [t.name for t in fig.data] == ["explicit", "fused"]
    assert list(fig.data[1].y) == [1, 1, 2, 3]
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    assert list(fig.layout.xaxis.ticktext) == ["1", "2", "4", "8"]
    with pytest.raises(ValueError, match="3 values for 4 xs"):
        F.line_chart([1, 2, 3, 4], {"bad": [1, 2, 3]}, title="t", x_title="x", y_title="y")


def test_bar_chart_keeps_duplicate_labels_apart():
    fig = F.bar_chart(["cpu", "cuda", "cpu"], [3.0, 0.5, 2.0], title="time", y_title="ms")
    assert list(fig.data[0].x) == [0, 1, 2]
    assert list(fig.layout.xaxis.ticktext) == ["cpu", "cuda", "cpu"]


def test_png_filename_comes_from_the_title(rng):
    fig = F.heads_heatmap(rng.random((2, 6, 6)), TOKENS, TOKENS, title="Attention weights (2, 6, 6)", kind="weights")
    assert fig.layout.meta["filename"] == "attention-weights-2-6-6"
    assert F.png_config_for(fig) == F.png_config("attention-weights-2-6-6")
    assert F.png_config("x") == {
        "toImageButtonOptions": {"format": "png", "filename": "x", "scale": 2},
        "displaylogo": False,
    }


def test_presenter_mode_enlarges_fonts(rng):
    normal = F.heads_heatmap(rng.random((1, 3, 3)), None, None, title="w", kind="weights")
    big = F.heads_heatmap(rng.random((1, 3, 3)), None, None, title="w", kind="weights", presenter=True)
    assert big.layout.font.size / normal.layout.font.size == pytest.approx(1.6, rel=0.05)
    assert big.layout.title.font.size > normal.layout.title.font.size
    assert big.layout.height > normal.layout.height
    for fig in (
        F.line_chart([1, 2], {"a": [1, 2]}, title="t", x_title="x", y_title="y", presenter=True),
        F.bar_chart(["a"], [1.0], title="t", y_title="y", presenter=True),
        F.reshape_figure(2, 2, 1, token_labels=None, stage="flat", presenter=True),
    ):
        assert fig.layout.font.size == big.layout.font.size


def _linear(color: str) -> np.ndarray:
    c = np.array([int(color[k : k + 2], 16) for k in (1, 3, 5)]) / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(linear: np.ndarray) -> np.ndarray:
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    f = np.cbrt(np.maximum(xyz / np.array([0.9505, 1.0, 1.089]), 0.008856))
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


# Machado et al. (2009), severity 1: protanopia, deuteranopia, tritanopia
CVD = {
    "normal": np.eye(3),
    "protan": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deutan": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
    "tritan": np.array(
        [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]
    ),
}


def test_sixteen_head_colours_stay_apart_in_light_and_dark_mode_and_for_colour_blind_viewers():
    colors = F.head_colors(16)
    assert len(set(colors)) == 16 and F.head_colors(17)[16] == colors[0]  # sixteen, then the palette again
    assert not {c.lower() for c in colors} & {"#7f7f7f", "#888888", "#ff00ff"}  # masked grey, NaN magenta
    dark = float(_linear("#0e1117") @ [0.2126, 0.7152, 0.0722])  # Streamlit's dark background
    for color in colors:
        lum = float(_linear(color) @ [0.2126, 0.7152, 0.0722])
        assert 1.05 / (lum + 0.05) >= 1.7 and (lum + 0.05) / (dark + 0.05) >= 2.7, color  # on white, on dark
    for name, matrix in CVD.items():
        labs = [_lab(np.clip(matrix @ _linear(c), 0, 1)) for c in colors]
        closest = min(np.linalg.norm(a - b) for k, a in enumerate(labs) for b in labs[k + 1 :])
        assert closest >= (14 if name == "normal" else 5), name  # ΔE (CIE 1976)


def test_head_k_has_one_colour_in_every_figure_and_legend():
    from explorer.views import follow_a_token, head_view

    h, t = 16, 6
    colors = F.head_colors(h)
    weights = np.full((h, t, t), 1 / t)
    lines = head_view.head_view_figure(weights, [f"t{k}" for k in range(t)], presenter=True)
    legend = {tr.name: tr.line.color for tr in lines.data if tr.name and tr.name.startswith("head ")}
    assert legend == {f"head {k}": colors[k] for k in range(h)}
    bars = follow_a_token.contributions_figure(np.ones((h, 32)), np.zeros(32), np.ones(32), presenter=True)
    assert [tr.marker.color for tr in bars.data[:h]] == colors
    chart = F.line_chart([0, 1], {f"head {k}": [0, k] for k in range(h)}, title="t", x_title="x", y_title="y")
    assert [tr.line.color for tr in chart.data] == colors
    band = F.matrix_heatmap(np.ones((2, 32)), None, None, title="q", column_groups=h)
    assert [s.fillcolor for s in band.layout.shapes if s.name and s.name.startswith("head band")] == colors
    assert lines.layout.legend.orientation == "h"  # presenter, 16 heads: rows under the plot, which a stage holds
    assert lines.layout.margin.b >= 3 * 1.3 * lines.layout.legend.font.size  # room for three rows of entries
    for fig in (bars, chart):  # no legend cut: the plot is tall enough for every entry
        plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
        assert plot_px >= h * (1.3 * fig.layout.legend.font.size + 14), fig.layout.title.text  # 32.5 px an entry at 15


def test_default_figure_is_small(rng):
    fig = F.heads_heatmap(softmax(causal_scores(rng, 2, 6)), TOKENS, TOKENS, title="w (2, 6, 6)", kind="weights")
    assert F.figure_nbytes(fig) < 10_000  # no bulky template


# --- figures are plain dicts, wrapped once: they must still be what plotly's schema accepts ----------------------


def _every_builder(rng):
    scores = causal_scores(rng, 5, 6)
    yield F.heads_heatmap(scores, TOKENS, TOKENS, title="masked", kind="scores")
    with_nan = softmax(causal_scores(rng, 2, 6))
    with_nan[1, 2, 0] = np.nan
    yield F.heads_heatmap(with_nan, TOKENS, TOKENS, title="nan", kind="weights", presenter=True)
    yield F.heads_heatmap(causal_scores(rng, 16, 130), None, None, title="downsampled", kind="scores")
    yield F.heads_heatmap(np.tri(6, dtype=bool)[None], TOKENS, TOKENS, title="mask", kind="mask")
    yield F.matrix_heatmap(rng.normal(size=(6, 8)), TOKENS, None, title="q", column_groups=4)
    yield F.matrix_heatmap(rng.normal(size=(600, 64)), None, None, title="big", column_groups=8)
    for stage in F.RESHAPE_STAGES:
        yield F.reshape_figure(6, 2, 4, token_labels=TOKENS, stage=stage, values=rng.normal(size=(6, 8)))
    yield F.line_chart([1, 2, 4], {"a": [1, 2, 3], "b": [3, 2, 1]}, title="l", x_title="x", y_title="y", log_x=True)
    yield F.bar_chart(["cpu", "cuda"], [1.0, 2.0], title="b", y_title="ms")


def test_every_builder_passes_plotlys_validation_unchanged(rng):
    """Builders skip plotly's per-property validation for speed; here the same dicts go through it in full."""
    for fig in _every_builder(rng):
        sent = json.loads(fig.to_json())
        validated = json.loads(go.Figure(fig.to_dict()).to_json())  # raises on any property plotly does not know
        assert validated == sent, fig.layout.title.text


@pytest.mark.parametrize(("rows", "cols", "titles"), [(1, 1, None), (1, 3, 3), (2, 4, 5), (4, 4, 16), (3, 2, 6)])
def test_subplot_grid_matches_make_subplots(rows, cols, titles):
    from plotly.subplots import make_subplots

    names = [f"head {k}" for k in range(titles)] if titles else None
    expected = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=names,
        horizontal_spacing=0.04 if cols > 1 else 0,
        vertical_spacing=0.25 / rows,
    )
    expected.update_annotations(font_size=17)
    ours = heatmap_layout.subplot_grid(rows, cols, names, 17)
    reference = expected.to_dict()["layout"]
    for k in range(rows * cols):
        suffix = "" if k == 0 else str(k + 1)
        for axis in (f"xaxis{suffix}", f"yaxis{suffix}"):
            assert ours[axis]["anchor"] == reference[axis]["anchor"]
            np.testing.assert_allclose(ours[axis]["domain"], reference[axis]["domain"], atol=1e-12)
    got = [(a["text"], a["x"], a["y"], a["font"]["size"]) for a in ours.get("annotations", [])]
    want = [(a["text"], a["x"], a["y"], a["font"]["size"]) for a in reference.get("annotations", [])]
    assert [g[0] for g in got] == [w[0] for w in want]
    np.testing.assert_allclose([g[1:] for g in got] or [[0, 0, 0]], [w[1:] for w in want] or [[0, 0, 0]], atol=1e-12)


def test_a_phone_stacks_the_heads_in_one_column_each_at_least_150_px(rng):
    """Issue 21: on a 390 x 844 phone two heads side by side got about 65 px each and their labels ran together."""
    import plotly.graph_objects as go

    from explorer.views.figures.heatmap_layout import PHONE_FIGURE_PX, PHONE_MIN_PANEL_PX, one_column

    fig = F.heads_heatmap(softmax(causal_scores(rng, 4, 6)), TOKENS, TOKENS, title="w", kind="weights")
    before = fig.to_json()
    stacked = one_column(fig)
    assert fig.to_json() == before  # the cached figure is not changed
    layout = stacked.layout
    assert all(layout[f"xaxis{s}"].domain == (0.0, 1.0) for s in ("", "2", "3", "4"))  # one column
    tops = [layout[f"yaxis{s}"].domain[1] for s in ("", "2", "3", "4")]
    assert tops == sorted(tops, reverse=True) and all(layout[f"yaxis{s}"].showticklabels for s in ("", "2"))
    plot_px = layout.height - layout.margin.t - layout.margin.b
    sides = [(layout[f"yaxis{s}"].domain[1] - layout[f"yaxis{s}"].domain[0]) * plot_px for s in ("", "2", "3", "4")]
    assert min(sides) >= PHONE_MIN_PANEL_PX and max(sides) <= PHONE_FIGURE_PX
    assert [a.y for a in layout.annotations[:4]] == pytest.approx(tops)  # each head's title on its panel
    assert layout.coloraxis.colorbar.orientation == "h" and layout.width is None
    go.Figure(stacked.to_dict())  # plotly's validation accepts it
    single = F.heads_heatmap(softmax(causal_scores(rng, 1, 6)), TOKENS, TOKENS, title="w", kind="weights")
    assert one_column(single) is single
    chart = F.line_chart([0, 1], {"a": [0, 1]}, title="t", x_title="x", y_title="y")
    assert one_column(chart) is chart  # a line chart (Step through's step 7 raised KeyError: 'domain')
    grid = F.heads_heatmap(softmax(causal_scores(rng, 2, 6)), TOKENS, TOKENS, title="w", kind="weights")
    grid.layout.meta = {"filename": "thumbnails"}  # not marked as a heads grid (the Real heads page's model view)
    assert one_column(grid) is grid
