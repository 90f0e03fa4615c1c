"""explorer.views.figures' other builders: matrix heatmaps, reshape diagrams, line and bar charts, head colours, and
every builder's figure as plotly's schema accepts it, checked on small arrays without Streamlit."""

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.views import figures as F
from explorer.views.figures import heatmap_layout

from .figure_checks import TOKENS, causal_scores, softmax, traces

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
