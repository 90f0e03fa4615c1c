"""Each head as two d_in-wide matrices, W_QK and W_OV (Elhage et al. 2021, "A Mathematical Framework for Transformer
Circuits"), and the sum over heads that is multi-head attention.

With nn.Linear's convention (``q = x W_Qᵀ``), head h's rows of W_query are W_Qʰ (head_dim, d_in), and so on:

* W_QKʰ = W_Qʰᵀ W_Kʰ, (d_in, d_in), rank ≤ head_dim. The score of query x_i and key x_j is x_i W_QKʰ x_jᵀ: the
  traced ``attn_scores``, before the division by √head_dim (Listing 3.5 divides the scores afterwards; folding it in
  gives W_QKʰ / √head_dim, the matrix whose form feeds the softmax).
* W_OVʰ = W_outʰ W_Vʰ, (d_out, d_in), where W_outʰ is head h's block of out_proj's columns (d_out, head_dim).
  The output is Σ_h Aʰ X W_OVʰᵀ + b: each head reads X through its own weights Aʰ and writes through its own W_OVʰ,
  and out_proj adds the heads. Heads are independent, and they add.

Biases (qkv_bias, GPT-2) make the forms affine; they are kept as separate terms, so the identities stay exact.
Pure functions of a module's weights and a trace; nothing is stored on the module. Torch only.

Axis letters: b batch, h heads, i query position, j key position, d head_dim, e d_in, o d_out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mha_core.attention.modules import MultiHeadAttention, Trace


@dataclass(frozen=True, kw_only=True)
class Circuits:
    """The chosen heads' W_QK and W_OV, and the bias terms that make the two forms affine (k: heads chosen)."""

    heads: tuple[int, ...]  # which heads of the module, in this order
    w_qk: torch.Tensor  # (k, e, e): W_Qʰᵀ W_Kʰ
    w_ov: torch.Tensor  # (k, o, e): W_outʰ W_Vʰ
    query_bias: torch.Tensor | None  # (k, d): b_Qʰ, None without qkv_bias
    key_bias: torch.Tensor | None  # (k, d)
    w_q: torch.Tensor  # (k, d, e): needed only with biases (x W_Qᵀ b_K and b_Q W_K xᵀ)
    w_k: torch.Tensor  # (k, d, e)
    ov_bias: torch.Tensor  # (k, o): W_outʰ b_Vʰ, what a weight row of sum 1 writes from the value bias
    out_bias: torch.Tensor  # (o,): out_proj's bias (zeros when it has none)
    head_dim: int

    @property
    def ranks(self) -> tuple[int, ...]:
        """The rank of each head's W_QK: at most head_dim, however wide d_in is. Singular values below the product's
        rounding in its own dtype (10 · d_in · eps of the largest) count as zero."""
        rtol = 10 * self.w_qk.shape[-1] * torch.finfo(self.w_qk.dtype).eps
        return tuple(int(torch.linalg.matrix_rank(m.double(), rtol=rtol)) for m in self.w_qk)


