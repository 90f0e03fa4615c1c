"""The position knob's run: one module's scores without positions and with one kind, on the tokens and shuffled.

Listing 3.5 has no positions, so "the dog bit the man" and "the man bit the dog" give the same weights, only
permuted; RoPE and ALiBi act on the queries, keys and scores (``positions.positioned_scores``), learned and
sinusoidal positions on x before the projections (``PositionEncoding.embed``, then the module's own W_query and
W_key). The module is only read: nothing here changes it. Axis letters: b batch, h heads, t tokens, d head_dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_core.attention.kernels import no_record
from mha_core.attention.modules import MultiHeadAttention, split_heads, trace_forward
from mha_core.attention.positions import POSITION_KINDS, PositionEncoding, alibi_slopes, positioned_scores
from mha_core.rng import seeded

MAX_POSITION_TOKENS = 64  # the knob's heatmaps show every token: the first 64 at most
MAX_SHUFFLE = 999_999  # ?shuffle=: 0 is the tokens' own order, each other number a seeded permutation


def shuffled_order(num_tokens: int, shuffle: int) -> list[int]:
    """The token order for shuffle number ``shuffle``: 0 is the tokens as they are, any other a seeded permutation."""
    if shuffle == 0:
        return list(range(num_tokens))
    generator = torch.Generator().manual_seed(shuffle)
    return torch.randperm(num_tokens, generator=generator).tolist()


def rope_fits(kind: str, head_dim: int) -> bool:
    """RoPE turns pairs of dimensions: it needs an even head_dim; every other kind fits any."""
    return kind != "rope" or head_dim % 2 == 0


@dataclass(frozen=True, kw_only=True)
class PositionsRun:
    """One sequence's queries, keys and scores without positions and with ``kind``, in order and shuffled (numpy)."""

    kind: str
    rope_base: float
    labels: list[str]  # the tokens in order
    total_tokens: int  # the input's tokens, of which the first MAX_POSITION_TOKENS at most are scored
    order: list[int]  # the shuffle: shuffled token i is token order[i]
    without: dict[str, np.ndarray | None]  # positioned_scores' keys, for the tokens in order
    with_positions: dict[str, np.ndarray | None]
    shuffled_without: dict[str, np.ndarray | None]
    shuffled_with: dict[str, np.ndarray | None]
    slopes: np.ndarray | None  # ALiBi's (h,) head slopes


def _numpy(result: dict[str, torch.Tensor | None]) -> dict[str, np.ndarray | None]:
    """Batch element 0 of each (b, h, t, ·) tensor as numpy; ALiBi's (h, t, t) bias as it is."""
    arrays = {name: None if value is None else value.detach().float().cpu().numpy() for name, value in result.items()}
    return {name: a if a is None or name == "bias" else a[0] for name, a in arrays.items()}


def _queries_and_keys(module: MultiHeadAttention, x: torch.Tensor, encoding: PositionEncoding | None):
    """(queries, keys), each (1, h, t, d), of the module on x: the trace's own, or with x's positions added first."""
    if encoding is None:
        steps = trace_forward(module, x).steps
        return steps["queries_heads"], steps["keys_heads"]
    x = encoding.embed(x, 0, no_record)  # (1, t, d_in): learned or sinusoidal rows added
    queries = split_heads(module.W_query(x), module.num_heads, "queries", no_record)  # (1, h, t, d)
    return queries, split_heads(module.W_key(x), module.num_heads, "keys", no_record)


@torch.no_grad()
def run_positions(module, x: torch.Tensor, labels, *, kind: str, rope_base: float, seed: int, shuffle: int):
    """Batch element 0 of ``x`` (1, T, d_in), at most ``MAX_POSITION_TOKENS`` tokens, scored without positions and
    with ``kind`` (no causal mask, so that only positions tell an order), in order and shuffled by ``shuffle``.

    A learned table is ``PositionEncoding``'s, seeded with ``seed``. RoPE with an odd head_dim is refused (ValueError).
    """
    if kind not in POSITION_KINDS:
        raise ValueError(f"positions={kind!r} is not one of {', '.join(POSITION_KINDS)}")
    if not rope_fits(kind, module.head_dim):
        raise ValueError(f"RoPE turns pairs of dimensions: head_dim must be even, got {module.head_dim}")
    weight = module.W_query.weight
    total_tokens = x.shape[1]
    x = x[:1, :MAX_POSITION_TOKENS].to(device=weight.device, dtype=weight.dtype)  # (1, t, d_in)
    num_tokens = x.shape[1]
    order = shuffled_order(num_tokens, shuffle)
    encoding = None
    if kind in ("learned", "sinusoidal"):
        with seeded(seed):
            encoding = PositionEncoding(
                kind, context_length=num_tokens, d_in=module.d_in, num_heads=module.num_heads, head_dim=module.head_dim
            ).to(device=weight.device, dtype=weight.dtype)
    scored = "none" if encoding is not None else kind  # x's positions are in the queries and keys already

    def both(tokens: torch.Tensor):
        plain = positioned_scores(*_queries_and_keys(module, tokens, None), "none")
        queries, keys = _queries_and_keys(module, tokens, encoding)
        return _numpy(plain), _numpy(positioned_scores(queries, keys, scored, rope_base=rope_base))

    without, with_positions = both(x)
    shuffled_without, shuffled_with = both(x[:, order])  # (1, t, d_in): the tokens in the shuffled order
    slopes = None
    if kind == "alibi":
        slopes = alibi_slopes(module.num_heads).numpy()  # (h,)
    return PositionsRun(
        kind=kind,
        rope_base=rope_base,
        labels=list(labels)[:num_tokens],
        total_tokens=total_tokens,
        order=order,
        without=without,
        with_positions=with_positions,
        shuffled_without=shuffled_without,
        shuffled_with=shuffled_with,
        slopes=slopes,
    )


def unshuffled(matrix: np.ndarray, order: list[int]) -> np.ndarray:
    """(h, t, t) of the shuffled tokens put back in the original order: entry [i, j] of the result is the shuffled
    matrix's at the places where tokens i and j went."""
    where = np.argsort(order)  # where[i]: the shuffled place of token i
    return matrix[:, where][:, :, where]


def permutation_gap(run: PositionsRun, with_positions: bool) -> float:
    """The largest |weight| change a shuffle makes once its weights are put back in the tokens' order: 0 (to
    rounding) without positions, as the weights are merely permuted; more with positions."""
    before = run.with_positions if with_positions else run.without
    after = run.shuffled_with if with_positions else run.shuffled_without
    return float(np.abs(unshuffled(after["weights"], run.order) - before["weights"]).max())
