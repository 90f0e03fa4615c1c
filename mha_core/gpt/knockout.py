"""Knocking heads out: a GPT's forward pass with chosen heads silenced, the test that a circuit is causal.

A head is knocked out by replacing its slice of the context (the heads concatenated, before ``out_proj``) with zeros,
or with its mean over the text's positions (mean ablation: the head still adds its average, so what is lost is
what it reads, not a constant offset). Nothing is stored on the model, which is shared: each block's attention is
traced on its real input and ``out_proj`` applied to the edited context, the rest of the block as ``GPTModel`` runs
it. With no heads knocked out the logits are ``model(ids)``'s, within rounding.

Axis letters: L layers, b batch, h heads, T tokens, d head_dim, E emb_dim, V vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from mha_core.attention.modules import trace_forward
from mha_core.gpt.model import GPTModel

MODES = ("zero", "mean")


@dataclass(frozen=True, kw_only=True)
class KnockedOut:
    """One forward pass with heads knocked out."""

    logits: torch.Tensor  # (b, T, V)
    weights: torch.Tensor | None  # (L, b, h, T, T) every layer's softmax weights on its (changed) input; None when
    # not asked for (writing needs only the logits)


def check_heads(model: GPTModel, heads: Iterable[tuple[int, int]]) -> frozenset[tuple[int, int]]:
    """The (layer, head) pairs as a set; a ValueError names any that the model does not have."""
    layers, per_layer = model.cfg["n_layers"], model.cfg["n_heads"]
    chosen = frozenset((int(layer), int(head)) for layer, head in heads)
    bad = sorted((layer, head) for layer, head in chosen if not (0 <= layer < layers and 0 <= head < per_layer))
    if bad:
        raise ValueError(f"heads {bad} do not exist: this model has layers 0..{layers - 1}, heads 0..{per_layer - 1}")
    return chosen


@torch.no_grad()
def forward_knocked_out(
    model: GPTModel,
    ids: torch.Tensor,
    heads: Iterable[tuple[int, int]] = (),
    mode: str = "zero",
    *,
    keep_weights: bool = True,
) -> KnockedOut:
    """Logits and attention weights of ``model`` on ``ids`` (b, T) with ``heads`` ((layer, head) pairs) silenced."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    chosen = check_heads(model, heads)
    model.check_ids(ids)
    x = model.embed(ids)  # (b, T, E)
    weights = []
    for layer, block in enumerate(model.blocks()):
        trace = trace_forward(block.att, block.norm1(x))
        context = trace.steps["context"]  # (b, T, h·d) heads concatenated
        context = silence(context, [head for (lay, head) in chosen if lay == layer], block.att.num_heads, mode)
        x = x + block.drop_shortcut(block.att.out_proj(context))  # (b, T, E)
        x = x + block.drop_shortcut(block.ff(block.norm2(x)))  # (b, T, E)
        if keep_weights:
            weights.append(trace.steps["attn_weights"])  # (b, h, T, T)
        del block, trace
    stacked = torch.stack(weights) if keep_weights else None  # (L, b, h, T, T)
    return KnockedOut(logits=model.head(x), weights=stacked)  # (b, T, V)


def silence(context: torch.Tensor, heads: list[int], num_heads: int, mode: str) -> torch.Tensor:
    """(b, T, h·d) heads concatenated -> the same with ``heads``' slices zeroed or set to their mean over T (a copy;
    ``context`` itself when no head is silenced)."""
    if not heads:
        return context
    b, t, width = context.shape
    per_head = context.reshape(b, t, num_heads, width // num_heads).clone()  # (b, T, h, d)
    for head in heads:
        per_head[:, :, head] = per_head[:, :, head].mean(dim=1, keepdim=True) if mode == "mean" else 0.0  # (b, 1, d)
    return per_head.reshape(b, t, width)  # (b, T, h, d) -> (b, T, h·d)


# ASCII digits only: ``str.isdigit`` also takes ``²`` and ``١`` (which int() then refuses, or reads as 1).
_HEAD = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})")


def parse_heads(text: str) -> list[tuple[int, int]]:
    """'0.1,1.3' -> [(0, 1), (1, 3)]: the URL's ``ablate`` list (layer.head, comma separated; empty is none).
    A ValueError names the part that is not layer.head."""
    heads = []
    for part in (p.strip(" \t") for p in text.split(",")):  # ASCII spaces: a no-break space is no digit
        if not part:
            continue
        match = _HEAD.fullmatch(part)
        if match is None:
            raise ValueError(f"{part!r} is not layer.head (two whole numbers, like 0.1)")
        heads.append((int(match[1]), int(match[2])))
    return heads
