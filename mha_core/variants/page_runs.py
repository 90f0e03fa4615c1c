"""The Attention variants page's runs: five kinds of attention with one seed on one input, and decoding with a cache.

* ``run_variants``: MHA (Listing 3.5), GQA, MQA, MLA and SWA built from one ``VariantSpec``, each traced on the same
  input, with its parameter count and its cache measured after prefills of 1, 2, 4 … T tokens.
* ``run_decoding`` / ``run_gpt_decoding``: a module or the shipped GPT fed one token at a time; every call's query
  rows over the cached keys, the cache's length and bytes, and the time per token with and without the cache.

What glue caches; the views draw it. Modules built here are private, so filling their caches changes nothing shared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn

from mha_core.attention.modules import MultiHeadAttention, Trace, trace_forward
from mha_core.gpt.model import GPTModel
from mha_core.variants.cached_generation import decode_steps, private_copy, uncached_seconds
from mha_core.variants.kv_memory import CacheConfig, context_lengths
from mha_core.variants.layers import (
    GroupedQueryAttention,
    MultiHeadAttentionWithSWA,
    MultiHeadLatentAttention,
    cache_bytes,
    held_tokens,
)

KINDS = ("MHA", "GQA", "MQA", "MLA", "SWA")
NAMES = {
    "MHA": "multi-head (Listing 3.5)",
    "GQA": "grouped-query",
    "MQA": "multi-query",
    "MLA": "multi-head latent",
    "SWA": "sliding window",
}


@dataclass(frozen=True, kw_only=True)
class VariantSpec:
    """One module shape for every variant, and each variant's own knob."""

    d_in: int
    d_out: int
    num_heads: int
    context_length: int
    qkv_bias: bool = False
    seed: int = 123
    num_kv_groups: int = 1  # GQA's key/value heads (MQA: 1, MHA: num_heads)
    latent_dim: int = 16  # MLA's cached width
    window: int = 4  # SWA's window

    @property
    def head_dim(self) -> int:
        return self.d_out // self.num_heads

    def kv_heads(self, kind: str) -> int:
        """Key/value heads a kind computes and caches (MLA rebuilds num_heads of them from its latent)."""
        return {"GQA": self.num_kv_groups, "MQA": 1}.get(kind, self.num_heads)

    def cache_config(self) -> CacheConfig:
        """This shape as a one-layer config for the byte formulas, in float32."""
        return CacheConfig(
            name="this module",
            n_layers=1,
            n_heads=self.num_heads,
            head_dim=self.head_dim,
            n_kv_heads=self.num_kv_groups,
            latent_dim=self.latent_dim,
            window=self.window,
            context_length=self.context_length,
            dtype="float32",
        )


def build_variant(spec: VariantSpec, kind: str) -> nn.Module:
    """The kind's module, seeded with ``spec.seed`` before its parameters are made, in eval mode."""
    torch.manual_seed(spec.seed)
    shape = (spec.d_in, spec.d_out, spec.context_length, 0.0, spec.num_heads)
    if kind == "MHA":
        module = MultiHeadAttention(*shape, qkv_bias=spec.qkv_bias)
    elif kind in ("GQA", "MQA"):
        module = GroupedQueryAttention(*shape, num_kv_groups=spec.kv_heads(kind), qkv_bias=spec.qkv_bias)
    elif kind == "MLA":
        module = MultiHeadLatentAttention(*shape, qkv_bias=spec.qkv_bias, latent_dim=spec.latent_dim)
    elif kind == "SWA":
        module = MultiHeadAttentionWithSWA(*shape, qkv_bias=spec.qkv_bias, sliding_window_size=spec.window)
    else:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    return module.eval()


@dataclass(frozen=True, kw_only=True)
class VariantResult:
    kind: str
    trace: Trace  # the uncached forward on the input
    parameters: int
    kv_heads: int
    measured: tuple[tuple[int, int], ...]  # (tokens prefilled, cache bytes measured on the tensors)


@dataclass(frozen=True, kw_only=True)
class VariantsRun:
    spec: VariantSpec
    results: dict[str, VariantResult]
    labels: tuple[str, ...]
    batch_size: int


@torch.no_grad()
def measure_prefills(module: nn.Module, x: torch.Tensor) -> tuple[tuple[int, int], ...]:
    """(tokens, cache bytes) after a fresh prefill of the first 1, 2, 4 … T tokens of ``x`` (b, T, d_in)."""
    found = []
    for tokens in context_lengths(x.shape[1]):
        module.reset_cache()
        module(x[:, :tokens], use_cache=True)
        found.append((tokens, cache_bytes(module)))
    module.reset_cache()
    return tuple(found)


def run_variants(spec: VariantSpec, x: torch.Tensor, labels: list[str]) -> VariantsRun:
    """Every kind on ``x`` (b, T, d_in): its trace, parameters and measured cache."""
    results = {}
    for kind in KINDS:
        module = build_variant(spec, kind)
        results[kind] = VariantResult(
            kind=kind,
            trace=trace_forward(module, x),
            parameters=sum(p.numel() for p in module.parameters()),
            kv_heads=spec.kv_heads(kind),
            measured=measure_prefills(module, x),
        )
    return VariantsRun(spec=spec, results=results, labels=tuple(labels), batch_size=x.shape[0])


