"""Multi-head attention, traced step by step. Torch only: no streamlit, no plotly."""

from mha_core.attention.kernels import ExplicitAttention, FusedAttention
from mha_core.attention.modules import MultiHeadAttention, QKVMultiHeadAttention, StepInfo, Trace, trace_forward

__all__ = [
    "ExplicitAttention",
    "FusedAttention",
    "MultiHeadAttention",
    "QKVMultiHeadAttention",
    "StepInfo",
    "Trace",
    "trace_forward",
]
