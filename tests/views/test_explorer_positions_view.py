"""The Explorer's Positions view on small runs, without Streamlit: every panel, caption and sentence of each kind."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.views.explorer_positions import build_positions_view, rope_rotation_panel, shuffle_sentence
from mha_core.attention.modules import MultiHeadAttention
from mha_core.attention.positions import POSITION_KINDS, rope_distance_scores
from mha_core.runs.token_order import run_positions

LABELS = ["the", "dog", "bit", "the", "man", "*x*"]


def small_run(kind: str, shuffle: int = 0, head_dim: int = 4):
    torch.manual_seed(3)
    module = MultiHeadAttention(5, 2 * head_dim, 6, 0.0, 2).eval()
    return run_positions(module, torch.rand(2, 6, 5), LABELS, kind=kind, rope_base=100, seed=3, shuffle=shuffle)


def values(figure) -> list[np.ndarray]:
    return [np.asarray(t.z) for t in figure.data if t.meta and t.meta.get("role") == "values"]


@pytest.mark.parametrize("kind", POSITION_KINDS)
@pytest.mark.parametrize("presenter", [False, True])
def test_every_kind_draws_its_pairs_with_every_token_row_zero_on_top_and_shapes_in_the_captions(kind, presenter):
    run = small_run(kind, shuffle=4)
    view = build_positions_view(run, kind=kind, head_dim=4, rope_base=100, presenter=presenter)
    assert len(view.pairs) == {"none": 0, "rope": 4}.get(kind, 2)
    for without, with_ in view.pairs:
        assert without.key.endswith(("_without", "_plain")) and with_.key.endswith(("_with", "_rotated"))
    score_panels = [p for pair in view.pairs for p in pair if p.key.startswith("positions_logits")]
    for panel in score_panels or view.panels[:1]:
        assert "shape (h, T, T) = (2, 6, 6)" in panel.caption
        figure = panel.figure
        assert figure.layout.yaxis.autorange == "reversed"  # row 0 (the first token) at the top
        assert list(figure.layout.yaxis.ticktext) == list(figure.layout.xaxis.ticktext)
        assert len(figure.layout.xaxis.ticktext) == 6  # every token on the axes
    if kind not in ("none",):
        without, with_ = view.pairs[0]
        np.testing.assert_allclose(values(without.figure)[0], run.without["logits"][0], atol=1e-6)
        np.testing.assert_allclose(values(with_.figure)[0], run.with_positions["logits"][0], atol=1e-6)
    keys = {p.key for p in view.panels}
    assert ("positions_alibi_bias" in keys) == (kind == "alibi")
    assert ({"rope_distance", "rope_rotation"} <= keys) == (kind == "rope")


def test_the_shuffle_sentence_escapes_the_tokens_and_says_merely_permuted_or_changed():
    plain = shuffle_sentence(small_run("none", shuffle=4))
    assert "\\*x\\*" in plain and "merely permuted" in plain and "Choose a kind" in plain
    assert "own order" in shuffle_sentence(small_run("rope", shuffle=0))
    assert "they changed: by up to" in shuffle_sentence(small_run("rope", shuffle=4))


def test_ropes_distance_figure_is_the_all_ones_score_and_its_rotation_figure_slows_pair_by_pair():
    view = build_positions_view(small_run("rope"), kind="rope", head_dim=4, rope_base=100, presenter=False)
    distance = next(p for p in view.panels if p.key == "rope_distance")
    np.testing.assert_allclose(distance.figure.data[0].y, rope_distance_scores(4, 100, 64).numpy())
    rotation = rope_rotation_panel(64, 10_000, presenter=False)
    (turns,) = values(rotation.figure)  # (pairs, positions): a row per pair
    assert turns.shape == (32, 64)
    assert turns[0, 1] == pytest.approx(np.cos(1.0))  # pair 0: a radian a position
    assert abs(np.diff(turns[0])).mean() > 10 * abs(np.diff(turns[31])).mean()  # low pairs fast, high slow
    assert list(rotation.figure.layout.yaxis.ticktext)[:2] == ["0", "1"]
    assert "pair 31 by 0.000133" in rotation.caption and "= (32, 64)" in rotation.caption


def test_a_refused_rope_still_draws_its_teaching_figures_at_head_dim_16():
    view = build_positions_view(None, kind="rope", head_dim=1, rope_base=10_000, presenter=False, refused="odd")
    assert view.pairs == [] and view.sentences[-1] == "odd" and view.shuffle_sentence == ""
    assert [p.key for p in view.panels] == ["rope_distance", "rope_rotation"]
    assert "head_dim 16" in view.panels[0].caption


def test_a_long_input_is_cut_to_its_first_64_tokens_and_says_so():
    torch.manual_seed(0)
    module = MultiHeadAttention(5, 8, 80, 0.0, 2).eval()
    run = run_positions(module, torch.rand(1, 80, 5), [f"t{k}" for k in range(80)], kind="alibi", rope_base=100,
                        seed=0, shuffle=1)  # fmt: skip
    assert run.total_tokens == 80 and len(run.labels) == 64 and run.without["weights"].shape == (2, 64, 64)
    view = build_positions_view(run, kind="alibi", head_dim=4, rope_base=100, presenter=False)
    assert "the first 64 of the input's 80 tokens" in " ".join(view.sentences)
