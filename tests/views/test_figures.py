"""explorer.views.figures' heatmaps of heads: layout, colour scale, hover and large inputs, checked on small arrays
(and one large one) without Streamlit. The other builders are in test_figure_builders.py."""

import json
import time

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.views import figures as F
from explorer.views.figures import downsample

from .figure_checks import TOKENS, causal_scores, heatmap_yaxes, softmax, traces

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
    assert downsample.block_reduce(z, 2, 2, "max")[0].tolist() == [[0, 1], [0, 0]]
    assert downsample.block_reduce(z, 2, 2, "mean")[0].tolist() == [[0, 0.25], [0, 0]]


def test_block_reduce_keeps_fully_masked_blocks_masked_and_nan_visible():
    z = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    z[0, :2, 2:] = -np.inf  # a fully masked block
    z[0, 2, 0] = -np.inf  # a partly masked block: its mean skips the −∞ cell
    z[0, 3, 3] = np.nan
    for how in ("max", "mean"):
        out = downsample.block_reduce(z, 2, 2, how)[0]
        assert out[0, 1] == -np.inf
        assert np.isnan(out[1, 1])
    assert downsample.block_reduce(z, 2, 2, "mean")[0, 1, 0] == pytest.approx((9 + 12 + 13) / 3)


def test_uneven_blocks_cover_exactly_the_token_range():
    z = np.ones((1, 10, 7), dtype=np.float32)
    out = downsample.block_reduce(z, 4, 3, "mean")
    assert out.shape == (1, 3, 3)
    assert np.array_equal(out, np.ones_like(out))  # padding does not dilute the last blocks
    fig = F.heads_heatmap(np.ones((1, 410, 250)), None, None, title="t", kind="values", hover_exact_limit=1)
    trace = traces(fig, "values")[0]  # at most 200 blocks a side: blocks of 3 queries × 2 keys
    assert trace.z.shape == (137, 125)
    assert (trace.x0, trace.dx, trace.y0, trace.dy) == (0.5, 2, 1.0, 3)  # brick k covers keys 2k, 2k + 1
    assert fig.layout.yaxis.autorangeoptions.maxallowed == 409.5  # the last block, 2 queries tall, is cut there
    assert fig.layout.xaxis.autorangeoptions.maxallowed == 249.5
