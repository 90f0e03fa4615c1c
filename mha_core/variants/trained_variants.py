"""A trained GPT converted to GQA, MQA or sliding windows with no retraining, and what each conversion costs.

The variants page builds its modules from a seed; a trained model shows what a conversion keeps. Each conversion is
a private copy of the given ``GPTModel`` (never changed) whose every block's ``att`` is replaced:

* GQA with ``g`` key/value heads: each group's K and V projection rows are the mean of its heads' rows, as Ainslie
  et al. (2023, "GQA") initialise a model before uptraining; queries and ``out_proj`` are kept. ``g`` = n_heads is
  the original (each group one head), ``g`` = 1 is MQA.
* A sliding window of width ``w`` on every layer: each query reads itself and the w − 1 tokens before it, the
  weights unchanged; ``w`` ≥ context_length is the original.

``score`` measures one conversion (held-out loss, the repeated-English probe's copy losses and best induction head)
and its KV cache by ``kv_memory``'s one formula (float32, batch 1). Nothing is uptrained here.

Axis letters: h heads, g key/value heads, d head_dim, E emb_dim (d_in).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from mha_core.gpt import data as gpt_data
from mha_core.gpt import english_probe
from mha_core.gpt.evaluation import mean_loss
from mha_core.gpt.model import GPTModel
from mha_core.variants.kv_memory import DTYPE_BYTES, kv_bytes, swa_bytes
from mha_core.variants.layers import GroupedQueryAttention, MultiHeadAttentionWithSWA

KINDS = ("MHA", "GQA", "MQA", "SWA")
HELDOUT_WINDOWS = 32  # held-out windows of context_length tokens scored per conversion: 4,096 bytes at 128
DTYPE = "float32"  # the converted model computes, and caches, in float32


@dataclass(frozen=True, kw_only=True)
class Conversion:
    """One conversion of a trained GPT: ``kv_heads`` key/value heads per layer, and a window (None: every token)."""

    kind: str  # one of KINDS
    kv_heads: int
    window: int | None = None

    @property
    def label(self) -> str:
        if self.kind == "SWA":
            return f"SWA, window {self.window}"
        return self.kind if self.kind in ("MHA", "MQA") else f"GQA, {self.kv_heads} K/V heads"


def conversions(cfg: dict, windows: tuple[int, ...] | None = None) -> tuple[Conversion, ...]:
    """The page's set for a model config: MHA, GQA at each divisor of n_heads strictly between 1 and n_heads, MQA,
    and windows (by default the powers of two from 16 below the context)."""
    heads, context = cfg["n_heads"], cfg["context_length"]
    if windows is None:
        windows = tuple(2**k for k in range(4, max(4, math.ceil(math.log2(context)))))
    groups = [g for g in range(heads - 1, 1, -1) if heads % g == 0]
    return (
        Conversion(kind="MHA", kv_heads=heads),
        *(Conversion(kind="GQA", kv_heads=g) for g in groups),
        Conversion(kind="MQA", kv_heads=1),
        *(Conversion(kind="SWA", kv_heads=heads, window=w) for w in windows),
    )


def pool_heads(weight: torch.Tensor, num_heads: int, groups: int) -> torch.Tensor:
    """(h·d, ...) projection rows -> (g·d, ...): each group's rows the mean of its h / g heads' rows (Ainslie et al.).

    Groups are consecutive heads, as ``GroupedQueryAttention`` repeats K/V head j for query heads j·h/g … .
    """
    if num_heads % groups:
        raise ValueError(f"num_heads={num_heads} must be a multiple of groups={groups}")
    rows = weight.shape[0]
    head_dim = rows // num_heads
    per_group = weight.reshape(groups, num_heads // groups, head_dim, *weight.shape[1:])  # (g, h/g, d, ...)
    return per_group.mean(dim=1).reshape(groups * head_dim, *weight.shape[1:])  # (g, d, ...) -> (g·d, ...)


def _pooled_linear(source: nn.Linear, target: nn.Linear, num_heads: int, groups: int) -> None:
    """Fill ``target`` (g·d rows) with ``source``'s (h·d rows) weights, and bias, pooled per group."""
    target.weight.copy_(pool_heads(source.weight.detach().float(), num_heads, groups))  # (g·d, E)
    if source.bias is not None:
        target.bias.copy_(pool_heads(source.bias.detach().float(), num_heads, groups))  # (g·d,)


