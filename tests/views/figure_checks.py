"""What the figure tests share: text widths in em, a figure's plot height and panel sizes, Explorer runs, every
attention-weights heatmap the pages draw (test_figure_rules.py, test_figure_styles.py), and small causal scores and
their traces (test_figures.py, test_figure_builders.py)."""

from __future__ import annotations

import numpy as np

from explorer.glue.state.settings import Settings
from explorer.views import attention_explorer, heads_and_references, knobs_that_teach, step_through, step_through_steps
from explorer.views import figures as F
from mha_core.runs import forward as runs

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


TOKENS = ["the", "cat", "sat", "on", "the", "mat"]  # "the" twice: duplicates must survive


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
