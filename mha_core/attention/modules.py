"""The two multi-head attention modules the app runs and shows, and the trace of their forward pass.

* ``MultiHeadAttention``: causal self-attention, Listing 3.5 of "Build a Large Language
  Model (From Scratch)", section 3.6.2. Parameters are created in the book's order
  (W_query, W_key, W_value, out_proj), so ``torch.manual_seed(123)`` reproduces the book.
* ``QKVMultiHeadAttention``: the continuiti library's general module: separate query,
  key and value inputs, a boolean mask (True = may attend) and a pluggable attention.
* ``trace_forward(module, *inputs, **kwargs)``: every intermediate of one forward pass, by name (a ``Trace``).

Both modules take ``recorder=`` in ``forward`` and hand it each intermediate as they compute it, so the trace is
this very code path, not a re-implementation: ``trace.output`` is bitwise ``module(*inputs)`` (in eval mode). Outside
tracing the recorder is a no-op. The trace is returned, never stored on the module, so sessions can share a module.

Axis letters: b batch, t/i query position, s/j key position, h heads, d head_dim.
"""

from __future__ import annotations

import inspect
import linecache
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import torch
import torch.nn as nn

from mha_core.attention import masks
from mha_core.attention.kernels import Attention, ExplicitAttention, Recorder, no_record
from mha_core.attention.positions import PositionEncoding


def check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_divisible_heads(width_name: str, width: int, num_heads: int) -> None:
    check_positive_int(width_name, width)
    check_positive_int("num_heads", num_heads)
    if width % num_heads != 0:
        raise ValueError(
            f"{width_name}={width} must be divisible by num_heads={num_heads} "
            f"(nearest valid: {max(num_heads, width // num_heads * num_heads)}"
            f" or {(width // num_heads + 1) * num_heads})"
        )


def check_dropout(p) -> None:
    if not (isinstance(p, (int, float)) and 0.0 <= float(p) < 1.0):
        raise ValueError(f"dropout must be in [0, 1), got {p!r}")


def check_input(name: str, x: torch.Tensor, width: int) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 3:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must have shape (batch, tokens, {width}), got {shape}")
    if x.shape[-1] != width:
        raise ValueError(f"{name} has embedding size {x.shape[-1]}, expected {width}: shape {tuple(x.shape)}")