def _head_rows(weight: torch.Tensor, num_heads: int, heads: list[int]) -> torch.Tensor:
    """A projection's weight (h·d, e) cut into the chosen heads' rows: (len(heads), d, e)."""
    return weight.view(num_heads, weight.shape[0] // num_heads, weight.shape[1])[heads]  # (h, d, e) -> (k, d, e)


def _head_bias(linear: torch.nn.Linear, num_heads: int, heads: list[int]) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.view(num_heads, -1)[heads]  # (h, d) -> (k, d)


def _chosen(module: MultiHeadAttention, heads) -> list[int]:
    h = module.num_heads
    chosen = list(range(h)) if heads is None else [int(k) for k in heads]
    bad = [k for k in chosen if not 0 <= k < h]
    if bad:
        raise ValueError(f"heads must be in 0–{h - 1} (num_heads={h}), got {bad}")
    return chosen


@torch.no_grad()
def circuits(module: MultiHeadAttention, heads: Sequence[int] | None = None) -> Circuits:
    """W_QK and W_OV of the chosen heads (default: all) of a MultiHeadAttention: the book's, a trained one or a GPT
    block's. One head at a time keeps a wide model's (d_in, d_in) matrices to one head's bytes."""
    h, d, chosen = module.num_heads, module.head_dim, _chosen(module, heads)
    w_q = _head_rows(module.W_query.weight, h, chosen)  # (k, d, e)
    w_k = _head_rows(module.W_key.weight, h, chosen)  # (k, d, e)
    w_v = _head_rows(module.W_value.weight, h, chosen)  # (k, d, e)
    out = module.out_proj.weight  # (o, h·d)
    w_out = out.view(out.shape[0], h, d).transpose(0, 1)[chosen]  # (o, h, d) -> (h, o, d) -> (k, o, d): column blocks
    value_bias = _head_bias(module.W_value, h, chosen)  # (k, d) or None
    ov_bias = (
        torch.zeros(len(chosen), out.shape[0], dtype=out.dtype, device=out.device)
        if value_bias is None
        else torch.einsum("hod,hd->ho", w_out, value_bias)
    )
    out_bias = module.out_proj.bias if module.out_proj.bias is not None else torch.zeros_like(out[:, 0])
    return Circuits(
        heads=tuple(chosen),
        w_qk=w_q.transpose(1, 2) @ w_k,  # (k, e, d) @ (k, d, e) = (k, e, e)
        w_ov=w_out @ w_v,  # (k, o, d) @ (k, d, e) = (k, o, e)
        query_bias=_head_bias(module.W_query, h, chosen),
        key_bias=_head_bias(module.W_key, h, chosen),
        w_q=w_q,
        w_k=w_k,
        ov_bias=ov_bias,
        out_bias=out_bias.detach(),
        head_dim=d,
    )


def _check_width(c: Circuits, x: torch.Tensor) -> None:
    width = c.w_qk.shape[-1]
    if x.ndim != 3 or x.shape[-1] != width:
        raise ValueError(f"x must have shape (batch, tokens, {width}) for these circuits, got {tuple(x.shape)}")


def circuit_scores(c: Circuits, x: torch.Tensor) -> torch.Tensor:
    """(b, k, i, j) scores x_i W_QKʰ x_jᵀ (+ the bias terms): the traced attn_scores, before ÷ √head_dim."""
    _check_width(c, x)
    scores = torch.einsum("bie,hef,bjf->bhij", x, c.w_qk, x)  # (b, h, i, j)
    if c.query_bias is not None:
        scores = scores + torch.einsum("hd,hde,bje->bhj", c.query_bias, c.w_k, x)[:, :, None, :]  # b_Q · k_j
    if c.key_bias is not None:
        scores = scores + torch.einsum("bie,hde,hd->bhi", x, c.w_q, c.key_bias)[..., None]  # q_i · b_K
    if c.query_bias is not None and c.key_bias is not None:
        scores = scores + (c.query_bias * c.key_bias).sum(-1)[None, :, None, None]  # b_Q · b_K
    return scores


def head_outputs(c: Circuits, weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(b, k, i, o): what each chosen head writes, Aʰ X W_OVʰᵀ (+ its value bias, weighted by each row's sum).

    ``weights`` (b, k, i, j) are those heads' attention weights (after dropout, if any)."""
    _check_width(c, x)
    written = torch.einsum("bhij,bje,hoe->bhio", weights, x, c.w_ov)  # (b, h, i, o)
    return written + weights.sum(-1)[..., None] * c.ov_bias[None, :, None, :]  # rows sum to 1 without dropout


def circuit_output(c: Circuits, weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(b, i, o): Σ_h Aʰ X W_OVʰᵀ + b, the module's output rebuilt from its heads' circuits."""
    return head_outputs(c, weights, x).sum(1) + c.out_bias


@dataclass(frozen=True, kw_only=True)
class CircuitCheck:
    """The circuits against one traced forward pass: both differences are float rounding, not zero."""

    scores_diff: float  # max |x W_QK xᵀ − traced attn_scores|, over the heads checked
    output_diff: float  # max |Σ_h Aʰ X W_OVʰᵀ + b − traced output|


@torch.no_grad()
def check_against_trace(
    module: MultiHeadAttention, trace: Trace, score_heads: Sequence[int] | None = None
) -> CircuitCheck:
    """Rebuild the traced output from every head's W_OV, and the traced scores of ``score_heads`` (default: all)
    from their W_QK, one head at a time (a wide model's matrices are never all held at once), with the trace's own
    weights, dropout included."""
    x = trace.steps["x"]  # (b, i, e)
    weights = trace.steps["attn_weights_dropped"]  # (b, h, i, j)
    scored = set(_chosen(module, score_heads))
    scores_diff, total = 0.0, None
    for k in range(module.num_heads):
        c = circuits(module, [k])
        if k in scored:
            scores = circuit_scores(c, x)[:, 0]  # (b, i, j)
            scores_diff = max(scores_diff, _max_diff(scores, trace.steps["attn_scores"][:, k]))
        written = head_outputs(c, weights[:, k : k + 1], x)[:, 0]  # (b, i, o)
        total = written if total is None else total + written
    output = total + module.out_proj.bias if module.out_proj.bias is not None else total
    return CircuitCheck(scores_diff=scores_diff, output_diff=_max_diff(output, trace.output))


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


@dataclass(frozen=True, kw_only=True)
class HeadReport:
    """One head's circuits and one token's row of the sum over heads: what the circuits view draws."""

    head: int
    head_dim: int
    rank: int  # of W_QK, ≤ head_dim
    w_qk: torch.Tensor  # (e, e)
    w_ov: torch.Tensor  # (o, e)
    scores: torch.Tensor  # (b, i, j): x W_QK xᵀ of this head, before ÷ √head_dim
    shares: torch.Tensor  # (h, o): each head's Aʰ X W_OVʰᵀ at (batch, token)
    out_bias: torch.Tensor  # (o,)
    output: torch.Tensor  # (o,): the traced output at (batch, token)
    check: CircuitCheck  # every head, every position
    biased: bool  # qkv_bias: the scores and shares include their bias terms, beside the two forms


@torch.no_grad()
def head_report(module: MultiHeadAttention, trace: Trace, *, head: int, batch: int, token: int) -> HeadReport:
    """Head ``head``'s W_QK, W_OV and circuit scores, and every head's share of output[batch, token]."""
    b, t = trace.output.shape[:2]
    if not (0 <= batch < b and 0 <= token < t):
        raise ValueError(f"batch must be in 0–{b - 1} and token in 0–{t - 1}, got batch {batch}, token {token}")
    x, weights = trace.steps["x"], trace.steps["attn_weights_dropped"]  # (b, i, e), (b, h, i, j)
    h, c = module.num_heads, circuits(module, [head])
    row = weights[batch : batch + 1, :, token : token + 1]  # (1, h, 1, j): this token's weights in every head
    shares = torch.stack(
        [head_outputs(circuits(module, [k]), row[:, k : k + 1], x[batch : batch + 1])[0, 0, 0] for k in range(h)]
    )  # (h, o)
    return HeadReport(
        head=head,
        head_dim=c.head_dim,
        rank=c.ranks[0],
        w_qk=c.w_qk[0],
        w_ov=c.w_ov[0],
        scores=circuit_scores(c, x)[:, 0],  # (b, k=1, i, j) -> (b, i, j)
        shares=shares,
        out_bias=c.out_bias,
        output=trace.output[batch, token],
        check=check_against_trace(module, trace, score_heads=[head]),
        biased=module.W_query.bias is not None,
    )