def _copy_linear(source: nn.Linear, target: nn.Linear) -> None:
    target.load_state_dict({k: v.detach().float() for k, v in source.state_dict().items()})


def _grouped_att(att: nn.Module, groups: int) -> GroupedQueryAttention:
    """A block's ``MultiHeadAttention`` as ``GroupedQueryAttention`` with ``groups`` mean-pooled K/V heads."""
    new = GroupedQueryAttention(
        att.d_in, att.d_out, att.context_length, att.dropout.p, att.num_heads, groups, att.W_query.bias is not None
    )
    _copy_linear(att.W_query, new.W_query)
    _copy_linear(att.out_proj, new.out_proj)
    _pooled_linear(att.W_key, new.W_key, att.num_heads, groups)
    _pooled_linear(att.W_value, new.W_value, att.num_heads, groups)
    return new.to(att.W_query.weight.device)


def _windowed_att(att: nn.Module, window: int) -> MultiHeadAttentionWithSWA:
    """A block's ``MultiHeadAttention`` with the same weights, each query reading the last ``window`` tokens."""
    new = MultiHeadAttentionWithSWA(
        att.d_in, att.d_out, att.context_length, att.dropout.p, att.num_heads, att.W_query.bias is not None, window
    )
    for name in ("W_query", "W_key", "W_value", "out_proj"):
        _copy_linear(getattr(att, name), getattr(new, name))
    return new.to(att.W_query.weight.device)


@torch.no_grad()
def convert(model: GPTModel, conversion: Conversion) -> GPTModel:
    """A private float32 copy of ``model`` in eval mode with every block's attention converted; ``model`` unchanged."""
    check(model, conversion)
    converted = copy.deepcopy(model).float().eval()
    for block in converted.trf_blocks:
        if conversion.kind == "SWA":
            block.att = _windowed_att(block.att, conversion.window)
        else:
            block.att = _grouped_att(block.att, conversion.kv_heads)
    return converted.eval()


def check(model: GPTModel, conversion: Conversion) -> None:
    """A ValueError naming the numbers when ``conversion`` does not fit ``model``."""
    heads = model.cfg["n_heads"]
    if conversion.kind not in KINDS:
        raise ValueError(f"kind {conversion.kind!r} is not one of {', '.join(KINDS)}")
    expected = {"MHA": heads, "MQA": 1, "SWA": heads}.get(conversion.kind)
    if expected is not None and conversion.kv_heads != expected:
        raise ValueError(f"{conversion.kind} on this model has kv_heads={expected}, got {conversion.kv_heads}")
    if not 1 <= conversion.kv_heads <= heads or heads % conversion.kv_heads:
        raise ValueError(f"n_heads={heads} must be a multiple of kv_heads={conversion.kv_heads}")
    if (conversion.kind == "SWA") != (conversion.window is not None):
        raise ValueError(f"a window belongs to SWA alone, got {conversion.kind} with window {conversion.window}")
    if conversion.window is not None and conversion.window < 1:
        raise ValueError(f"window must be at least 1, got {conversion.window}")


