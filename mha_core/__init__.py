"""Multi-head attention, traced step by step. Torch only: no streamlit, no plotly."""

from .attention import ExplicitAttention, FusedAttention
from .modules import MultiHeadAttention, QKVMultiHeadAttention, StepInfo, Trace, trace_forward

__all__ = [
    "ExplicitAttention",
    "FusedAttention",
    "MultiHeadAttention",
    "QKVMultiHeadAttention",
    "StepInfo",
    "Trace",
    "trace_forward",
]
