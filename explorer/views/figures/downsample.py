"""Colour ranges, and how a big matrix is shrunk for display: block reduction and uint8 codes."""

from __future__ import annotations

import math

import numpy as np

from .style import CODE_MAX, ColorKind, nice_step

WEIGHTS_QUANTILE = 0.99
_QUANTILE_SAMPLE = 1 << 20  # positive weights the quantile is taken over, evenly spaced, at most


def weights_top(*weights: np.ndarray) -> float:
    """Top of every attention-weights colour scale, on every page: the 99th percentile of the positive weights.

    With T tokens a typical weight is about 1/T, so a fixed 0..1 scale turns long sequences white; with this top
    a 1/T weight is mid-scale, and the few weights above it saturate (the colour bar's top says "≥"). Several
    arrays (a before/after pair) share one top. Beyond 2^20 positive weights the percentile is taken over 2^20
    evenly spaced ones, which moves it by well under a colour step.
    """
    positive = np.concatenate([np.asarray(w, dtype=np.float32)[np.asarray(w) > 0].ravel() for w in weights])
    positive = positive[np.isfinite(positive)]
    if positive.size == 0:
        return 1.0
    if positive.size > _QUANTILE_SAMPLE:
        positive = positive[:: positive.size // _QUANTILE_SAMPLE]
    return float(max(np.quantile(positive, WEIGHTS_QUANTILE), 1e-6))


def color_range(
    z: np.ndarray, kind: ColorKind, name: str, zmin: float | None, zmax: float | None
) -> tuple[float, float]:
    """The one colour range shared by every head, from the finite values of all heads unless given.

    Masks and keep masks span 0..1; weights 0..``weights_top``; signed kinds are symmetric about 0.
    """
    if name in ("mask", "keep"):
        return 0.0, 1.0
    if name == "weights":
        lo, hi = 0.0 if zmin is None else zmin, weights_top(z) if zmax is None else zmax
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


ROUNDING_NOISE = 1e-5  # a |difference| at most this is float rounding (float32 rounds at about 1e-7 of a value)


def rounding_noise(z: np.ndarray, kind: str, zmin: float | None, zmax: float | None) -> float | None:
    """The largest |difference| when every difference is float rounding (at most ``ROUNDING_NOISE``), else None.

    Such a difference is drawn grey, "equal to rounding", with its magnitude printed: on the full red–blue scale a
    6e-8 difference (separate − batched heads) looked as large as a real one, its "0.00" cells dark blue.
    """
    if kind != "difference" or zmin is not None or zmax is not None:
        return None
    largest = 0.0
    for head in z.reshape(-1, *z.shape[-2:]):  # one head at a time, as in color_range
        finite = head[np.isfinite(head)]
        if finite.size:
            largest = max(largest, float(np.abs(finite).max()))
    return largest if largest <= ROUNDING_NOISE else None


def block_factor(n: int, blocks: int) -> int:
    return max(1, math.ceil(n / blocks))


def block_reduce(z: np.ndarray, fi: int, fj: int, how: str) -> np.ndarray:
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
        out = _over_blocks(np.where(nan, -np.inf, blocks) if any_nan else blocks, np.maximum)
    else:
        usable = ~nan & (blocks != -np.inf)
        if usable.all():  # every cell is a number (scores before masking, values): a plain block mean
            out = _over_blocks(blocks, np.add, np.float64) / (fi * fj)
        else:
            total = _over_blocks(np.where(usable, blocks, 0.0), np.add, np.float64)
            count = _over_blocks(usable, np.add, np.int64)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(count > 0, total / np.maximum(count, 1), -np.inf)
    out = out.astype(np.float32)
    if any_nan:
        out[nan.any(axis=(2, 4))] = np.nan
    return out


def _over_blocks(blocks: np.ndarray, op: np.ufunc, dtype=None) -> np.ndarray:
    """(h, I, fi, J, fj) -> (h, I, J): ``op`` (np.maximum or np.add) over each fi × fj block.

    First over the fi rows of each block (a reduction whose inner loop runs along J·fj contiguous values), then over
    the fj columns, one strided slice at a time: numpy's one-call reduction over axes (2, 4) runs its inner loop
    fj values long, 15× slower (7.5 ms against 0.5 ms for a 512² head in blocks of 4 × 4).
    """
    rows = op.reduce(blocks, axis=2, dtype=dtype)  # (h, I, J, fj)
    out = rows[..., 0].copy()
    for k in range(1, rows.shape[-1]):
        op(out, rows[..., k], out=out)
    return out


def quantise(z: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Finite values to uint8 codes 0..255 spanning [lo, hi]; −∞ and NaN become 0 (an overlay covers them)."""
    scaled = (np.nan_to_num(z, nan=lo, neginf=lo, posinf=hi) - lo) / (hi - lo) * CODE_MAX
    return np.clip(np.rint(scaled), 0, CODE_MAX).astype(np.uint8)


def colorbar_ticks(
    lo: float, hi: float, clipped_top: bool = False, max_ticks: int = 7
) -> tuple[list[float], list[str]]:
    """Ticks at both ends of the scale (so its top is always read off the bar) and at round steps between.

    At most max_ticks labels (a short bar gets fewer, so they never overlap). The top reads "≥ top" when some
    values are above it. Labels are plain numbers (3 significant digits), never plotly's SI prefixes, which wrote
    an all-zero difference's ±1e-7 as "±100n".
    """
    if max_ticks <= 2:
        ticks, labels = [lo, hi], [_tick_label(lo), _tick_label(hi)]
        return ticks, labels[:1] + [f"≥ {labels[1]}" if clipped_top else labels[1]]
    step = nice_step((hi - lo) / (max_ticks - 1))
    # no round tick this close to an end label: a label a line tall, max_ticks lines on the bar (0.6 / max_ticks put
    # "-0.1" on the end label "-0.132" of a short bar)
    margin = max(0.12, 1.0 / max_ticks) * (hi - lo)
    inner = [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
    inner = [0.0 if abs(t) < step * 1e-6 else t for t in inner if lo + margin < t < hi - margin]
    ticks = [lo, *inner, hi]
    labels = [_tick_label(t) for t in ticks]
    if clipped_top:
        labels[-1] = f"≥ {labels[-1]}"
    return [float(t) for t in ticks], labels


def _tick_label(value: float) -> str:
    return "0" if value == 0 else f"{value:.3g}"


def clipped_above(z: np.ndarray, hi: float) -> bool:
    """Whether any finite value lies above the scale's top (it is then drawn in the top colour)."""
    return any(bool((head[np.isfinite(head)] > hi * (1 + 1e-6)).any()) for head in z.reshape(-1, *z.shape[-2:]))
