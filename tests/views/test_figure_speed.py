"""Issue 20: what makes plotly.js draw a figure more than once, or measure the page again and again, stays out.

* ``ticklabeloverflow`` "allow" on every axis and colour bar: plotly.js's default on a numeric axis ("hide past div")
  measures every tick label's box once for each label placed, n² forced layouts of the whole page;
* no ``autosize``: the app gives every figure its width (the page's column) and its height (from its content), so
  plotly.js never sizes a figure from its container and then again from the given size.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from explorer.glue.state.settings import Settings
from explorer.views import attention_explorer, heads_and_references
from explorer.views import figures as F
from explorer.views.figures import style
from mha_core.runs import forward as runs


def run_at(**settings) -> runs.ExplorerRun:
    s = Settings(**settings)
    module = runs.build_module(s.module_spec())
    x, labels = runs.build_input(s.input_spec())
    return runs.run_explorer(module, x, labels, train=s.train, seed=s.seed, dropout=s.dropout)


def axes_of(layout: dict) -> list[tuple[str, dict]]:
    """Every axis of a figure's layout and its colour bar (the ones plotly.js draws tick labels on), by name."""
    found = [(key, value) for key, value in layout.items() if re.fullmatch(r"[xy]axis[0-9]*", key)]
    colorbar = layout.get("coloraxis", {}).get("colorbar")
    return found + ([("coloraxis.colorbar", colorbar)] if colorbar is not None else [])


def every_figure(run, presenter: bool):
    for section in ("attention", "reshapes"):
        view = attention_explorer.build_view(run, section=section, batch_index=0, enlarge=0, presenter=presenter)
        yield from (panel.figure for panel in view.figures())
    module = runs.build_module(Settings(num_heads=4, d_in=16, d_out=16, context_length=32).module_spec())
    heads = runs.run_heads(module, run.trace.steps["x"][:1])
    yield from (
        p.figure
        for p in heads_and_references.build_heads_view(heads, run.labels, batch_index=0, presenter=presenter).panels
    )
    yield F.line_chart([1, 2], {"a": [1, 2]}, title="l", x_title="x", y_title="y")
    yield F.bar_chart(["a"], [1.0], title="b", y_title="y")


@pytest.mark.parametrize("presenter", [False, True])
def test_no_figure_makes_plotly_measure_its_tick_labels_or_size_itself_twice(presenter):
    run = run_at(num_heads=4, d_in=16, d_out=16, num_tokens=12, context_length=32, input="random")
    figures = list(every_figure(run, presenter))
    assert len(figures) > 8
    for fig in figures:
        layout = fig.to_plotly_json()["layout"]
        title = layout["title"]["text"]
        assert layout.get("autosize") is not True, title
        axes = axes_of(layout)
        assert axes, title
        for name, axis in axes:
            assert axis.get("ticklabeloverflow") == style.NO_OVERFLOW_CHECK == "allow", (title, name)


def test_the_axis_finder_sees_every_axis_and_the_colour_bar():
    layout = {"xaxis": {}, "yaxis3": {}, "xaxis12": {}, "coloraxis": {"colorbar": {"a": 1}}, "xaxisfoo": {}}
    assert [name for name, _ in axes_of(layout)] == ["xaxis", "yaxis3", "xaxis12", "coloraxis.colorbar"]


@pytest.mark.parametrize(("shape", "fi", "fj"), [((2, 37, 53), 4, 5), ((1, 64, 64), 4, 4), ((3, 10, 7), 3, 1)])
def test_block_reduction_in_two_passes_is_numpys_block_reduction(shape, fi, fj):
    """downsample._over_blocks (rows, then strided columns) against numpy's one-call reduction over both axes:
    the block max exactly, the block sum within float64 rounding, the count of usable cells exactly."""
    from explorer.views.figures import downsample

    z = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    z[:, ::3, 1::4] = -np.inf
    z[0, 0, 0] = np.nan
    padded = np.pad(z, ((0, 0), (0, -shape[1] % fi), (0, -shape[2] % fj)), constant_values=-np.inf)
    blocks = padded.reshape(shape[0], padded.shape[1] // fi, fi, padded.shape[2] // fj, fj)
    assert np.array_equal(downsample._over_blocks(blocks, np.maximum), blocks.max(axis=(2, 4)), equal_nan=True)
    finite = np.where(np.isfinite(blocks), blocks, 0.0)
    total = downsample._over_blocks(finite, np.add, np.float64)
    assert total.dtype == np.float64 and np.allclose(total, finite.sum(axis=(2, 4), dtype=np.float64), rtol=1e-12)
    usable = np.isfinite(blocks)
    assert np.array_equal(downsample._over_blocks(usable, np.add, np.int64), usable.sum(axis=(2, 4)))
    shown = downsample.block_reduce(z, fi, fj, "max")
    assert np.isnan(shown[0, 0, 0]) and shown.shape == blocks.shape[:2] + blocks.shape[3:4]
