"""What the "Trained heads" page shows, composed from one TrainResult: figures with captions. No streamlit.

The weights drawn are the real ``MultiHeadAttention`` modules' own ``attn_weights``, traced on a
held-out example (``TrainResult.inspect``); the number per head is ``Task.pattern_score``, the mean
weight the head puts on the key position the task says each query should attend to.

Axis letters: h heads, T tokens (query rows, key columns), L layers.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_core.toy.tiny_training import HELDOUT_SIZE, Inspection, TrainResult

from . import figures
from .figures.panel import Panel, rows_and_columns, shape_text

ACCURACY_HELP = f"Scored positions of {HELDOUT_SIZE} sequences never trained on."

# What each task's head score measures, completing "mean weight on ...".
SCORE_NAMES = {
    "previous_token": "the previous token",
    "first_token": "the first token",
    "key_value_lookup": "the pair with the asked key",
    "induction": "the token after the earlier copy",
}
EXPECTED_COLOR = "#e8590c"  # orange: on none of the viridis scale of attention weights
LAYER_NOTES = {
    ("induction", 0): (
        "Layer 0 is not scored on its own pattern: in induction it usually learns to look at the previous "
        "token, so that layer 1 can find the token that followed the earlier copy."
    ),
}


@dataclass(frozen=True)
class TrainedView:
    """Everything the page draws for one result."""

    heads: list[Panel]  # one per layer: (h, T, T) weights, one heatmap per head
    scores: Panel  # bar chart of held-out head scores, (L · h) bars
    curves: list[Panel]  # training loss and accuracy
    table: pd.DataFrame = field(repr=False)  # (5, T): token, expected key, target, prediction, correct
    example_correct: int  # scored positions predicted right in the example
    example_scored: int


def score_name(task: str) -> str:
    return f"mean weight on {SCORE_NAMES.get(task, 'the expected key')}"


def marked_layers(result: TrainResult) -> list[int]:
    """Layers whose heads should show the task's pattern: every layer, or only the last for a composed task."""
    layers = result.config.num_layers
    return list(range(layers)) if result.task.defaults.num_layers == 1 else [layers - 1]


def best_marked_head(result: TrainResult) -> tuple[int, int, float]:
    """(layer, head, score) of the best head among the layers that should show the pattern."""
    layers = marked_layers(result)
    scores = result.head_scores[layers]  # (len(layers), h)
    row, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return layers[int(row)], int(head), float(scores[row, head])


def curve_figures(steps, loss, accuracy, *, total: int, presenter: bool = False) -> tuple[go.Figure, go.Figure]:
    """Training-batch loss and accuracy against the step, x fixed to [0, total] so a live chart does not jump."""
    loss_fig = figures.line_chart(
        steps,
        {"loss": loss},
        title="Training loss (cross-entropy, training batch)",
        x_title="step",
        y_title="loss",
        presenter=presenter,
    )
    accuracy_fig = figures.line_chart(
        steps,
        {"accuracy": accuracy},
        title="Training accuracy (training batch)",
        x_title="step",
        y_title="accuracy",
        presenter=presenter,
    )
    for fig in (loss_fig, accuracy_fig):
        fig.update_xaxes(range=[0, total * 1.02])
        fig.update_layout(showlegend=False)
    accuracy_fig.update_yaxes(range=[0, 1.05])
    loss_fig.update_yaxes(rangemode="tozero")
    return loss_fig, accuracy_fig


def _mark_expected_keys(fig: go.Figure, inspection: Inspection) -> None:
    """An open square on the key each scored query should attend to, in every head's panel."""
    rows = np.flatnonzero(inspection.scored)  # scored query positions t
    cols = inspection.attend_to[rows]  # their expected keys s
    labels = inspection.labels
    hover = [f"query {t} “{labels[t]}” should attend to key {s} “{labels[s]}”" for t, s in zip(rows, cols, strict=True)]
    panels = [trace for trace in fig.data if isinstance(trace.meta, dict) and trace.meta.get("role") == "values"]
    for k, panel in enumerate(panels):
        fig.add_trace(
            go.Scatter(
                x=cols.tolist(),
                y=rows.tolist(),
                mode="markers",
                name="expected key",
                legendgroup="expected",
                showlegend=k == 0,
                xaxis=panel.xaxis,
                yaxis=panel.yaxis,
                marker={"symbol": "square-open", "size": 15, "color": EXPECTED_COLOR, "line": {"width": 3}},
                text=[html.escape(line) for line in hover],
                hovertemplate="%{text}<extra></extra>",
                meta={"role": "expected", "head": panel.meta["head"]},
            )
        )


