"""Generation one token at a time with a KV cache, on the book's GPTModel, as ch04/03_kv-cache does it.

The cache lives in each block's ``att`` (``use_cache=True``, ``reset_cache()``), so ``gpt/model.py`` is untouched: this
module runs a model's parts itself, with the positions of the new tokens counted by the first block's cache. A
model run here is changed (its caches fill): run a private copy (``private_copy``), never a shared one.

* ``generate_text_simple`` (chapter 4) and ``generate_text_simple_cached``: the same greedy tokens, one with
  the whole sequence each step, one with the new token only.
* ``decode_steps``: every step's logits, cache length and bytes and, for one layer, the trace of its ``att``
  (the new query row over the cached keys, the cache's read and write).
* ``with_attention``: the same GPT with a variant (``variants``) in every block, for decoding with them.

Axis letters: b batch, T tokens, E emb_dim, V vocabulary.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn

from mha_core.attention.modules import Trace, trace_forward
from mha_core.gpt.model import COMPUTE_DTYPE, GPTModel
from mha_core.variants.layers import cache_bytes


def private_copy(model: nn.Module) -> nn.Module:
    """A copy to fill with caches, in eval mode; the shared original is never changed."""
    return copy.deepcopy(model).eval()


def reset_kv_cache(model: GPTModel) -> None:
    """Empty every block's cache."""
    for block in model.trf_blocks:
        block.att.reset_cache()


def cached_tokens(model: GPTModel) -> int:
    """How many tokens the caches hold (every block holds as many)."""
    return model.trf_blocks[0].att.ptr_current_pos


def _check_float32(model: GPTModel) -> None:
    first = next(model.parameters())
    if first.dtype != COMPUTE_DTYPE:
        raise ValueError(f"cached decoding needs float32 weights (blocks are not copied per call), got {first.dtype}")


@torch.no_grad()
def forward_cached(model: GPTModel, in_idx: torch.Tensor, trace_layer: int | None = None):
    """(logits (b, T, V), the trace of block ``trace_layer``'s att or None) for the next T tokens, caches filled.

    Positions continue from the cache (``cached_tokens``), as the book's ``current_pos`` does.
    """
    _check_float32(model)
    model.check_ids(in_idx)
    start = cached_tokens(model)
    if start + in_idx.shape[1] > model.cfg["context_length"]:
        raise ValueError(
            f"the cache holds {start} tokens and {in_idx.shape[1]} more would pass context_length="
            f"{model.cfg['context_length']}"
        )
    positions = torch.arange(start, start + in_idx.shape[1], device=in_idx.device)  # (T,)
    x = model.drop_emb(model.tok_emb(in_idx) + model.pos_emb(positions))  # (b, T, E)
    trace = None
    for layer, block in enumerate(model.trf_blocks):
        if layer == trace_layer:
            trace = trace_forward(block.att, block.norm1(x), use_cache=True)
            attended = trace.output  # (b, T, E)
        else:
            attended = block.att(block.norm1(x), use_cache=True)  # (b, T, E)
        x = x + block.drop_shortcut(attended)  # (b, T, E)
        x = x + block.drop_shortcut(block.ff(block.norm2(x)))  # (b, T, E)
    return model.head(x), trace  # (b, T, V)


@torch.no_grad()
def generate_text_simple(model: GPTModel, idx: torch.Tensor, max_new_tokens: int, context_size: int) -> torch.Tensor:
    """Chapter 4's greedy generation: the whole (cropped) sequence through the model for every new token."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -context_size:])  # (b, T, V)
        idx = torch.cat([idx, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)  # (b, T + 1)
    return idx


@torch.no_grad()
def generate_text_simple_cached(model: GPTModel, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """The same greedy tokens with the cache: the prompt once, then only each new token."""
    reset_kv_cache(model)
    logits, _ = forward_cached(model, idx)  # (b, T, V)
    for _ in range(max_new_tokens):
        next_idx = logits[:, -1].argmax(dim=-1, keepdim=True)  # (b, 1)
        idx = torch.cat([idx, next_idx], dim=1)  # (b, T + 1)
        logits, _ = forward_cached(model, next_idx)  # (b, 1, V)
    return idx


@dataclass(frozen=True, kw_only=True)
class DecodeStep:
    """One call of the model during cached decoding: the prompt (step 0) or one new token."""

    token_ids: tuple[int, ...]  # what went in
    logits: torch.Tensor  # (b, T, V) for those tokens
    cached: int  # tokens in the cache after the call
    cache_bytes: int  # bytes every block's cache holds after the call, measured
    seconds: float  # wall time of the call
    trace: Trace | None  # the traced layer's att: new query rows over every cached key


@torch.no_grad()
def decode_steps(
    model: GPTModel,
    prompt: torch.Tensor,
    new_tokens: int,
    trace_layer: int | None = 0,
    clock: Callable = time.perf_counter,
) -> list[DecodeStep]:
    """Greedy cached decoding of ``new_tokens`` after ``prompt`` (1, T), one DecodeStep per call."""
    reset_kv_cache(model)
    steps, ids = [], prompt
    for _ in range(new_tokens + 1):
        began = clock()
        logits, trace = forward_cached(model, ids, trace_layer)  # (1, T, V)
        seconds = clock() - began
        steps.append(
            DecodeStep(
                token_ids=tuple(ids[0].tolist()),
                logits=logits,
                cached=cached_tokens(model),
                cache_bytes=cache_bytes(model),
                seconds=seconds,
                trace=trace,
            )
        )
        ids = logits[:, -1:].argmax(dim=-1)  # (1, 1)
    return steps


@torch.no_grad()
def uncached_seconds(
    model: GPTModel, token_ids: list[int], prompt_len: int, clock: Callable = time.perf_counter
) -> list[float]:
    """The time of each step without the cache: the whole sequence so far through the model, for each new token."""
    times = []
    for end in range(prompt_len, len(token_ids) + 1):
        idx = torch.tensor([token_ids[:end]])  # (1, T)
        began = clock()
        model(idx)
        times.append(clock() - began)
    return times


def with_attention(cfg: dict, make_attention: Callable[[dict], nn.Module], seed: int = 123) -> GPTModel:
    """The book's GPT (seeded, eval mode) with ``make_attention(cfg)`` as every block's ``att``."""
    torch.manual_seed(seed)
    model = GPTModel(cfg)
    for block in model.trf_blocks:
        block.att = make_attention(cfg)
    return model.eval()


@torch.no_grad()
def decode_module(module: nn.Module, x: torch.Tensor, prompt_len: int) -> list[Trace]:
    """An attention module fed ``x`` (b, T, d_in) with the cache: the first ``prompt_len`` tokens, then one at a time.

    One trace per call; their outputs joined equal the uncached forward on all of ``x``.
    """
    if not 1 <= prompt_len <= x.shape[1]:
        raise ValueError(f"prompt_len must be in 1..{x.shape[1]} (the tokens of x), got {prompt_len}")
    module.reset_cache()
    traces = [trace_forward(module, x[:, :prompt_len], use_cache=True)]
    for t in range(prompt_len, x.shape[1]):
        traces.append(trace_forward(module, x[:, t : t + 1], use_cache=True))  # (b, 1, d_in) in
    return traces
