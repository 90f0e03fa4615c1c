"""figures.describe and figures.as_table: every chart's text alternative for a screen reader (WCAG 2.1, 1.1.1) says
what it shows, its shape and where its largest value is, and its table holds the numbers drawn, read from the
figure's own arrays."""

import numpy as np

from explorer.views import attention_explorer
from explorer.views import figures as F
from explorer.views.figures.describe import MOST_TABLE_CELLS

from .figure_checks import TOKENS, causal_scores


def test_a_heads_heatmap_is_described_by_its_shape_range_and_largest_cell(rng):
    scores = causal_scores(rng, 2, 6)  # (2, 6, 6), −∞ above the diagonal
    fig = F.heads_heatmap(scores, TOKENS, TOKENS, title="Masked scores", kind="scores", head_names=["head 0", "head 1"])
    text = F.describe(fig)
    finite = np.where(np.isfinite(scores), scores, -np.inf)
    h, i, j = np.unravel_index(np.argmax(finite), scores.shape)
    assert text.startswith("Masked scores. Heatmap: 2 panels (head 0, head 1), each of 6 rows (query) by 6 columns")
    assert f"the largest is at row {TOKENS[i]}, column {TOKENS[j]} of head {h}." in text
    assert f"to {scores[h, i, j]:.3g};" in text and f"from {np.min(scores[np.isfinite(scores)]):.3g}" in text
    assert f"{int(np.isneginf(scores).sum())} cells are masked" in text


def test_a_heatmaps_table_holds_every_value_and_names_the_masked_cells(rng):
    scores = causal_scores(rng, 2, 6)
    fig = F.heads_heatmap(scores, TOKENS, TOKENS, title="Masked scores", kind="scores", head_names=["head 0", "head 1"])
    table, note = F.as_table(fig)
    assert note == "" and table.shape == (12, 2 + 6)
    assert list(table.columns[:2]) == ["panel", "query"]
    for h in range(2):
        rows = table[table["panel"] == f"head {h}"]
        assert list(rows["query"]) == TOKENS
        for i in range(6):
            for j in range(6):
                cell = rows.iloc[i, 2 + j]
                expected = "masked (−∞)" if np.isneginf(scores[h, i, j]) else f"{scores[h, i, j]:.4g}"
                assert cell == expected, (h, i, j, cell)


def test_a_large_heatmap_says_it_is_drawn_in_blocks_and_its_table_is_cut(rng):
    big = rng.normal(size=(2, 600, 600)).astype(np.float32)
    names = [str(k) for k in range(600)]
    fig = F.heads_heatmap(big, names, names, title="Big", kind="weights", head_names=["head 0", "head 1"])
    assert "each drawn cell stands for a block of values" in F.describe(fig)
    table, note = F.as_table(fig)
    assert table.size <= MOST_TABLE_CELLS + 2 * len(table) and note.startswith("The first ")


def test_a_mask_is_described_by_its_two_kinds_of_cell():
    mask = np.tril(np.ones((5, 5)))[None]
    fig = F.heads_heatmap(mask, TOKENS[:5], TOKENS[:5], title="Causal mask", kind="mask", head_names=["mask"])
    assert F.describe(fig).endswith('10 cells are "blocked", 15 are "may attend".')


def test_line_and_bar_charts_name_each_series_and_where_it_peaks():
    fig = F.line_chart([1, 2, 3, 4], {"loss": [2.0, 3.5, 1.0, 0.5]}, title="Loss", x_title="step", y_title="loss")
    assert F.describe(fig) == (
        "Loss. Line chart of loss against step: 1 series. loss: 4 points from 0.5 to 3.5, largest at step 2."
    )
    table, _ = F.as_table(fig)
    assert table.to_dict("list") == {"step": ["1", "2", "3", "4"], "loss": ["2", "3.5", "1", "0.5"]}
    bars = F.bar_chart(["head 0", "head 1", "head 2"], [0.2, 0.9, 0.4], title="Scores", y_title="score")
    assert "3 points from 0.2 to 0.9, largest at x head 1." in F.describe(bars)


def test_every_explorer_figure_has_a_description_and_a_table(run32):
    """Each figure of both sections at 4 heads × 32 tokens: named, its shape and largest value said, and numbers."""
    for section in ("attention", "reshapes"):
        view = attention_explorer.build_view(run32, section=section, batch_index=0, enlarge=1, presenter=False)
        for panel in [*view.panels, view.enlarged]:
            text = F.describe(panel.figure, title=panel.title)
            assert text.startswith(panel.title.rstrip(".")) and len(text.split()) >= 8, (panel.key, text)
            table, _ = F.as_table(panel.figure)
            if "Heatmap" in text:
                assert "the largest is at" in text or "cells are" in text, (panel.key, text)
                assert not table.empty, panel.key
