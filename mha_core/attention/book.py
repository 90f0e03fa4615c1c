"""The book's single-head CausalAttention and its MultiHeadAttentionWrapper (chapter 3).

They are the "separate heads" that Listing 3.5 batches into one module; the tests use
them to reproduce the book's printed numbers and ``heads.from_wrapper`` turns a wrapper's
weights into one batched ``MultiHeadAttention``.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from mha_core.attention.masks import book_causal_buffer
from mha_core.attention.modules import MultiHeadAttention


class CausalAttention(nn.Module):
    """One causal head, section 3.5.3: (b, T, d_in) -> (b, T, d_out)."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", book_causal_buffer(context_length))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)  # (b, T, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)  # (b, T, T)
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values  # (b, T, d_out)


class MultiHeadAttentionWrapper(nn.Module):
    """Section 3.6.1: num_heads separate CausalAttention modules, outputs concatenated."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)  # (b, T, num_heads * d_out)


def from_wrapper(wrapper: MultiHeadAttentionWrapper, context_length: int) -> MultiHeadAttention:
    """One batched module whose head i has the weights of wrapper head i (out_proj = identity).

    The wrapper has no output projection, so out_proj is set to the identity with zero bias,
    which makes the batched module's output equal the wrapper's concatenation.
    """
    heads = list(wrapper.heads)
    d_in, head_dim = heads[0].W_query.in_features, heads[0].W_query.out_features
    qkv_bias = heads[0].W_query.bias is not None
    d_out = head_dim * len(heads)
    module = MultiHeadAttention(d_in, d_out, context_length, heads[0].dropout.p, len(heads), qkv_bias)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            target = getattr(module, name)
            target.weight.copy_(torch.cat([getattr(h, name).weight for h in heads]))  # (h·d, d_in)
            if qkv_bias:
                target.bias.copy_(torch.cat([getattr(h, name).bias for h in heads]))  # (h·d,)
        module.out_proj.weight.copy_(torch.eye(d_out))
        module.out_proj.bias.zero_()
    return module


# Listing 3.5's printed output for each batch row (section 3.6.2), as the book prints it.
PRINTED_OUTPUT = (
    (0.3190, 0.4858),
    (0.2943, 0.3897),
    (0.2856, 0.3593),
    (0.2693, 0.3873),
    (0.2639, 0.3928),
    (0.2575, 0.4028),
)


def printed(values) -> list:
    """Values as torch prints them, to 4 decimals, as nested lists of strings."""
    if isinstance(values, torch.Tensor):
        values = values.tolist()
    if isinstance(values, (list, tuple)):
        return [printed(v) for v in values]
    return f"{values:.4f}"


def matches_printed_output(output: torch.Tensor) -> bool:
    """True when a (6, 2) output prints exactly as the book's Listing 3.5 output."""
    return tuple(output.shape) == (6, 2) and printed(output) == printed(PRINTED_OUTPUT)
