"""Settings in, module and trace out: what every page runs, with no UI in it.

A module is fully determined by its settings (the seed included), which is what lets the
app cache modules by settings and share them between sessions read-only.
"""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass

import numpy as np
import torch

from . import devices, heads, inputs, masks
from .modules import MultiHeadAttention, Trace, trace_forward
from .rng import seeded

INPUT_KINDS = ("book", "random", "text")


@dataclass(frozen=True, kw_only=True)
class ModuleSpec:
    d_in: int = 3
    d_out: int = 2
    context_length: int = 6
    dropout: float = 0.0
    num_heads: int = 2
    qkv_bias: bool = False
    seed: int = 123  # torch.manual_seed(seed) right before construction, as the book does
    device: str = "cpu"
    dtype: str = "float32"


@dataclass(frozen=True, kw_only=True)
class InputSpec:
    kind: str = "book"  # one of INPUT_KINDS
    num_tokens: int = 6
    d_in: int = 3
    batch_size: int = 2
    seed: int = 123
    text: str = inputs.BOOK_TEXT


def build_module(spec: ModuleSpec) -> MultiHeadAttention:
    """A fresh eval-mode module, seeded without disturbing the caller's global RNG."""
    device, dtype = devices.resolve(spec.device, spec.dtype)
    with seeded(spec.seed):
        module = MultiHeadAttention(
            spec.d_in, spec.d_out, spec.context_length, spec.dropout, spec.num_heads, qkv_bias=spec.qkv_bias
        )
    return module.to(device=device, dtype=dtype).eval()


def build_input(spec: InputSpec) -> tuple[torch.Tensor, list[str]]:
    """(x (batch, num_tokens, d_in) float32 on CPU, token labels).

    A short input is extended with seeded random embeddings (labelled t6, t7, ...);
    a long one is cut to num_tokens.
    """
    if spec.kind == "book":
        if spec.d_in != 3:
            raise ValueError(f"the book's embeddings are 3-dimensional, not d_in={spec.d_in}")
        x, labels = inputs.book_tokens()
    elif spec.kind == "text":
        x, labels = inputs.sentence_embeddings(spec.text, spec.d_in, spec.seed)
    elif spec.kind == "random":
        x, labels = inputs.random_embeddings(spec.num_tokens, spec.d_in, spec.seed)
    else:
        raise ValueError(f"input kind must be one of {INPUT_KINDS}, got {spec.kind!r}")
    x, labels = inputs.extend(x, labels, spec.num_tokens, spec.seed)
    return inputs.batch_of(x, spec.batch_size), labels


def run_trace(module: MultiHeadAttention, x: torch.Tensor, *, train: bool = False, seed: int = 0, **kwargs) -> Trace:
    """Trace the module on x, moved to the module's device and dtype.

    In train mode (dropout active) a private copy is switched to training, so a module
    shared between sessions is never mutated, and the dropout draw is seeded.
    """
    weight = module.W_query.weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    if not train:
        return trace_forward(module, x, **kwargs)
    training_copy = copy.deepcopy(module).train()
    with seeded(seed, weight.device):  # dropout draws from the global RNG
        return trace_forward(training_copy, x, **kwargs)


def trace_npz(trace: Trace, labels: list[str]) -> bytes:
    """The trace as a compressed .npz: every step under its name, plus the token labels."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, tokens=np.array(labels), **trace.to_npz_dict())
    return buffer.getvalue()


@dataclass(frozen=True, kw_only=True)
class ExplorerRun:
    """One forward pass of the explorer's module: its trace and the module's parts the panels draw.

    This is the computed view: every figure of every section, batch element and presentation is drawn from it,
    so changing only those never runs the module again (see ``caches.explorer_run``).
    """

    trace: Trace
    labels: list[str]
    mask_allowed: np.ndarray | None  # the book's (context_length, context_length) buffer as may-attend
    out_proj_weight: np.ndarray  # (d_out, d_out)
    dropout_shown: bool  # train mode with p > 0: the weights after dropout differ from the weights
    out_proj_bias: np.ndarray | None = None  # (d_out,)


def run_explorer(module, x, labels, *, train: bool, seed: int, dropout: float) -> ExplorerRun:
    """Run the module once on x (train mode on a private copy, see ``run_trace``)."""
    trace = run_trace(module, x, train=train, seed=seed)
    return ExplorerRun(
        trace=trace,
        labels=list(labels),
        mask_allowed=None if module.mask is None else masks.from_blocked(module.mask).cpu().numpy(),  # 1 = blocked
        out_proj_weight=module.out_proj.weight.detach().float().cpu().numpy(),
        dropout_shown=train and dropout > 0,
        out_proj_bias=module.out_proj.bias.detach().float().cpu().numpy(),
    )


@dataclass(frozen=True, kw_only=True)
class HeadsRun:
    """Every head run on its own and the batched module on the same input: what the heads view draws from."""

    separate: heads.SeparateHeads
    batched: Trace


def run_heads(module, x: torch.Tensor) -> HeadsRun:
    weight = module.W_query.weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    return HeadsRun(separate=heads.separate_heads(module, x), batched=trace_forward(module, x))
