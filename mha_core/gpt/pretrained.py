"""Hugging Face GPT-2 weights into the book's ``GPTModel`` (chapter 5's mapping), one tensor at a time.

GPT-2's ``Conv1D`` stores weights as (in, out) where ``nn.Linear`` wants (out, in), so every weight is transposed,
and ``attn.c_attn`` holds query, key and value side by side, so it is split in three. The model is built on the
meta device and each parameter assigned as it is read and cast: the float32 model never exists when the target
dtype is bfloat16. Only the causal ``mask`` buffers are made for real (one tensor shared by every block).

Axis letters: E emb_dim, V vocabulary, C context length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from mha_core.attention import masks
from mha_core.gpt.model import GPTModel, check_config

STORAGE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
PREFIX = "transformer."
IGNORED = re.compile(r"^(lm_head\.weight|h\.\d+\.attn\.(bias|masked_bias))$")

# Per block: GPT-2 name -> (book name, transposed). c_attn is handled apart: it is split into three.
BLOCK_MAP = {
    "ln_1.weight": ("norm1.scale", False),
    "ln_1.bias": ("norm1.shift", False),
    "attn.c_proj.weight": ("att.out_proj.weight", True),
    "attn.c_proj.bias": ("att.out_proj.bias", False),
    "ln_2.weight": ("norm2.scale", False),
    "ln_2.bias": ("norm2.shift", False),
    "mlp.c_fc.weight": ("ff.layers.0.weight", True),
    "mlp.c_fc.bias": ("ff.layers.0.bias", False),
    "mlp.c_proj.weight": ("ff.layers.2.weight", True),
    "mlp.c_proj.bias": ("ff.layers.2.bias", False),
}
TOP_MAP = {
    "wte.weight": ("tok_emb.weight", False),
    "wpe.weight": ("pos_emb.weight", False),
    "ln_f.weight": ("final_norm.scale", False),
    "ln_f.bias": ("final_norm.shift", False),
}
QKV = ("att.W_query", "att.W_key", "att.W_value")

# A getter reads one GPT-2 tensor (by its name without the prefix) already cast to the storage dtype.
Getter = Callable[[str, torch.dtype], torch.Tensor]


def expected_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every GPT-2 key (without ``transformer.``) this config needs, with its shape as Hugging Face stores it."""
    E, V, C = cfg["emb_dim"], cfg["vocab_size"], cfg["context_length"]
    shapes = {"wte.weight": (V, E), "wpe.weight": (C, E), "ln_f.weight": (E,), "ln_f.bias": (E,)}
    per_block = {
        "ln_1.weight": (E,),
        "ln_1.bias": (E,),
        "attn.c_attn.weight": (E, 3 * E),
        "attn.c_attn.bias": (3 * E,),
        "attn.c_proj.weight": (E, E),
        "attn.c_proj.bias": (E,),
        "ln_2.weight": (E,),
        "ln_2.bias": (E,),
        "mlp.c_fc.weight": (E, 4 * E),
        "mlp.c_fc.bias": (4 * E,),
        "mlp.c_proj.weight": (4 * E, E),
        "mlp.c_proj.bias": (E,),
    }
    for layer in range(cfg["n_layers"]):
        shapes.update({f"h.{layer}.{name}": shape for name, shape in per_block.items()})
    return shapes


def normalise_keys(keys: Iterable[str]) -> dict[str, str]:
    """GPT-2 name without ``transformer.`` -> the key as given; a ValueError when both spellings of one are given."""
    names: dict[str, str] = {}
    for key in keys:
        name = key.removeprefix(PREFIX)
        if name in names:
            raise ValueError(f"state dict holds {name!r} twice: as {names[name]!r} and as {key!r}")
        names[name] = key
    return names


def check_gpt2_shapes(shapes: Mapping[str, tuple[int, ...]], cfg: dict) -> None:
    """A ValueError naming every missing key, unexpected key and shape mismatch (with the numbers) at once."""
    if not cfg["qkv_bias"]:
        raise ValueError("GPT-2's attention has query/key/value biases: the config needs qkv_bias=True")
    wanted = expected_shapes(cfg)
    given = {name: tuple(shape) for name, shape in shapes.items() if not IGNORED.match(name)}
    missing = sorted(set(wanted) - set(given), key=_natural)
    unexpected = sorted(set(given) - set(wanted), key=_natural)
    wrong = [
        f"{name}: {given[name]} where the config needs {wanted[name]}"
        for name in sorted(set(given) & set(wanted), key=_natural)
        if given[name] != wanted[name]
    ]
    problems = []
    if missing:
        problems.append(f"missing keys {_few(missing)}")
    if unexpected:
        problems.append(f"unexpected keys {_few(unexpected)}")
    if wrong:
        problems.append(f"shape mismatches: {_few(wrong)}")
    if problems:
        raise ValueError("not a GPT-2 state dict for this config: " + "; ".join(problems))


