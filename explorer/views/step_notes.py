"""Step through's notes that depend on the numbers: why the book's scores look flat (rank ≤ head_dim), and why the
softmax step divides by √head_dim (a chart at initialisation). Pure: a trace or a ``ScaleDemo`` in, text and
panels out. No streamlit.

Axis letters: b batch, h heads, i query position, j key position, d head_dim.
"""

from __future__ import annotations

import torch

from mha_core.attention.modules import Trace
from mha_core.runs.teaching import ScaleDemo

from . import figures
from .figures.panel import Panel

PREVIOUS_TOKEN_LINK = (
    "One click to a trained previous-token head (it trains the first time: about 12 s on one CPU core):"
)


def _rank(matrix: torch.Tensor) -> int:
    """The rank of one (T, T) score matrix, singular values below its own dtype's rounding counted as zero."""
    rtol = 10 * max(matrix.shape) * torch.finfo(matrix.dtype).eps
    return int(torch.linalg.matrix_rank(matrix.double(), rtol=rtol))


def _same_sign_note(trace: Trace, labels: list[str], b: int, k: int) -> str:
    """At head_dim 1, a head whose queries share one sign ranks the keys the same way from every row."""
    queries = trace.steps["queries_heads"][b, k, :, 0]  # (T,)
    if not ((queries < 0).all() or (queries > 0).all()):
        return ""
    sign = "negative" if queries[0] < 0 else "positive"
    weights = trace.steps["attn_weights"][b, k, 1:]  # (T − 1, T): the rows that see two keys or more
    top = sorted({int(j) for j in weights.argmax(-1)})
    which = (
        f"the top key is {labels[top[0]]!r} in every row that sees it"
        if len(top) == 1
        else f"the top key is always the most {sign} key visible"
    )
    return (
        f"In head {k} every query is {sign}, so every row ranks the keys in the same order: {which}, and past row "
        f"0 no weight is above {float(weights.max()):.2f}."
    )


def scores_notes(trace: Trace, labels: list[str], b: int) -> tuple[str, ...]:
    """Rank ≤ head_dim, read off the traced scores; at head_dim 1, why the rows look alike."""
    scores = trace.steps["attn_scores"][b]  # (h, T, T)
    d = trace.steps["queries_heads"].shape[-1]
    ranks = [_rank(s) for s in scores]
    shown = ", ".join(f"head {k}: {r}" for k, r in enumerate(ranks[:8])) + (", …" if len(ranks) > 8 else "")
    notes = [
        f"Rank ≤ head_dim: each head's scores are Q (T, head_dim) @ Kᵀ (head_dim, T), so their rank is at most "
        f"head_dim = {d} (here {shown})."
    ]
    if d == 1:
        notes.append(
            "At head_dim = 1 each score matrix is an outer product q kᵀ: every row is the same row of keys times "
            "one number, so all rows look alike."
        )
        notes += [note for k in range(scores.shape[0]) if (note := _same_sign_note(trace, labels, b, k))]
    return tuple(notes)


def scale_panels(demo: ScaleDemo, presenter: bool) -> list[Panel]:
    """Two small charts: the raw scores' spread, and each row's largest weight, with and without ÷ √head_dim."""
    dims = list(demo.head_dims)
    where = (
        "a fresh one-head module per head_dim (nn.Linear's initialisation, d_in = 64, x ~ N(0, 1), 4 × 32 tokens) "
        "· one traced forward pass each"
    )
    spread = Panel(
        "scale_spread",
        "Why √head_dim: the raw scores spread like √head_dim",
        f"std of `attn_scores` over the visible cells, and of `attn_scores / keys.shape[-1]**0.5` · {where}",
        figures.line_chart(
            dims,
            {"q · k": list(demo.spread), "q · k / √head_dim": list(demo.spread_scaled)},
            title="Spread of the scores at initialisation",
            x_title="head_dim",
            y_title="standard deviation",
            log_x=True,
            presenter=presenter,
        ),
    )
    peak = Panel(
        "scale_top_weight",
        "… and without the division the softmax heads for one-hot",
        f"mean over rows (two keys or more) of each row's largest weight: softmax(masked scores) and the module's "
        f"own `attn_weights` · {where}",
        figures.line_chart(
            dims,
            {"no division": list(demo.top_weight), "÷ √head_dim": list(demo.top_weight_scaled)},
            title="Each row's largest weight at initialisation",
            x_title="head_dim",
            y_title="largest weight in a row",
            log_x=True,
            presenter=presenter,
        ),
    )
    return [spread, peak]
