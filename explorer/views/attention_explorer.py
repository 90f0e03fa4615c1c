"""What the explorer shows, composed from one trace: figures with captions. No streamlit.

Every panel's numbers come from the module's own trace (``mha_core.attention.modules.Trace``); nothing is
recomputed here. Captions give the tensor's full shape and the line of Listing 3.5 that
produced it, so a student can match each picture to the code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.attention import book
from mha_core.attention.listing import init_line
from mha_core.attention.modules import Trace
from mha_core.runs.forward import ExplorerRun

from . import figures
from .explorer_reshapes import reshape_panels
from .figures.panel import Panel, caption, token_heads_panel


def _per_head_panel(
    trace: Trace,
    labels: list[str],
    step: str,
    title: str,
    *,
    b: int,
    kind: str,
    figure_title: str,
    note: str,
    presenter: bool,
    scale: tuple[float | None, float | None] = (None, None),
) -> Panel:
    """One (h, T, T) matrix of the trace at batch element ``b``, one heatmap per head (``scale``: zmin, zmax)."""
    values = trace.numpy(step)[b]  # (h, T, T)
    text = caption(trace, step, "(b, h, T, T)", note)
    return token_heads_panel(
        step,
        title,
        text,
        values,
        labels,
        figure_title=figure_title,
        kind=kind,
        presenter=presenter,
        zmin=scale[0],
        zmax=scale[1],
    )


def _shared_scales(trace: Trace, b: int, dropout_shown: bool) -> tuple[float, float]:
    """The largest |raw score| (masking only removes scores, so it bounds the masked ones too) and the top of the
    weights' scale over the weights and the dropped weights: neighbours the eye compares get one colour per number
    (raw scores were ±0.308 and masked scores ±0.263 at the book's settings)."""
    raw = trace.numpy("attn_scores")[b]  # (h, T, T)
    finite = np.abs(raw[np.isfinite(raw)])
    weights = [trace.numpy("attn_weights")[b]] + ([trace.numpy("attn_weights_dropped")[b]] if dropout_shown else [])
    return (float(finite.max()) if finite.size else 1.0), figures.weights_top(*weights)


def _shrunk_note(trace: Trace, b: int) -> str:
    """Said on scores and weights alike when they are drawn shrunk, since the two reduce a block differently."""
    h, t = trace.numpy("attn_weights")[b].shape[:2]
    if h * t * t <= figures.HOVER_EXACT_LIMIT:
        return ""
    return (
        " · shrunk to blocks: scores show each block's mean (both signs stay), weights its max (a weight one key"
        " takes whole stays visible), so a block's weight can be bright where its mean score is not"
    )


def _mask_buffer_panel(allowed_buffer: np.ndarray, presenter: bool) -> Panel:
    """The module's whole (context_length, context_length) buffer, drawn as may-attend (the run translated it)."""
    n = allowed_buffer.shape[0]
    return Panel(
        "mask_buffer",
        "The causal mask buffer (context_length × context_length)",
        f"`mask` buffer · shape (context_length, context_length) = ({n}, {n}) · Listing 3.5, line "
        f"{init_line('mask_buffer')[0]}: `torch.triu(torch.ones(context_length, context_length), "
        "diagonal=1)` · drawn as may-attend (the book stores 1 = blocked)",
        figures.heads_heatmap(
            allowed_buffer[None],
            None,
            None,
            title="mask buffer (may attend)",
            kind="mask",
            head_names=["buffer"],
            presenter=presenter,
            width_px=figures.half_figure_px(presenter),  # beside the slice used: 64 labels crowded at full
            row_title="query position",
            col_title="key position",
        ),
    )


def _mask_used_panel(trace: Trace, labels: list[str], presenter: bool) -> Panel:
    """The (T, T) slice of the buffer the forward used, drawn as may-attend."""
    return Panel(
        "mask",
        "The mask as used: the buffer sliced to the tokens",
        caption(
            trace,
            "mask",
            "(T, T)",
            "drawn as may attend, the inverse of the book's `mask_bool` (True = blocked, filled with −∞)",
        ),
        figures.heads_heatmap(
            trace.numpy("mask")[None],
            labels,
            labels,
            title="mask[:T, :T] (may attend)",
            kind="mask",
            head_names=["slice used"],
            presenter=presenter,
            width_px=figures.half_figure_px(presenter),  # half the page, beside the buffer
        ),
    )


def _attention_steps(where: str, scales: tuple[float, float], shrunk: str, dropout_shown: bool) -> list[tuple]:
    """(step, panel title, kind, figure title, caption note, colour scale) of each per-head matrix, in the forward's
    order; ``scales``: the largest |raw score| and the weights' top, shared by the neighbours that use them."""
    top_score, top_weight = scales
    same_weights = f"one colour scale with the {'other ' if dropout_shown else ''}weights (0 to {top_weight:.3g})"
    scores, weights = (-top_score, top_score), (None, top_weight)
    steps = [
        ("attn_scores", "Raw scores Q Kᵀ, per head", "scores", f"attn_scores = Q Kᵀ · {where}", shrunk, scores),
        (
            "masked_scores",
            "Masked scores: −∞ where a key is in the future",
            "scores",
            f"masked_scores · {where}",
            f" · one colour scale with the raw scores (±{top_score:.3g}){shrunk}",
            scores,
        ),
        (
            "attn_weights",
            "Attention weights: softmax of the scaled masked scores",
            "weights",
            f"attn_weights · {where}",
            " · each row sums to 1" + (f" · {same_weights}" if dropout_shown else "") + shrunk,
            weights,
        ),
    ]
    if dropout_shown:
        title, note = f"attn_weights after dropout · {where}", f" · survivors scaled by 1/(1−p) · {same_weights}"
        steps.append(("attn_weights_dropped", "Weights after dropout (train mode)", "weights", title, note, weights))
    return steps


def attention_panels(
    trace: Trace,
    labels: list[str],
    *,
    batch_index: int,
    presenter: bool,
    mask_allowed: np.ndarray | None,
    dropout_shown: bool,
) -> list[Panel]:
    """Per-head matrices, side by side on one colour scale per kind: scores, masks, weights. Raw and masked scores
    share one scale, as do the weights before and after dropout, and the captions say so."""
    b = batch_index
    where = f"batch element {b}"
    steps = _attention_steps(where, _shared_scales(trace, b, dropout_shown), _shrunk_note(trace, b), dropout_shown)
    panels = [
        _per_head_panel(
            trace,
            labels,
            step,
            title,
            b=b,
            kind=kind,
            figure_title=fig_title,
            note=where + note,
            presenter=presenter,
            scale=scale,
        )
        for step, title, kind, fig_title, note, scale in steps
    ]
    masks_shown = [_mask_used_panel(trace, labels, presenter)]
    if mask_allowed is not None:
        masks_shown.insert(0, _mask_buffer_panel(mask_allowed, presenter))
    return panels[:1] + masks_shown + panels[1:]


def enlarged_head_panel(trace: Trace, labels: list[str], *, batch_index: int, head: int, presenter: bool) -> Panel:
    every_head = trace.numpy("attn_weights")[batch_index]  # (h, T, T)
    weights = every_head[head : head + 1]  # (1, T, T)
    top = figures.weights_top(every_head)  # the heads' panels' scale: the enlarged head keeps its colours
    return Panel(
        "enlarged_head",
        f"Head {head}, enlarged",
        caption(
            trace,
            "attn_weights",
            "(b, h, T, T)",
            f"batch element {batch_index}, head {head} · the heads' colour scale (0 to {top:.3g})",
        ),
        figures.heads_heatmap(
            weights,
            labels,
            labels,
            title=f"attn_weights · head {head}",
            kind="weights",
            head_names=[f"head {head}"],
            zmax=top,
            presenter=presenter,
        ),
    )


def output_panel(trace: Trace, labels: list[str], *, batch_index: int, presenter: bool) -> Panel:
    """The final output as a heatmap: what "Final output" shows once it is too large to print as numbers."""
    output = trace.numpy("output")[batch_index]  # (T, d_out)
    return Panel(
        "final_output",
        "As a heatmap: too many numbers to print",
        caption(trace, "output", "(b, T, d_out)", f"batch element {batch_index} · too large to print: hover a cell"),
        figures.matrix_heatmap(
            output,
            labels,
            [str(c) for c in range(output.shape[1])],
            title=f"output · batch {batch_index}",
            presenter=presenter,
        ),
    )


BOOK_ROWS = (  # the book's printed output, first and last row, as the page quotes it
    f"[{book.PRINTED_OUTPUT[0][0]:.4f}, {book.PRINTED_OUTPUT[0][1]:.4f}] … "
    f"[{book.PRINTED_OUTPUT[-1][0]:.4f}, {book.PRINTED_OUTPUT[-1][1]:.4f}]"
)
SECTIONS = {  # the explorer's sections: only the open one is drawn and sent
    "attention": "Attention, head by head",
    "reshapes": "Reshapes and output",
    "downloads": "Downloads",
    "positions": "Positions",  # the position knob's views (explorer_positions); the module stays Listing 3.5
}


@dataclass(frozen=True)
class ExplorerView:
    """What the explorer page draws on one rerun: the open section's panels and the printed output."""

    labels: list[str]
    panels: list[Panel]  # the open section's
    enlarged: Panel | None
    output: np.ndarray | None  # (T, d_out) of the chosen batch element, when small enough to print
    output_panel: Panel | None  # the output as a heatmap, when too large to print (output is then None)
    output_text: str  # the output as torch prints it (4 decimals, as in the book)
    matches_book: bool  # the output prints exactly as Listing 3.5's printed output

    def figures(self) -> list[Panel]:
        return self.panels + ([self.enlarged] if self.enlarged else [])


PRINT_LIMIT = 64 * 16  # T × d_out cells shown as numbers


def build_view(
    run: ExplorerRun, *, section: str, batch_index: int, enlarge: int | None, presenter: bool
) -> ExplorerView:
    """Compose the open section's panels (and the enlarged head) from one run; nothing is recomputed."""
    if section not in SECTIONS:
        raise ValueError(f"section must be one of {', '.join(SECTIONS)}, got {section!r}")
    trace, labels = run.trace, run.labels
    if section == "attention":
        shown = attention_panels(
            trace,
            labels,
            batch_index=batch_index,
            presenter=presenter,
            mask_allowed=run.mask_allowed,
            dropout_shown=run.dropout_shown,
        )
    elif section == "reshapes":
        shown = reshape_panels(
            trace, labels, batch_index=batch_index, presenter=presenter, out_proj_weight=run.out_proj_weight
        )
    else:
        shown = []
    enlarged = None
    if enlarge is not None:
        enlarged = enlarged_head_panel(trace, labels, batch_index=batch_index, head=enlarge, presenter=presenter)
    output = trace.numpy("output")[batch_index]  # (T, d_out)
    printed = output.size <= PRINT_LIMIT
    return ExplorerView(
        labels=labels,
        panels=shown,
        enlarged=enlarged,
        output=output.copy() if printed else None,
        output_panel=None if printed else output_panel(trace, labels, batch_index=batch_index, presenter=presenter),
        output_text=str(trace.output[batch_index].detach().cpu()),
        matches_book=book.matches_printed_output(trace.output[batch_index].float().cpu()),
    )