def _natural(name: str) -> list:
    """Sort key that puts h.2 before h.10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _few(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return f"[{shown}{f', … {len(items) - limit} more' if len(items) > limit else ''}]"


def build_gpt2(get: Getter, cfg: dict, dtype: torch.dtype):
    """A ``GPTModel`` whose every weight comes from ``get`` (shapes already checked), frozen and in eval mode."""
    if dtype not in STORAGE_DTYPES:
        raise ValueError(f"dtype must be one of {STORAGE_DTYPES}, got {dtype}")
    with torch.device("meta"), _ShapesOnly():
        model = GPTModel(cfg)  # no memory: every tensor is a shape only
    mask = masks.book_causal_buffer(cfg["context_length"])  # (C, C), real, shared by every block (read only)
    for name, (target, transposed) in TOP_MAP.items():
        _assign(model, target, _read(get, name, dtype, transposed))
    model.out_head.weight = model.tok_emb.weight  # tied: the same Parameter, stored once
    for layer, block in enumerate(model.trf_blocks):
        block.att.mask = mask
        for name, (target, transposed) in BLOCK_MAP.items():
            _assign(block, target, _read(get, f"h.{layer}.{name}", dtype, transposed))
        weight = get(f"h.{layer}.attn.c_attn.weight", dtype)  # (E, 3E): query | key | value
        bias = get(f"h.{layer}.attn.c_attn.bias", dtype)  # (3E,)
        for target, w, b in zip(QKV, weight.chunk(3, dim=-1), bias.chunk(3), strict=True):
            _assign(block, f"{target}.weight", w.T.contiguous())  # (E, E) as (out, in)
            _assign(block, f"{target}.bias", b.contiguous())  # (E,)
        del weight, bias
    left = [name for name, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise RuntimeError(f"GPT-2 mapping left tensors unset: {left}")
    return model.eval()


class _ShapesOnly(TorchFunctionMode):
    """Skip initialising meta tensors (in-place inits, triu): torch has no C++ meta kernel for normal_ and triu, and
    its Python ones import sympy and 800 modules, 73 MB kept for good. Thread-local, like torch.device("meta")."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        first = args[0] if args else kwargs.get("tensor", kwargs.get("input"))  # nn.init passes tensor=...
        if isinstance(first, torch.Tensor) and first.is_meta:
            name = getattr(func, "__name__", "")
            if name.endswith("_") and not name.startswith("__"):  # normal_, uniform_, kaiming_uniform_: values unused
                return first
            if func in (torch.triu, torch.Tensor.triu):  # the causal mask, same shape: replaced by a real one
                return first
        return func(*args, **kwargs)


def _read(get: Getter, name: str, dtype: torch.dtype, transposed: bool) -> torch.Tensor:
    tensor = get(name, dtype)
    return tensor.T.contiguous() if transposed else tensor  # Conv1D (in, out) -> Linear (out, in)


def _assign(root: nn.Module, target: str, tensor: torch.Tensor) -> None:
    """Replace the meta parameter ``target`` (a dotted path under ``root``) by ``tensor``, frozen."""
    owner, _, leaf = target.rpartition(".")
    module = root.get_submodule(owner)
    setattr(module, leaf, nn.Parameter(tensor, requires_grad=False))


def state_dict_getter(state_dict: Mapping[str, torch.Tensor], names: dict[str, str]) -> Getter:
    """Read from an in-memory state dict, always copying: the model never shares storage with the caller's dict."""

    def get(name: str, dtype: torch.dtype) -> torch.Tensor:
        return state_dict[names[name]].detach().to(dtype=dtype, copy=True)

    return get


def load_hf_gpt2(state_dict: Mapping[str, torch.Tensor], cfg: dict, dtype: torch.dtype = torch.float32) -> GPTModel:
    """A ``GPTModel`` holding a Hugging Face GPT-2 state dict (keys with or without ``transformer.``).

    c_attn is split into W_query/W_key/W_value and every Conv1D weight transposed; out_head is tok_emb's Parameter.
    Built on the meta device, so with dtype=torch.bfloat16 no float32 model is ever made. Frozen, eval mode.
    A ValueError names missing and unexpected keys and shape mismatches with the numbers.
    """
    cfg = check_config(cfg)
    bad = [key for key, value in state_dict.items() if not isinstance(value, torch.Tensor)]
    if bad:
        raise ValueError(f"state dict values must be tensors: {_few(bad)} are not")
    names = normalise_keys(state_dict)
    check_gpt2_shapes({name: tuple(state_dict[key].shape) for name, key in names.items()}, cfg)
    return build_gpt2(state_dict_getter(state_dict, names), cfg, dtype)
