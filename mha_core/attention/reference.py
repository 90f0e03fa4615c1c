"""The module's weights run through torch's own attention, to check it to the last decimal.

Two references:

* ``torch.nn.MultiheadAttention`` with the weights copied in, the causal mask translated to
  its True-means-blocked convention, and ``need_weights=True, average_attn_weights=False``
  so that it returns per-head weights;
* ``F.scaled_dot_product_attention`` (the fused kernel) on the module's own projections.

Errors are measured against a float64 copy of the module, as flash-attention's tests do:
our float32 error should be about torch's own float32 error, not more.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from mha_core.attention import masks
from mha_core.attention.modules import MultiHeadAttention, trace_forward


def to_torch_mha(module: MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention computing the same thing, on the module's device and dtype.

    When d_in == d_out the q, k, v weights go into the packed ``in_proj_weight`` (rows
    [0:E] query, [E:2E] key, [2E:] value, as in continuiti's tests). nn.MultiheadAttention
    needs the query to have embed_dim features, so when d_in != d_out the query is fed
    already projected (see ``torch_mha_forward``) and its own projection is the identity,
    which is exact in floating point.
    """
    d_in, d_out = module.d_in, module.d_out
    weight = module.W_query.weight
    mha = nn.MultiheadAttention(
        d_out,
        module.num_heads,
        bias=True,
        batch_first=True,
        kdim=d_in,
        vdim=d_in,
        device=weight.device,
        dtype=weight.dtype,
    )
    zeros = torch.zeros(d_out, device=weight.device, dtype=weight.dtype)

    def bias_of(linear):
        return zeros if linear.bias is None else linear.bias

    with torch.no_grad():
        if d_in == d_out:
            mha.in_proj_weight.copy_(torch.cat([module.W_query.weight, module.W_key.weight, module.W_value.weight]))
            mha.in_proj_bias.copy_(torch.cat([bias_of(module.W_query), bias_of(module.W_key), bias_of(module.W_value)]))
        else:
            mha.q_proj_weight.copy_(torch.eye(d_out))
            mha.k_proj_weight.copy_(module.W_key.weight)
            mha.v_proj_weight.copy_(module.W_value.weight)
            mha.in_proj_bias.copy_(torch.cat([zeros, bias_of(module.W_key), bias_of(module.W_value)]))
        mha.out_proj.weight.copy_(module.out_proj.weight)
        mha.out_proj.bias.copy_(module.out_proj.bias)
    return mha.eval()


@torch.no_grad()
def torch_mha_forward(module: MultiHeadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(output (b, T, d_out), per-head weights (b, h, T, T)) from nn.MultiheadAttention."""
    mha = to_torch_mha(module)
    num_tokens = x.shape[1]
    query = x if module.d_in == module.d_out else module.W_query(x)  # (b, T, d_out)
    blocked = masks.to_blocked(masks.causal(num_tokens, device=x.device))  # (T, T), True = blocked
    output, weights = mha(query, x, x, attn_mask=blocked, need_weights=True, average_attn_weights=False)
    return output, weights


@torch.no_grad()
def sdpa_forward(module: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """The module's projections with the attention step done by F.scaled_dot_product_attention.

    This is the minimal fused implementation the benchmark measures everything against.
    """
    b, num_tokens, _ = x.shape
    h, d = module.num_heads, module.head_dim
    queries = module.W_query(x).view(b, num_tokens, h, d).transpose(1, 2)  # (b, h, T, d)
    keys = module.W_key(x).view(b, num_tokens, h, d).transpose(1, 2)  # (b, h, T, d)
    values = module.W_value(x).view(b, num_tokens, h, d).transpose(1, 2)  # (b, h, T, d)
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)  # (b, h, T, d)
    context = context.transpose(1, 2).contiguous().view(b, num_tokens, h * d)  # (b, T, d_out)
    return module.out_proj(context)


@dataclass(frozen=True, kw_only=True)
class ReferenceReport:
    """Max absolute differences; the ``*_vs_float64`` ones are errors against a float64 module."""

    device: str
    dtype: str
    output_vs_torch_mha: float
    weights_vs_torch_mha: float
    output_vs_sdpa: float
    output_vs_float64: float
    weights_vs_float64: float
    torch_mha_output_vs_float64: float
    torch_mha_weights_vs_float64: float
    sdpa_output_vs_float64: float


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.cpu().double() - b.cpu().double()).abs().max().item() if a.numel() else 0.0


@torch.no_grad()
def compare_with_torch(
    module: MultiHeadAttention, x: torch.Tensor, baseline_device: str | None = None
) -> ReferenceReport:
    """Run the module, nn.MultiheadAttention and SDPA on x (module's device and dtype) and diff them.

    The float64 baseline runs on x's device, or on ``baseline_device`` (cpu, say, on mps, which has no float64).
    """
    if module.training:
        raise ValueError("compare_with_torch compares eval-mode numbers; call module.eval() first")
    trace = trace_forward(module, x)
    mha_output, mha_weights = torch_mha_forward(module, x)
    sdpa_output = sdpa_forward(module, x)

    device64 = baseline_device or x.device
    module64 = copy.deepcopy(module).to(device=device64, dtype=torch.float64)  # the caller's may be shared
    x64 = x.to(device=device64, dtype=torch.float64)
    trace64 = trace_forward(module64, x64)
    output64, weights64 = trace64.output, trace64.steps["attn_weights"]
    return ReferenceReport(
        device=str(x.device),
        dtype=str(x.dtype).removeprefix("torch."),
        output_vs_torch_mha=_max_diff(trace.output, mha_output),
        weights_vs_torch_mha=_max_diff(trace.steps["attn_weights"], mha_weights),
        output_vs_sdpa=_max_diff(trace.output, sdpa_output),
        output_vs_float64=_max_diff(trace.output, output64),
        weights_vs_float64=_max_diff(trace.steps["attn_weights"], weights64),
        torch_mha_output_vs_float64=_max_diff(mha_output, output64),
        torch_mha_weights_vs_float64=_max_diff(mha_weights, weights64),
        sdpa_output_vs_float64=_max_diff(sdpa_output, output64),
    )