# --- decoding one token at a time ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DecodingRun:
    """Calls of one attention with the cache: the prompt, then one token each."""

    source: str  # what decoded, in words
    labels: tuple[str, ...]  # every position's token
    prompt_len: int
    weights: torch.Tensor  # (h, T, T): each call's query rows over the keys cached then; −∞ where it read none
    full_weights: torch.Tensor  # (h, T, T): the uncached forward's weights, for comparison
    cached: tuple[int, ...]  # tokens the cache holds after each call (a window cache: at most its window)
    seen: tuple[int, ...]  # tokens fed so far after each call: the next token's position
    cache_bytes: tuple[int, ...]  # measured after each call (every layer's cache, for a GPT)
    seconds_cached: tuple[float, ...]  # per call, with the cache
    seconds_uncached: tuple[float, ...]  # per call, the whole sequence so far without it
    masks: tuple[torch.Tensor, ...]  # each call's mask (t, s): bottom-right aligned


def assemble(traces: list[Trace], total: int) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Batch element 0's query rows of every call stacked into (h, T, T), −∞ where the call read no key: not in
    the cache (not yet written, or dropped by a window), or in it but masked (causal or outside the window)."""
    heads = traces[0].steps["attn_weights"].shape[1]
    weights = torch.full((heads, total, total), -torch.inf)
    row = 0
    for trace in traces:
        rows = trace.steps["attn_weights"][0]  # (h, t, s): the cache's s keys end at this call's last token
        rows = rows.masked_fill(~trace.steps["mask"].bool(), -torch.inf)  # masked keys: not read, as uncached
        end = row + rows.shape[1]
        weights[:, row:end, end - rows.shape[2] : end] = rows  # a window cache starts after position 0
        row = end
    return weights, tuple(trace.steps["mask"] for trace in traces)


@torch.no_grad()
def run_decoding(
    module: nn.Module,
    x: torch.Tensor,
    labels: list[str],
    prompt_len: int,
    source: str,
    clock: Callable = time.perf_counter,
) -> DecodingRun:
    """``module`` (private: its cache fills) fed ``x`` (b, T, d_in): ``prompt_len`` tokens, then one at a time."""
    total = x.shape[1]
    if not 1 <= prompt_len <= total:
        raise ValueError(f"prompt_len must be in 1..{total} (the tokens of x), got {prompt_len}")
    module.reset_cache()
    traces, cached, seen, nbytes, seconds = [], [], [], [], []
    for start, end in [(0, prompt_len)] + [(t, t + 1) for t in range(prompt_len, total)]:
        began = clock()
        traces.append(trace_forward(module, x[:, start:end], use_cache=True))
        seconds.append(clock() - began)
        cached.append(held_tokens(module))  # a window cache holds its window, not every position
        seen.append(module.ptr_current_pos)
        nbytes.append(cache_bytes(module))
    uncached = []
    for end in range(prompt_len, total + 1):
        began = clock()
        trace_forward(module, x[:, :end])
        uncached.append(clock() - began)
    weights, masks = assemble(traces, total)
    return DecodingRun(
        source=source,
        labels=tuple(labels),
        prompt_len=prompt_len,
        weights=weights,
        full_weights=trace_forward(module, x).steps["attn_weights"][0],
        cached=tuple(cached),
        seen=tuple(seen),
        cache_bytes=tuple(nbytes),
        seconds_cached=tuple(seconds),
        seconds_uncached=tuple(uncached),
        masks=masks,
    )


@torch.no_grad()
def run_gpt_decoding(
    model: GPTModel, prompt_ids: list[int], new_tokens: int, layer: int, labels_of: Callable[[list[int]], list[str]]
) -> DecodingRun:
    """Greedy cached decoding on a private copy of ``model``; block ``layer``'s att traced at every call."""
    if not 0 <= layer < model.cfg["n_layers"]:
        raise ValueError(f"layer {layer} does not exist: this model has layers 0..{model.cfg['n_layers'] - 1}")
    private = private_copy(model)
    steps = decode_steps(private, torch.tensor([prompt_ids]), new_tokens, trace_layer=layer)
    ids = list(prompt_ids) + [s.token_ids[0] for s in steps[1:]]
    weights, masks = assemble([s.trace for s in steps], len(ids))
    return DecodingRun(
        source=f"the shipped GPT, layer {layer}",
        labels=tuple(labels_of(ids)),
        prompt_len=len(prompt_ids),
        weights=weights,
        full_weights=model.trace_layer(torch.tensor([ids]), layer).steps["attn_weights"][0],
        cached=tuple(s.cached for s in steps),
        seen=tuple(s.cached for s in steps),  # no window: every token fed stays cached
        cache_bytes=tuple(s.cache_bytes for s in steps),
        seconds_cached=tuple(s.seconds for s in steps),
        seconds_uncached=tuple(uncached_seconds(model, ids, len(prompt_ids))),
        masks=tuple(s.trace.steps["mask"] for s in steps),
    )
