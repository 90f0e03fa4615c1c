"""Colour ranges, and how a big matrix is shrunk for display: block reduction and uint8 codes."""

from __future__ import annotations

import math

import numpy as np

from .style import _CODE_MAX, _Kind, _nice_step


def _color_range(z: np.ndarray, kind: _Kind, name: str, zmin: float | None, zmax: float | None) -> tuple[float, float]:
    """The one colour range shared by every head, from the finite values of all heads unless given."""
    if name == "mask":
        return 0.0, 1.0
    if name == "weights":
        lo, hi = 0.0 if zmin is None else zmin, 1.0 if zmax is None else zmax
    elif zmin is not None and zmax is not None:
        lo, hi = zmin, zmax
    else:
        lo, hi = math.inf, -math.inf
        for head in z.reshape(-1, *z.shape[-2:]):  # one head at a time: a 16 × 1024² stack is not copied whole
            finite = head[np.isfinite(head)]
            if finite.size:
                lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
        if lo > hi:  # no finite value at all
            lo, hi = (-1.0, 1.0) if kind.diverging else (0.0, 1.0)
        elif kind.diverging:
            m = max(abs(lo), abs(hi))
            lo, hi = -m, m
        lo, hi = (lo if zmin is None else zmin), (hi if zmax is None else zmax)
    if not hi > lo:  # a constant matrix: give the scale some width around the value
        lo, hi = lo - 0.5, hi + 0.5
    return float(lo), float(hi)


def _block_factor(n: int, blocks: int) -> int:
    return max(1, math.ceil(n / blocks))


def _block_reduce(z: np.ndarray, fi: int, fj: int, how: str) -> np.ndarray:
    """(h, i, j) -> (h, ceil(i / fi), ceil(j / fj)), one head at a time, so temporaries stay one head big."""
    return np.concatenate([_block_reduce_stack(z[k : k + 1], fi, fj, how) for k in range(z.shape[0])])


def _block_reduce_stack(z: np.ndarray, fi: int, fj: int, how: str) -> np.ndarray:
    """(h, i, j) -> (h, ceil(i / fi), ceil(j / fj)): each fi × fj block becomes one cell.

    how="max" for attention weights and masks. Weights are sparse: a head that attends to one key puts
    a single 1 in each row, and a block mean would divide it by fi * fj, painting the stripe nearly white,
    while the block max keeps it at full strength. For a mask, max means "some query in the block may attend".
    how="mean" for scores and values. They are dense and signed, and a max would hide every negative
    value; the mean shows the block's typical level.

    −∞ cells are skipped, so a block is −∞ only when all of its cells are. A block holding any NaN is NaN,
    so that a NaN (a fully masked row's softmax, say) never disappears from view.
    """
    h, i, j = z.shape
    padded = z
    if i % fi or j % fj:  # padding counts as masked
        padded = np.pad(z, ((0, 0), (0, -i % fi), (0, -j % fj)), constant_values=-np.inf)
    blocks = padded.reshape(h, padded.shape[1] // fi, fi, padded.shape[2] // fj, fj)
    nan = np.isnan(blocks)
    any_nan = bool(nan.any())
    if how == "max":
        out = (np.where(nan, -np.inf, blocks) if any_nan else blocks).max(axis=(2, 4))
    else:
        usable = ~nan & (blocks != -np.inf)
        if usable.all():  # every cell is a number (scores before masking, values): a plain block mean
            out = blocks.sum(axis=(2, 4), dtype=np.float64) / (fi * fj)
        else:
            total = np.where(usable, blocks, 0.0).sum(axis=(2, 4), dtype=np.float64)
            count = usable.sum(axis=(2, 4))
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(count > 0, total / np.maximum(count, 1), -np.inf)
    out = out.astype(np.float32)
    if any_nan:
        out[nan.any(axis=(2, 4))] = np.nan
    return out


def _quantise(z: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Finite values to uint8 codes 0..255 spanning [lo, hi]; −∞ and NaN become 0 (an overlay covers them)."""
    scaled = (np.nan_to_num(z, nan=lo, neginf=lo, posinf=hi) - lo) / (hi - lo) * _CODE_MAX
    return np.clip(np.rint(scaled), 0, _CODE_MAX).astype(np.uint8)


def _colorbar_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    step = _nice_step((hi - lo) / 5)
    ticks = np.arange(math.ceil(lo / step) * step, hi + step * 1e-6, step)
    return [float(t) for t in ticks], [f"{t:.3g}" for t in ticks]
