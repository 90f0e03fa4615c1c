"""Each head computed on its own, as the book's MultiHeadAttentionWrapper does.

Section 3.6.2 claims that one batched module (view + transpose + one matmul) computes
exactly what ``num_heads`` separate CausalAttention heads compute. ``separate_heads``
runs the separate path with each head's slice of the batched weights, so the app can
put the two side by side and show the difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .modules import MultiHeadAttention, trace_forward


@dataclass(frozen=True, kw_only=True)
class SeparateHeads:
    scores: torch.Tensor  # (b, h, T, T) Q Kᵀ of each head, computed alone
    weights: torch.Tensor  # (b, h, T, T)
    context: torch.Tensor  # (b, h, T, head_dim)
    concatenated: torch.Tensor  # (b, T, d_out): heads side by side, before out_proj
    max_abs_diff: dict[str, float]  # step name -> max |separate − batched|


def _head_slice(linear: torch.nn.Linear, head: int, head_dim: int, x: torch.Tensor) -> torch.Tensor:
    """x projected by rows [head·d, (head+1)·d) of the layer: one head's own projection."""
    rows = slice(head * head_dim, (head + 1) * head_dim)
    bias = None if linear.bias is None else linear.bias[rows]
    return F.linear(x, linear.weight[rows], bias)  # (b, T, d)


@torch.no_grad()
def separate_heads(module: MultiHeadAttention, x: torch.Tensor) -> SeparateHeads:
    """Run every head alone (eval-mode math, no dropout) and compare with the batched module."""
    num_tokens, head_dim = x.shape[1], module.head_dim
    blocked = module.mask.bool()[:num_tokens, :num_tokens]  # (T, T), the book's convention
    scores, weights, contexts = [], [], []
    for head in range(module.num_heads):
        queries = _head_slice(module.W_query, head, head_dim, x)  # (b, T, d)
        keys = _head_slice(module.W_key, head, head_dim, x)
        values = _head_slice(module.W_value, head, head_dim, x)
        head_scores = queries @ keys.transpose(1, 2)  # (b, T, T)
        head_weights = torch.softmax(head_scores.masked_fill(blocked, -torch.inf) / head_dim**0.5, dim=-1)
        scores.append(head_scores)
        weights.append(head_weights)
        contexts.append(head_weights @ values)  # (b, T, d)
    result_scores = torch.stack(scores, dim=1)  # (b, h, T, T)
    result_weights = torch.stack(weights, dim=1)  # (b, h, T, T)
    result_context = torch.stack(contexts, dim=1)  # (b, h, T, d)
    concatenated = torch.cat(contexts, dim=-1)  # (b, T, h·d)

    was_training = module.training
    if was_training:
        raise ValueError("separate_heads compares eval-mode numbers; call module.eval() first")
    batched = trace_forward(module, x).steps
    pairs = {
        "attn_scores": (result_scores, batched["attn_scores"]),
        "attn_weights": (result_weights, batched["attn_weights"]),
        "context_heads": (result_context, batched["context_heads"]),
        "context": (concatenated, batched["context"]),
    }
    diffs = {name: (a - b).abs().max().item() if a.numel() else 0.0 for name, (a, b) in pairs.items()}
    return SeparateHeads(
        scores=result_scores,
        weights=result_weights,
        context=result_context,
        concatenated=concatenated,
        max_abs_diff=diffs,
    )
