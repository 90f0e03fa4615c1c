"""Follow one token: one query row of the traced forward pass, head by head, down to its printed output row.

Every number shown is read from the trace (``mha_core.attention.modules.Trace``): the query, the keys, the dot
products, the scaled scores, the weights, the values, the context, the concatenation and the output. The only
arithmetic done here is the display of terms the module summed: weight × value row, and out_proj split into one
contribution per head (output = Σ_k context_k · W_out[:, block k]ᵀ + bias), whose sum is checked against the traced
output. No streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from mha_core.attention import book
from mha_core.runs.forward import ExplorerRun

from . import figures
from .figures.panel import Panel

SHOW_DIMS = 8  # vectors are printed with at most this many numbers
SHOW_KEYS = 12  # per head, the keys with the largest weights (in position order) are listed
SHOW_FEATURES = 16  # output features drawn in the contributions figure


def vector_text(values: np.ndarray, limit: int = SHOW_DIMS) -> str:
    """[0.1234, -0.5678, …] as torch prints 4 decimals; longer vectors are cut, with how many more."""
    shown = ", ".join(f"{v:.4f}" for v in values[:limit])
    more = f", … {values.size - limit} more" if values.size > limit else ""
    return f"[{shown}{more}]"


@dataclass(frozen=True)
class KeyRow:
    """One visible key of the followed query, in one head."""

    position: int
    label: str
    key: str  # k_j, printed
    dot: float  # q · k_j, attn_scores[b, head, i, j]
    scaled: float  # q · k_j / √head_dim, scaled_scores[b, head, i, j]
    weight: float  # softmax, attn_weights[b, head, i, j]
    used: float  # the weight the context used: after dropout (equal to weight without it)
    value: str  # v_j, printed
    weighted: str  # used × v_j, printed


@dataclass(frozen=True)
class HeadFollow:
    head: int
    query: str  # q_i of this head, printed
    rows: tuple[KeyRow, ...]  # at most SHOW_KEYS, in position order
    hidden_keys: int  # visible keys left out of rows (smallest weights)
    visible: int  # keys the causal mask lets the query see
    context: str  # context_heads[b, head, i], printed


@dataclass(frozen=True)
class TokenView:
    index: int
    label: str
    head_dim: int
    sqrt_head_dim: float
    heads: tuple[HeadFollow, ...]
    concatenated: str  # context[b, i]: the heads side by side
    contributions: np.ndarray  # (h, d_out): head k's share of the output, context_k · W_out[:, block k]ᵀ
    bias: np.ndarray  # (d_out,)
    output: np.ndarray  # (d_out,) output[b, i], from the trace
    output_text: str
    sum_error: float  # max |Σ contributions + bias − output|
    book_row: tuple[float, float] | None  # the book's printed row for this token, at the book's settings
    matches_book: bool
    panels: tuple[Panel, ...]  # the weights per head, then out_proj's per-head contributions


OUTPUT_COLOR = "#D55E00"  # Okabe–Ito vermillion: no head has it, and it reads on a light and a dark page


def head_contributions(context_row: np.ndarray, weight: np.ndarray, num_heads: int) -> np.ndarray:
    """(h, d_out): out_proj applied to each head's block of the concatenated row alone (no bias).

    context_row (d_out,) is the concatenation [c_0 | c_1 | …]; weight is out_proj.weight (d_out, d_out), so
    output = weight @ context_row + bias = Σ_k weight[:, block k] @ c_k + bias.
    """
    d_out = context_row.shape[0]
    head_dim = d_out // num_heads
    blocks = context_row.astype(np.float64).reshape(num_heads, head_dim)  # (h, head_dim)
    columns = weight.astype(np.float64).reshape(d_out, num_heads, head_dim)  # (d_out, h, head_dim)
    return np.einsum("ohd,hd->ho", columns, blocks)  # (h, d_out)


def _weights_figure(heads: tuple[HeadFollow, ...], label: str, presenter: bool) -> go.Figure:
    """Grouped bars: the followed query's weight on each listed key, one colour per head."""
    colors = [figures.head_colors(head.head + 1)[head.head] for head in heads]  # head k's colour everywhere
    keys = sorted({row.position for head in heads for row in head.rows})
    names = {row.position: row.label for head in heads for row in head.rows}
    data = []
    for head, color in zip(heads, colors, strict=True):
        by_key = {row.position: row.used for row in head.rows}
        data.append(
            {
                "type": "bar",
                "name": f"head {head.head}",
                "x": [keys.index(p) for p in by_key],
                "y": list(by_key.values()),
                "marker": {"color": color},
                "customdata": [figures.escape_label(names[p]) for p in by_key],
                "hovertemplate": f"head {head.head} · key %{{customdata}}<br>weight used = %{{y:.4f}}<extra></extra>",
            }
        )
    layout = {
        "barmode": "group",
        "xaxis": {
            "tickmode": "array",
            "tickvals": list(range(len(keys))),
            "ticktext": [f"{figures.escape_label(names[p])} ({p})" for p in keys],
            "title": {"text": "key"},
        },
        "yaxis": {
            "title": {"text": "weight"},
            "rangemode": "tozero",
            "showgrid": True,
            "gridcolor": figures.GRID_COLOR,
        },
        "legend": {"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},  # right of the plot
    }
    return figures.finish_figure(
        {"data": data, "layout": layout},
        f"weights of query {figures.escape_label(label)}, per head",
        presenter,
        height=round(360 * (1.25 if presenter else 1.0)),
        legend_entries=len(heads),
    )


def contributions_figure(
    contributions: np.ndarray, bias: np.ndarray, output: np.ndarray, *, presenter: bool = False
) -> go.Figure:
    """Stacked bars per output feature: each head's contribution and the bias, with the output as a diamond."""
    h, d_out = contributions.shape
    shown = min(d_out, SHOW_FEATURES)
    x = list(range(shown))
    data = [
        {
            "type": "bar",
            "name": f"head {k}",
            "x": x,
            "y": contributions[k, :shown].tolist(),
            "marker": {"color": color},
            "hovertemplate": f"head {k} · feature %{{x}}<br>contribution = %{{y:.4f}}<extra></extra>",
        }
        for k, color in zip(range(h), figures.head_colors(h), strict=True)
    ]
    data.append(
        {
            "type": "bar",
            "name": "bias",
            "x": x,
            "y": bias[:shown].tolist(),
            "marker": {"color": "#bbbbbb"},
            "hovertemplate": "bias · feature %{x}<br>%{y:.4f}<extra></extra>",
        }
    )
    data.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "output (sum)",
            "x": x,
            "y": output[:shown].tolist(),
            "marker": {"symbol": "diamond", "size": 14, "color": OUTPUT_COLOR, "line": {"width": 1, "color": "white"}},
            "hovertemplate": "output · feature %{x}<br>%{y:.4f}<extra></extra>",
        }
    )
    layout = {
        "barmode": "relative",
        "xaxis": {
            "title": {"text": "output feature" + (f" (first {shown} of {d_out})" if shown < d_out else "")},
            "tickmode": "array",
            "tickvals": x,
            "ticktext": [str(o) for o in x],
        },
        "yaxis": {"title": {"text": "value"}, "showgrid": True, "gridcolor": figures.GRID_COLOR, "zeroline": True},
        "legend": {"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},  # right of the plot
    }
    return figures.finish_figure(
        {"data": data, "layout": layout},
        "output = Σ heads' contributions + bias",
        presenter,
        height=round(380 * (1.25 if presenter else 1.0)),
        legend_entries=h + 2,
    )


def _follow_head(run: ExplorerRun, b: int, k: int, i: int) -> HeadFollow:
    trace, labels = run.trace, run.labels
    allowed = trace.numpy("mask")[i]  # (T,) True = may attend
    used = trace.numpy("attn_weights_dropped")[b, k, i]  # (T,)
    visible = np.flatnonzero(allowed)
    listed = np.sort(visible[np.argsort(-used[visible], kind="stable")[:SHOW_KEYS]])
    keys, values = trace.numpy("keys_heads")[b, k], trace.numpy("values_heads")[b, k]  # (T, head_dim) each
    rows = tuple(
        KeyRow(
            int(j),
            labels[j],
            vector_text(keys[j]),
            float(trace.numpy("attn_scores")[b, k, i, j]),
            float(trace.numpy("scaled_scores")[b, k, i, j]),
            float(trace.numpy("attn_weights")[b, k, i, j]),
            float(used[j]),
            vector_text(values[j]),
            vector_text(used[j] * values[j]),
        )
        for j in listed
    )
    return HeadFollow(
        k,
        vector_text(trace.numpy("queries_heads")[b, k, i]),
        rows,
        int(visible.size - listed.size),
        int(visible.size),
        vector_text(trace.numpy("context_heads")[b, k, i]),
    )


def build_token_view(
    run: ExplorerRun, *, token: int, batch_index: int, presenter: bool, book_example: bool
) -> TokenView:
    """Query ``token`` of batch element ``batch_index``, followed through every head to its output row."""
    trace = run.trace
    b, h, t, head_dim = trace.info["queries_heads"].shape
    if not 0 <= token < t:
        raise ValueError(f"token must be in 0–{t - 1}, got {token}")
    heads = tuple(_follow_head(run, batch_index, k, token) for k in range(h))
    context = trace.numpy("context")[batch_index, token]  # (d_out,)
    output = trace.numpy("output")[batch_index, token]  # (d_out,)
    bias = run.out_proj_bias if run.out_proj_bias is not None else np.zeros_like(output)
    contributions = head_contributions(context, run.out_proj_weight, h)  # (h, d_out)
    total = contributions.sum(0) + bias.astype(np.float64)
    sum_error = float(np.abs(total - output).max()) if output.size else 0.0
    book_row = book.PRINTED_OUTPUT[token] if book_example and token < len(book.PRINTED_OUTPUT) else None
    matches = book_row is not None and book.printed(output.tolist()) == book.printed(list(book_row))
    label = run.labels[token]
    panels = (
        Panel(
            "token_weights",
            f"Query “{figures.escape_markdown(label)}”: its weight on each visible key, per head",
            f"`attn_weights_dropped[{batch_index}, :, {token}, :]`, the weights the context used (equal to "
            f"`attn_weights` unless dropout is on in train mode) · the {SHOW_KEYS} heaviest visible keys per head at "
            "most",
            _weights_figure(heads, label, presenter),
        ),
        Panel(
            "token_contributions",
            "out_proj, head by head: each head's share of the output row",
            f"`out_proj.weight[:, block k] @ context_k` for each head k, the bias, and `output[{batch_index}, "
            f"{token}]` from the trace · their sum differs from it by {sum_error:.1e}",
            contributions_figure(contributions, bias, output, presenter=presenter),
        ),
    )
    return TokenView(
        token,
        label,
        head_dim,
        float(head_dim) ** 0.5,
        heads,
        vector_text(context, 4 * SHOW_DIMS),
        contributions,
        bias,
        output,
        vector_text(output, 4 * SHOW_DIMS),
        sum_error,
        book_row,
        matches,
        panels,
    )


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")  # the book's six rows
SUPERSCRIPTS = "¹²³⁴⁵⁶"  # the book numbers its tokens x⁽¹⁾ … x⁽⁶⁾


def heading(view: TokenView) -> str:
    """Section 2's heading (markdown): the query token's text escaped, so ``__init__`` reads as it was typed."""
    return f"Query {view.index}: “{figures.escape_markdown(view.label)}”, head by head"


def heads_intro(view: TokenView) -> str:
    """What each head's table holds, in reading order: the query is this head's head_dim slice, not the whole row."""
    scale = (
        f"÷ √head_dim = ÷ {view.sqrt_head_dim:.4g}"
        if view.head_dim > 1
        else "÷ √head_dim = ÷ 1: at head_dim = 1 the scaling changes nothing"
    )
    return (
        f"In each head k: this head's query q (its head_dim = {view.head_dim} numbers of the token's row of `queries`, "
        "columns k·head_dim onwards: `queries_heads[b, k, i]`), every key k_j it may see (the causal mask hides "
        f"later ones), the dot product q · k_j, {scale}, the softmax over the visible keys, and the weighted sum of "
        "the value rows v_j, which is the head's context for this token."
    )


def book_row_text(view: TokenView) -> str:
    """The book's printed row beside this one: rows count from 0 here, and the book's batch is two copies."""
    if view.book_row is None:
        return ""
    i = view.index
    printed = f"[{view.book_row[0]:.4f}, {view.book_row[1]:.4f}]"
    row = f"row {i} (the {ORDINALS[i]} row, {view.label}, the book's x⁽{SUPERSCRIPTS[i]}⁾)"
    both = "in either batch element: the book's batch is two copies of the same six tokens"
    if view.matches_book:
        return f"It prints as the book's output {row}, {printed}, {both}."
    return f"The book prints output {row} as {printed}, {both}."
