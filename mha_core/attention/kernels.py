"""The attention step, given per-head queries, keys and values.

Both implementations share one call signature, so a module can take either::

    attention(query, key, value, attn_mask=None, dropout_p=0.0, recorder=no_record)

and both take ``score_bias=`` (h, i, j), added to the scaled scores (ALiBi, ``positions``); a module passes it
only when it has one, so an attention of the four-argument kind still plugs in without positions.

Axis letters: b batch, h heads, i query position, j key position, d head_dim.
``attn_mask`` is boolean and True means "may attend" (see ``masks``); it broadcasts
against (b, h, i, j).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F

from mha_core.attention.masks import fully_masked_rows

Recorder = Callable[[str, torch.Tensor, str], torch.Tensor]


def no_record(name: str, tensor: torch.Tensor, description: str) -> torch.Tensor:
    """The recorder used outside tracing: hands the tensor straight back."""
    return tensor


class Attention(Protocol):
    def __call__(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        recorder: Recorder = no_record,
    ) -> torch.Tensor: ...


class ExplicitAttention:
    """matmul, mask, scale, softmax, dropout, matmul: every intermediate can be recorded.

    This is the math of Listing 3.5, lifted out so that both modules run the same code.
    ``scale=None`` divides by sqrt(head_dim) exactly as the book does (division, not a
    multiplication by a rounded reciprocal), so the book's printed numbers come out.
    A row whose keys are all masked gets zero weights (and so zero context), as torch's
    fused kernel gives in the pinned torch (older versions gave NaN), instead of the NaN a plain softmax would give.
    """

    name = "explicit"

    def __init__(self, scale: float | None = None):
        self.scale = scale

    def __call__(
        self, query, key, value, attn_mask=None, dropout_p=0.0, recorder: Recorder = no_record, score_bias=None
    ):
        rec = recorder
        attn_scores = rec("attn_scores", query @ key.transpose(-2, -1), "Q Kᵀ per head, before scaling")  # (b, h, i, j)
        if attn_mask is None:
            masked_scores = attn_scores
        else:
            masked_scores = attn_scores.masked_fill(~attn_mask, -torch.inf)
        masked_scores = rec("masked_scores", masked_scores, "scores with −∞ where the mask blocks a key")
        if self.scale is None:
            scaled_scores = masked_scores / key.shape[-1] ** 0.5  # the book's order: mask, then divide
        elif attn_mask is None:
            scaled_scores = attn_scores * self.scale
        else:  # scale first, so that a scale of 0 gives uniform weights, not −∞ × 0 = NaN
            scaled_scores = (attn_scores * self.scale).masked_fill(~attn_mask, -torch.inf)
        scaled_scores = rec("scaled_scores", scaled_scores, "masked scores times the softmax scale (1/√head_dim)")
        if score_bias is not None:  # ALiBi: added after the scale, as Press et al. and BLOOM add it; −∞ stays −∞
            scaled_scores = rec("biased_scores", scaled_scores + score_bias, "scaled scores plus the position bias")
        attn_weights = torch.softmax(scaled_scores, dim=-1)  # (b, h, i, j)
        if attn_mask is not None:
            empty_rows = rec("fully_masked_rows", fully_masked_rows(attn_mask), "query rows with every key masked")
            if empty_rows.any():  # skip a full pass over the weights when no row is empty (the causal case)
                attn_weights = attn_weights.masked_fill(empty_rows[..., None], 0.0)  # NaN rows -> 0, as fused
        attn_weights = rec("attn_weights", attn_weights, "softmax of the scaled masked scores, before dropout")
        if dropout_p > 0.0:
            dropped_weights = F.dropout(attn_weights, dropout_p, training=True)
            rec("dropout_keep", (dropped_weights != 0) | (attn_weights == 0), "where dropout kept the weight")
        else:
            dropped_weights = attn_weights
        dropped_weights = rec("attn_weights_dropped", dropped_weights, "weights after dropout, survivors × 1/(1−p)")
        return rec("context_heads", dropped_weights @ value, "per-head context: weights @ values")  # (b, h, i, d)


class FusedAttention:
    """torch's ``F.scaled_dot_product_attention``: fast, but it returns no weights to show."""

    name = "fused"

    def __init__(self, scale: float | None = None):
        self.scale = scale

    def __call__(
        self, query, key, value, attn_mask=None, dropout_p=0.0, recorder: Recorder = no_record, score_bias=None
    ):
        if score_bias is not None:  # a float mask is added to the scaled scores: the bias, −∞ where blocked
            blocked = score_bias.new_full((), -torch.inf)
            attn_mask = score_bias if attn_mask is None else torch.where(attn_mask, score_bias, blocked)
        context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, scale=self.scale
        )  # (b, h, i, d)
        return recorder("context_heads", context, "per-head context from the fused SDPA kernel")
