"""The circuits view: one head as W_QK (where it reads) and W_OV (what it writes), and the output as their sum.

Drawn from ``mha_core.attention.circuits.HeadReport`` (computed in the glue from the module's weights and a trace): no
model runs here, and the figures are built once per report. Elhage et al. 2021, "A Mathematical Framework for
Transformer Circuits". No streamlit.

Axis letters: b batch, h heads, i query position, j key position, e d_in, o d_out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.attention.circuits import HeadReport
from mha_core.attention.listing import LISTING_LINES

from . import figures
from .figures.panel import Panel, index_labels, shape_text, to_numpy
from .follow_a_token import contributions_figure
from .markdown_text import escape_markdown

INTRO = (
    "Each head is two matrices on the input's d_in features. **W_QK** = W_Qʰᵀ W_Kʰ (d_in × d_in) says where it "
    "reads: the score of query x_i and key x_j is x_i W_QK x_jᵀ, the traced `attn_scores` entry. **W_OV** = W_outʰ "
    "W_Vʰ (d_out × d_in: the head's block of out_proj's columns times its value projection) says what it writes: "
    "head h adds Aʰ X W_OVʰᵀ to the output. So output = Σ_h Aʰ X W_OVʰᵀ + b: heads are independent, and they add."
)
_SCALE_LINE = next(n for n, text in enumerate(LISTING_LINES, 1) if "**0.5" in text)  # the division's own line
SCALE_NOTE = (
    f"The 1/√head_dim is not inside W_QK: Listing 3.5 divides the scores afterwards (line {_SCALE_LINE}, "
    f"`{LISTING_LINES[_SCALE_LINE - 1].strip().split('**0.5')[0]}**0.5`). Folding it in gives W_QK / √head_dim, "
    "whose form is what the softmax receives."
)
RANK_NOTE = (
    "W_QK is d_in × d_in but passes through only head_dim numbers (x W_Qᵀ, then · W_K xᵀ), so its rank is at most "
    "head_dim: at head_dim = 1 it is an outer product, and every query ranks the keys in the same order or the "
    "reverse."
)


BIAS_TERMS = " (+ the bias terms: qkv_bias is on, so each form is affine)"


@dataclass(frozen=True)
class CircuitsView:
    head: int
    token: int
    rank: int
    head_dim: int
    scores_diff: float  # max |x W_QK xᵀ − attn_scores|, this head, every position
    output_diff: float  # max |Σ_h Aʰ X W_OVʰᵀ + b − output|, every position
    sum_error: float  # the same, at the drawn token only
    panels: tuple[Panel, ...]  # W_QK, W_OV, the scores both ways, the sum at one token


def _matrix_panel(key: str, title: str, text: str, matrix: np.ndarray, rows: str, cols: str, presenter: bool) -> Panel:
    return Panel(
        key,
        title,
        text,
        figures.matrix_heatmap(
            matrix,
            index_labels(matrix.shape[0]),
            index_labels(matrix.shape[1]),
            title=title.split(" (")[0],  # "W_QK of head 0": the rank stays in the panel's heading (a half column)
            presenter=presenter,
            row_title=rows,
            col_title=cols,
            width_px=figures.half_figure_px(presenter),  # two to a row
        ),
    )


def _scores_panel(report: HeadReport, traced: np.ndarray, labels: list[str], b: int, presenter: bool) -> Panel:
    """x W_QK xᵀ beside the traced attn_scores of the same head: the same matrix by two routes."""
    ours = to_numpy(report.scores[b])  # (i, j)
    diff = float(np.abs(ours.astype(np.float64) - traced).max()) if ours.size else 0.0
    return Panel(
        "circuit_scores",
        f"Head {report.head}'s scores from W_QK, beside the traced ones",
        f"x W_QK xᵀ{BIAS_TERMS if report.biased else ''} and `attn_scores[{b}, {report.head}]` · shape (i, j) = "
        f"{shape_text(ours.shape)} · before ÷ √head_dim and before the mask · max |difference| = {diff:.1e} (float "
        "rounding: two matmul routes)",
        figures.heads_heatmap(
            np.stack([ours, traced.astype(ours.dtype)]),
            labels,
            labels,
            title=f"head {report.head} · batch element {b}",
            kind="scores",
            head_names=["x W_QK xᵀ", "attn_scores (traced)"],
            presenter=presenter,
        ),
    )


def build_circuits_view(
    report: HeadReport, traced_scores: np.ndarray, labels: list[str], *, batch_index: int, token: int, presenter: bool
) -> CircuitsView:
    """The head's W_QK and W_OV, its scores both ways, and the output row at ``token`` as a sum over heads.

    traced_scores (i, j): the trace's attn_scores of this head at ``batch_index``, to draw beside x W_QK xᵀ.
    """
    w_qk, w_ov = to_numpy(report.w_qk), to_numpy(report.w_ov)  # (e, e), (o, e)
    k, d = report.head, report.head_dim
    shares = to_numpy(report.shares).astype(np.float64)  # (h, o)
    bias, output = to_numpy(report.out_bias).astype(np.float64), to_numpy(report.output)  # (o,), (o,)
    sum_error = float(np.abs(shares.sum(0) + bias - output).max()) if output.size else 0.0
    label = labels[token]
    panels = (
        _matrix_panel(
            "circuit_w_qk",
            f"W_QK of head {k} (rank {report.rank} ≤ head_dim = {d})",
            f"W_Qʰᵀ W_Kʰ · shape (d_in, d_in) = {shape_text(w_qk.shape)} · rows: the query's input features, "
            "columns: the key's · score(i, j) = x_i W_QK x_jᵀ",
            w_qk,
            "query feature",
            "key feature",
            presenter,
        ),
        _matrix_panel(
            "circuit_w_ov",
            f"W_OV of head {k}",
            f"W_outʰ W_Vʰ · shape (d_out, d_in) = {shape_text(w_ov.shape)} · rows: output features, columns: the "
            "read token's input features · the head writes Aʰ X W_OVᵀ",
            w_ov,
            "output feature",
            "input feature",
            presenter,
        ),
        _scores_panel(report, traced_scores, labels, batch_index, presenter),
        Panel(
            "circuit_sum",
            f"output[{batch_index}, {token}] ({escape_markdown(label)}) = Σ_h Aʰ X W_OVʰᵀ + b",
            f"each head's Aʰ X W_OVʰᵀ at this token, the bias, and `output[{batch_index}, {token}]` from the trace "
            f"· their sum differs from it by {sum_error:.1e} · the same bars as Follow a token's “out_proj, head by "
            "head” (out_proj.weight[:, block h] @ context_h is Aʰ X W_OVʰᵀ)",
            contributions_figure(shares, bias, output, presenter=presenter),
        ),
    )
    return CircuitsView(k, token, report.rank, d, report.check.scores_diff, report.check.output_diff, sum_error, panels)