def cache_bytes_at(cfg: dict, conversion: Conversion, tokens: int) -> int:
    """The converted model's KV cache at ``tokens`` tokens, batch 1, float32, by ``kv_memory``'s formula."""
    common = {"batch": 1, "head_dim": cfg["emb_dim"] // cfg["n_heads"], "bytes_per_elem": DTYPE_BYTES[DTYPE]}
    if conversion.window is not None:
        return swa_bytes(
            tokens=tokens, n_layers=cfg["n_layers"], n_kv_heads=conversion.kv_heads, window=conversion.window, **common
        )
    return kv_bytes(tokens=tokens, layers=cfg["n_layers"], n_kv_heads=conversion.kv_heads, **common)


@dataclass(frozen=True, kw_only=True)
class VariantScore:
    """What one conversion keeps of the trained model, and what its cache costs."""

    conversion: Conversion
    heldout_loss: float  # nats per byte on the held-out windows scored
    first_copy_loss: float  # the repeated-English probe: nats per token on each sentence's first copy
    second_copy_loss: float  # and on its second copy ("the copy loss"), which induction heads make small
    copy_accuracy: float  # share of the second copy's tokens that the greedy guess gets right
    best_induction: float  # the strongest head's mean weight at the induction offset on the second copies
    cache_bytes_per_token: int  # every layer's K and V for one token (a window's cache stops growing at w tokens)
    cache_bytes_full: int  # at the model's full context


@dataclass(frozen=True, kw_only=True)
class Heldout:
    """The held-out text every conversion is scored on: (n, T + 1) consecutive windows of the held-out bytes."""

    windows: torch.Tensor  # (n, T + 1) int64

    @property
    def tokens_scored(self) -> int:
        return self.windows.shape[0] * (self.windows.shape[1] - 1)


def heldout(tokenizer, context_length: int, max_windows: int = HELDOUT_WINDOWS) -> Heldout:
    """``max_windows`` of the held-out text's consecutive windows, evenly spaced through it (the record scores every
    byte; a few windows keep a conversion's score to about a second on two cores, and spacing them out keeps the
    text's mix, where its first windows alone scored well below the whole)."""
    _, text = gpt_data.corpus()
    every = gpt_data.heldout_windows(gpt_data.encode(tokenizer, text), context_length)  # (N, T + 1)
    chosen = torch.linspace(0, every.shape[0] - 1, min(max_windows, every.shape[0])).round().long()  # (n,)
    return Heldout(windows=every[chosen])  # (n, T + 1)


@torch.no_grad()
def score(
    model: GPTModel, tokenizer, conversion: Conversion, held: Heldout, sentences=english_probe.SENTENCES
) -> VariantScore:
    """``model`` converted (a private copy) and measured: held-out loss, the English probe (on ``sentences``, by
    default all of them), the cache by formula."""
    converted = convert(model, conversion)
    probe = english_probe.score_repeats(converted, tokenizer, sentences)
    cfg = converted.cfg
    return VariantScore(
        conversion=conversion,
        heldout_loss=mean_loss(converted, held.windows),
        first_copy_loss=probe.first_copy_loss,
        second_copy_loss=probe.second_copy_loss,
        copy_accuracy=probe.second_copy_accuracy,
        best_induction=probe.best_induction,
        cache_bytes_per_token=cache_bytes_at(cfg, conversion, 1),
        cache_bytes_full=cache_bytes_at(cfg, conversion, cfg["context_length"]),
    )


@dataclass(frozen=True, kw_only=True)
class TrainedVariants:
    """Every conversion's score on one model, and what they were scored on."""

    scores: tuple[VariantScore, ...]
    n_layers: int
    n_heads: int
    head_dim: int
    context_length: int
    heldout_windows: int  # windows of context_length scored for the held-out loss
    heldout_tokens: int
    sentences: int  # repeated-English sentences, each read twice
    periods: tuple[int, ...]  # each sentence's tokens and its space: how far back the induction head reads, plus 1

    def of(self, label: str) -> VariantScore:
        return next(s for s in self.scores if s.conversion.label == label)


def assemble(
    model: GPTModel, tokenizer, scores: tuple[VariantScore, ...], held: Heldout, sentences=english_probe.SENTENCES
) -> TrainedVariants:
    """The scores with the model's shape and what they were measured on."""
    cfg = model.cfg
    return TrainedVariants(
        scores=scores,
        n_layers=cfg["n_layers"],
        n_heads=cfg["n_heads"],
        head_dim=cfg["emb_dim"] // cfg["n_heads"],
        context_length=cfg["context_length"],
        heldout_windows=held.windows.shape[0],
        heldout_tokens=held.tokens_scored,
        sentences=len(sentences),
        periods=tuple(len(tokenizer.encode(sentence)) + 1 for sentence in sentences),
    )


def score_all(model: GPTModel, tokenizer, chosen: tuple[Conversion, ...] | None = None) -> TrainedVariants:
    """Every conversion of ``conversions(model.cfg)`` (or ``chosen``) scored on the same held-out windows."""
    held = heldout(tokenizer, model.cfg["context_length"])
    chosen = conversions(model.cfg) if chosen is None else chosen
    return assemble(model, tokenizer, tuple(score(model, tokenizer, c, held) for c in chosen), held)