def head_panels(result: TrainResult, inspection: Inspection, *, presenter: bool = False) -> list[Panel]:
    """Per layer, each head's attention weights on the example; the held-out score in each head's title."""
    # position and token: a task's tokens repeat (ids such as 3 … 3), and position is what the expected keys name
    labels = [f"{t}:{label}" for t, label in enumerate(inspection.labels)]
    what = score_name(result.config.task)
    marked = marked_layers(result)
    panels = []
    for layer, weights in enumerate(inspection.weights):  # weights: (h, T, T)
        scores = result.head_scores[layer]  # (h,)
        names = [f"head {k} · {score:.2f}" if layer in marked else f"head {k}" for k, score in enumerate(scores)]
        fig = figures.heads_heatmap(
            weights,
            labels,
            labels,
            title=f"Layer {layer}: attention weights, head by head",
            kind="weights",
            head_names=names,
            presenter=presenter,
        )
        caption = (
            f"`attn_weights` of layer {layer} · shape (h, T, T) = {shape_text(weights.shape)} · "
            f"{rows_and_columns('(h, T, T)')} · one held-out sequence · each row sums to 1"
        )
        if layer in marked:
            _mark_expected_keys(fig, inspection)
            caption += (
                f" · the number after each head is its {what}, over {HELDOUT_SIZE} held-out sequences · "
                "orange squares: the key each scored query should attend to"
            )
        note = LAYER_NOTES.get((result.config.task, layer))
        if note and result.config.num_layers > 1:
            caption += f" · {note}"
        panels.append(Panel(f"trained_layer{layer}", f"Layer {layer}: what each head attends to", caption, fig))
    return panels


def score_panel(result: TrainResult, *, presenter: bool = False) -> Panel:
    """One bar per (layer, head): its held-out pattern score, coloured by layer."""
    layers, heads = result.head_scores.shape
    names = [f"L{layer} h{head}" if layers > 1 else f"head {head}" for layer in range(layers) for head in range(heads)]
    colors = [figures.head_colors(layers)[layer] for layer in range(layers) for _ in range(heads)]
    what = score_name(result.config.task)
    fig = figures.bar_chart(
        names,
        result.head_scores.reshape(-1).tolist(),
        title=f"Head scores: {what}",
        y_title="score",
        colors=colors,
        presenter=presenter,
    )
    fig.update_yaxes(range=[0, 1.1])
    caption = (
        f"`head_scores` · shape (L, h) = {shape_text(result.head_scores.shape)} · for each head, the "
        f"{what} (the key the task needs), averaged over the scored queries of {HELDOUT_SIZE} "
        f"held-out sequences · 1 = all weight on it; uniform attention over t + 1 keys gives 1/(t + 1)"
    )
    return Panel("trained_scores", "Which heads learned the pattern", caption, fig)


def example_table(result: TrainResult, inspection: Inspection) -> pd.DataFrame:
    """The example as a strip, one column per position: token, expected key, target, prediction (token labels).

    Rows: token, expected key (its position), target, prediction, correct. Unscored positions are blank
    below the token: the task asks nothing there.
    """
    label = result.task.label
    vocab = result.config.vocab_size
    rows: dict[str, list[str]] = {name: [] for name in ("token", "expected key", "target", "prediction", "correct")}
    for t, token in enumerate(inspection.labels):
        scored = bool(inspection.scored[t])
        right = inspection.predictions[t] == inspection.targets[t]
        rows["token"].append(token)
        rows["expected key"].append(str(int(inspection.attend_to[t])) if scored else "")
        rows["target"].append(label(int(inspection.targets[t]), vocab) if scored else "")
        rows["prediction"].append(label(int(inspection.predictions[t]), vocab) if scored else "")
        rows["correct"].append(("✓" if right else "✗") if scored else "")
    table = pd.DataFrame.from_dict(rows, orient="index", columns=[str(t) for t in range(len(inspection.labels))])
    return table.rename_axis(index="position")  # the corner cell names the columns: a header a screen reader reads


def build_trained_view(
    result: TrainResult, inspection: Inspection | None = None, *, presenter: bool = False
) -> TrainedView:
    """Compose every panel from one inspection of the trained model on its held-out example (made here if not given)."""
    inspection = result.inspect() if inspection is None else inspection
    history = result.history
    loss_fig, accuracy_fig = curve_figures(
        history.steps, history.loss, history.accuracy, total=result.config.steps, presenter=presenter
    )
    steps_note = f"{result.steps_run} of {result.config.steps} steps, batch {result.config.batch_size}"
    curves = [
        Panel("trained_loss", "Loss", f"`loss` on each training batch · {steps_note}", loss_fig),
        Panel(
            "trained_accuracy",
            "Accuracy",
            f"accuracy on the scored positions of each training batch · {steps_note}",
            accuracy_fig,
        ),
    ]
    scored = inspection.scored
    correct = int((inspection.predictions[scored] == inspection.targets[scored]).sum())
    return TrainedView(
        heads=head_panels(result, inspection, presenter=presenter),
        scores=score_panel(result, presenter=presenter),
        curves=curves,
        table=example_table(result, inspection),
        example_correct=correct,
        example_scored=int(scored.sum()),
    )