def split_heads(x: torch.Tensor, num_heads: int, name: str, rec: Recorder) -> torch.Tensor:
    """(b, t, h·d) -> view (b, t, h, d) -> transpose (b, h, t, d), recording both."""
    b, t, width = x.shape
    x = rec(f"{name}_split", x.view(b, t, num_heads, width // num_heads), f"{name} split into heads")  # (b, t, h, d)
    return rec(f"{name}_heads", x.transpose(1, 2), f"{name} with heads moved before tokens")  # (b, h, t, d)


def merge_heads(context: torch.Tensor, rec: Recorder) -> torch.Tensor:
    """(b, h, t, d) -> transpose (b, t, h, d) -> contiguous view (b, t, h·d), recording both."""
    b, num_heads, num_tokens, head_dim = context.shape
    context = rec("context_transposed", context.transpose(1, 2), "tokens back in front of heads")  # (b, t, h, d)
    context = context.contiguous().view(b, num_tokens, num_heads * head_dim)  # (b, t, h·d)
    return rec("context", context, "heads concatenated, before out_proj")


def check_room(module: nn.Module, num_tokens: int, use_cache: bool) -> int:
    """The position of the first of ``num_tokens`` new tokens (0 without the cache); a ValueError when the cache
    and the new tokens together would pass context_length."""
    start = module.ptr_current_pos if use_cache else 0
    if start + num_tokens > module.context_length:
        held = f"the cache holds {start} and " if use_cache else ""
        raise ValueError(
            f"{held}input has {num_tokens} tokens, more than context_length={module.context_length}"
            + (f" in all ({start + num_tokens}); reset_cache() first" if use_cache else "")
        )
    return start


def cache_keys_and_values(module: nn.Module, keys: torch.Tensor, values: torch.Tensor, rec: Recorder):
    """The cache write and read, as trace steps: append (b, h', t, d) keys and values to ``module.cache_k`` and
    ``cache_v`` along the tokens, move ``ptr_current_pos`` on, and hand back everything cached (b, h', s + t, d)."""
    before = module.cache_k if module.cache_k is not None else keys[:, :, :0]  # (b, h', s, d); s = 0 at first
    rec("cache_keys_before", before, "cache read: the keys cached by earlier calls")
    module.cache_k = keys if module.cache_k is None else torch.cat([module.cache_k, keys], dim=2)  # (b, h', s+t, d)
    module.cache_v = values if module.cache_v is None else torch.cat([module.cache_v, values], dim=2)
    module.ptr_current_pos += keys.shape[2]
    keys = rec("cache_keys", module.cache_k, "cache write: earlier keys and this call's, all the queries read")
    return keys, rec("cache_values", module.cache_v, "cache write: earlier values and this call's")


class MultiHeadAttention(nn.Module):
    """Causal multi-head self-attention, Listing 3.5. ``forward``: (b, t, d_in) -> (b, t, d_out).

    ``positions`` (``positions.POSITION_KINDS``; None is Listing 3.5 as printed, bit for bit): learned or sinusoidal
    embeddings added to x, RoPE's rotated queries and keys (base ``rope_base``), or ALiBi's bias on the scores.
    """

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, positions=None, rope_base=10_000
    ):
        super().__init__()
        check_positive_int("d_in", d_in)
        check_divisible_heads("d_out", d_out, num_heads)
        check_positive_int("context_length", context_length)
        check_dropout(dropout)
        self.d_in = d_in
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", masks.book_causal_buffer(context_length))  # 1 = blocked, the book's way
        self.attention = ExplicitAttention()
        # The KV cache, filled only by forward(..., use_cache=True): (b, h, s, d) each, as the book's bonus code
        # (ch04/03_kv-cache) keeps it. A module shared between sessions is never run with use_cache.
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0  # tokens in the cache: the position of the next query
        self.positions = None  # after the book's parameters, so torch.manual_seed(123) still makes them
        if positions not in (None, "none"):
            self.positions = PositionEncoding(
                positions, context_length=context_length, d_in=d_in, num_heads=num_heads, head_dim=self.head_dim,
                rope_base=rope_base,
            )  # fmt: skip

    def reset_cache(self) -> None:
        """Empty the KV cache before a new sequence."""
        self.cache_k, self.cache_v, self.ptr_current_pos = None, None, 0

    def forward(
        self,
        x: torch.Tensor,
        *,
        use_cache: bool = False,
        recorder: Recorder | None = None,
        attention: Attention | None = None,
    ):
        """``attention`` swaps the attention step (for example a different softmax scale).

        ``use_cache=True``: ``x`` holds the next tokens only; their keys and values are appended to the cache and
        the queries attend to every cached key (the causal mask's rows at the tokens' positions: bottom-right).
        """
        rec = recorder or no_record
        check_input("x", x, self.d_in)
        b, num_tokens, _ = x.shape
        start = check_room(self, num_tokens, use_cache)  # the first new token's position
        rec("x", x, "the input embeddings")
        positions = self.positions
        if positions is not None:
            x = positions.embed(x, start, rec)  # (b, t, d_in): learned or sinusoidal rows added
        queries = rec("queries", self.W_query(x), "queries = W_query(x)")  # (b, t, d_out)
        keys = rec("keys", self.W_key(x), "keys = W_key(x)")  # (b, t, d_out)
        values = rec("values", self.W_value(x), "values = W_value(x)")  # (b, t, d_out)
        queries = split_heads(queries, self.num_heads, "queries", rec)  # (b, h, t, d)
        keys = split_heads(keys, self.num_heads, "keys", rec)  # (b, h, t, d)
        values = split_heads(values, self.num_heads, "values", rec)  # (b, h, t, d)
        if positions is not None:  # RoPE turns queries and keys at their own positions; keys cached turned
            queries, keys = positions.rotate("queries", queries, start, rec), positions.rotate("keys", keys, start, rec)
        if use_cache:
            keys, values = cache_keys_and_values(self, keys, values, rec)  # (b, h, start + t, d)
        end = start + num_tokens
        allowed = masks.from_blocked(self.mask[start:end, :end])  # (t, start + t), True = may attend
        allowed = rec("mask", allowed, "causal mask as used, sliced to the tokens (True = may attend)")
        dropout_p = self.dropout.p if self.training else 0.0
        extra = {}
        if positions is not None and positions.kind == "alibi":
            query_positions = torch.arange(start, end, device=x.device)  # (t,)
            extra["score_bias"] = positions.score_bias(query_positions, torch.arange(end, device=x.device), rec)
        context = (attention or self.attention)(queries, keys, values, allowed, dropout_p, rec, **extra)  # (b,h,t,d)
        context = merge_heads(context, rec)  # (b, t, d_out)
        return rec("output", self.out_proj(context), "output = out_proj(context)")  # (b, t, d_out)


class QKVMultiHeadAttention(nn.Module):
    """General multi-head attention after continuiti: (b, i, E), (b, j, E), (b, j, E) -> (b, i, E).

    ``attn_mask``: bool, (b, i, j) or (i, j), True = may attend. Unlike continuiti,
    ``dropout_p`` is applied to the attention weights in training mode.

    ``attention`` is called the continuiti way, with keywords:
    ``attention(query=..., key=..., value=..., attn_mask=...)``, so any continuiti-style callable plugs in.
    ``dropout_p=`` and ``recorder=`` are passed only when its signature accepts them (read once per callable).
    """

    def __init__(self, hidden_dim, n_heads, attention: Attention | None = None, dropout_p=0.0, bias=True):
        super().__init__()
        check_divisible_heads("hidden_dim", hidden_dim, n_heads)
        check_dropout(dropout_p)
        self.hidden_dim = hidden_dim
        self.n_heads = n_heads
        self.head_dim = hidden_dim // n_heads
        self.dropout_p = float(dropout_p)
        self.bias = bias
        self.attention = attention if attention is not None else ExplicitAttention()
        self._extra_keywords = _accepted_keywords(self.attention)
        self._inspected = (self.attention,)  # a tuple: an nn.Module here would be registered twice
        if self.dropout_p > 0 and "dropout_p" not in self._extra_keywords:
            raise ValueError(
                f"dropout_p={self.dropout_p} needs an attention that accepts dropout_p; {self.attention!r} "
                "takes only (query, key, value, attn_mask)"
            )
        self.query_project = nn.Linear(hidden_dim, hidden_dim, bias=bias)
        self.key_project = nn.Linear(hidden_dim, hidden_dim, bias=bias)
        self.value_project = nn.Linear(hidden_dim, hidden_dim, bias=bias)
        self.out_project = nn.Linear(hidden_dim, hidden_dim, bias=bias)

    def forward(self, query, key, value, attn_mask=None, *, recorder: Recorder | None = None):
        rec = recorder or no_record
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            check_input(name, tensor, self.hidden_dim)
        if not query.shape[0] == key.shape[0] == value.shape[0]:
            raise ValueError(f"batch sizes differ: query {query.shape[0]}, key {key.shape[0]}, value {value.shape[0]}")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key has {key.shape[1]} tokens but value has {value.shape[1]}")
        batch_size, tgt_len, src_len = query.shape[0], query.shape[1], key.shape[1]
        queries = rec("queries", self.query_project(query), "queries = query_project(query)")  # (b, i, E)
        keys = rec("keys", self.key_project(key), "keys = key_project(key)")  # (b, j, E)
        values = rec("values", self.value_project(value), "values = value_project(value)")  # (b, j, E)
        queries = split_heads(queries, self.n_heads, "queries", rec)  # (b, h, i, d)
        keys = split_heads(keys, self.n_heads, "keys", rec)  # (b, h, j, d)
        values = split_heads(values, self.n_heads, "values", rec)  # (b, h, j, d)
        if attn_mask is not None:
            masks.check_mask(attn_mask, batch_size, tgt_len, src_len)
            attn_mask = attn_mask.to(query.device)
            if attn_mask.ndim == 3:
                attn_mask = attn_mask.unsqueeze(1)  # (b, 1, i, j): one mask for every head
            attn_mask = rec("mask", attn_mask, "attention mask as used (True = may attend)")
        if self.attention is not self._inspected[0]:  # replaced after construction: read its signature again
            self._extra_keywords, self._inspected = _accepted_keywords(self.attention), (self.attention,)
        extra = {"dropout_p": self.dropout_p if self.training else 0.0, "recorder": rec}
        extra = {name: value for name, value in extra.items() if name in self._extra_keywords}
        context = self.attention(query=queries, key=keys, value=values, attn_mask=attn_mask, **extra)  # (b, h, i, d)
        context = merge_heads(context, rec)  # (b, i, E)
        return rec("output", self.out_project(context), "output = out_project(context)")  # (b, i, E)


def _accepted_keywords(attention) -> frozenset[str]:
    """Which of dropout_p and recorder ``attention`` accepts as keywords (all of them with ``**kwargs``)."""
    optional = frozenset({"dropout_p", "recorder"})
    try:
        parameters = inspect.signature(attention).parameters.values()
    except (TypeError, ValueError):  # no signature to read (some builtins): the four continuiti keywords only
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return optional
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return optional & named


# --- the trace of one forward pass -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StepInfo:
    """What a step holds and where it was computed."""

    description: str
    source: str  # the line of the module's source that produced the tensor
    filename: str
    lineno: int
    shape: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Trace:
    """One forward pass: its output and every intermediate the module recorded, with where each was computed."""

    output: torch.Tensor
    steps: Mapping[str, torch.Tensor]  # step name -> tensor, in data-flow order
    info: Mapping[str, StepInfo]

    def numpy(self, name: str) -> np.ndarray:
        """A step as a CPU numpy array (float32 for half-precision dtypes numpy lacks)."""
        tensor = self.steps[name].detach()
        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.float()
        return tensor.cpu().numpy()

    def to_npz_dict(self) -> dict[str, np.ndarray]:
        """Every step under its own name, ready for ``np.savez``."""
        return {name: self.numpy(name) for name in self.steps}


class _Recorder:
    def __init__(self):
        self.steps: dict[str, torch.Tensor] = {}
        self.info: dict[str, StepInfo] = {}

    def __call__(self, name: str, tensor: torch.Tensor, description: str) -> torch.Tensor:
        frame = sys._getframe(1)  # the line that computed `tensor` and passed it here
        source = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        self.steps[name] = tensor.detach()
        self.info[name] = StepInfo(
            description=description,
            source=source,
            filename=frame.f_code.co_filename,
            lineno=frame.f_lineno,
            shape=tuple(tensor.shape),
        )
        return tensor


def trace_forward(module: torch.nn.Module, *inputs, **kwargs) -> Trace:
    """Run ``module`` once and return its output with every intermediate, by name."""
    recorder = _Recorder()
    with torch.no_grad():
        output = module(*inputs, recorder=recorder, **kwargs)
    return Trace(output=output, steps=MappingProxyType(recorder.steps), info=MappingProxyType(recorder.info))
