"""Where a token sits: the five ways attention is told positions, each a traced step of ``MultiHeadAttention``.

Attention alone is blind to order: permute the tokens and the weights only permute. Models add order in one of
these places, and ``PositionEncoding`` puts each where its model does:

* ``"none"``: Listing 3.5 as printed.
* ``"learned"``: an ``nn.Embedding(context_length, d_in)`` added to the input, as the book's ``GPTModel`` adds
  ``pos_emb`` to ``tok_emb`` (GPT-2).
* ``"sinusoidal"``: the fixed table of Vaswani et al. (2017), sin on even and cos on odd dimensions, added to the
  input.
* ``"rope"``: queries and keys rotated by their position (Su et al. 2021), with the book's bonus-code names
  ``compute_rope_params`` / ``apply_rope`` and its half-split convention (dimension k pairs with k + d/2, as in
  Hugging Face's Llama), so a score depends only on how far apart the two tokens are.
* ``"alibi"``: no embedding at all; every head's scaled scores get −slope·|i − j| added (Press et al. 2022), with
  the paper's slopes 2^(−8k/n).

Axis letters: b batch, h heads, t/i query position, s/j key position, d head_dim.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from mha_core.attention.kernels import Recorder

POSITION_KINDS = ("none", "learned", "sinusoidal", "rope", "alibi")


def compute_rope_params(head_dim: int, theta_base: float = 10_000, context_length: int = 4096, dtype=torch.float32):
    """(cos, sin), each (context_length, head_dim): position p's angle p·θ_k for pair k, repeated for both halves."""
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"RoPE rotates pairs of dimensions: head_dim must be even, got {head_dim}")
    if context_length < 1 or theta_base <= 0:
        raise ValueError(f"need context_length ≥ 1 and theta_base > 0, got {context_length} and {theta_base}")
    pairs = torch.arange(0, head_dim, 2, dtype=torch.float32)  # 0, 2, 4 … d − 2
    inv_freq = 1.0 / (theta_base ** (pairs / head_dim))  # (d/2,): θ_k = base^(−2k/d), fast to slow
    angles = torch.arange(context_length, dtype=torch.float32)[:, None] * inv_freq[None, :]  # (T, d/2)
    angles = torch.cat([angles, angles], dim=1)  # (T, d): dimension k and k + d/2 turn by the same angle
    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Rotate (b, h, t, d) ``x`` whose first token sits at position ``offset`` (a KV cache's next position)."""
    num_tokens, head_dim = x.shape[-2], x.shape[-1]
    if offset < 0 or offset + num_tokens > cos.shape[0]:
        raise ValueError(
            f"positions {offset}..{offset + num_tokens - 1} are outside the {cos.shape[0]} RoPE was computed for"
        )
    if head_dim != cos.shape[1]:
        raise ValueError(f"x has head_dim {head_dim}, the RoPE tables {cos.shape[1]}")
    half = head_dim // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (…, t, d): (x1, x2) -> (−x2, x1)
    cos = cos[offset : offset + num_tokens].to(x.dtype)  # (t, d), broadcast over batch and heads
    sin = sin[offset : offset + num_tokens].to(x.dtype)
    return x * cos + rotated * sin


def sinusoidal_table(context_length: int, d_model: int, base: float = 10_000) -> torch.Tensor:
    """(context_length, d_model): PE[p, 2k] = sin(p / base^(2k/d)), PE[p, 2k + 1] = cos(the same), Vaswani et al."""
    position = torch.arange(context_length, dtype=torch.float64)[:, None]  # (T, 1)
    rates = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (⌈d/2⌉,)
    table = torch.zeros(context_length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * rates)
    table[:, 1::2] = torch.cos(position * rates[: d_model // 2])  # an odd d_model has one sine more
    return table.float()


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """(h,) Press et al.'s head slopes: 2^(−8k/n) for k = 1 … n when n is a power of two; otherwise the slopes of
    the largest power of two below n, then every other slope of twice that many heads until there are n."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")

    def powers(n: int) -> list[float]:
        return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]

    below = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = powers(below) + powers(2 * below)[0::2][: num_heads - below]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """(h, t, s): −slope_h · |i − j|; below the causal diagonal this is the paper's −m·(i − j)."""
    distance = (query_positions[:, None] - key_positions[None, :]).abs().float()  # (t, s)
    return -slopes[:, None, None] * distance  # (h, t, s)


class PositionEncoding(nn.Module):
    """One of ``POSITION_KINDS`` for a module of ``num_heads`` heads of ``head_dim`` over ``d_in``-wide inputs.

    Built after the module's own parameters, so a seed reproduces them whatever the kind; "learned" adds the only
    parameter (``pos_emb``), the tables are buffers that are not saved.
    """

    def __init__(self, kind: str, *, context_length: int, d_in: int, num_heads: int, head_dim: int, rope_base=10_000):
        super().__init__()
        if kind not in POSITION_KINDS:
            raise ValueError(f"positions={kind!r} is not one of {', '.join(POSITION_KINDS)}")
        self.kind = kind
        self.rope_base = rope_base
        if kind == "learned":
            self.pos_emb = nn.Embedding(context_length, d_in)  # N(0, 1) rows, as the book's GPTModel starts them
        elif kind == "sinusoidal":
            self.register_buffer("table", sinusoidal_table(context_length, d_in), persistent=False)
        elif kind == "rope":
            cos, sin = compute_rope_params(head_dim, theta_base=rope_base, context_length=context_length)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)
        elif kind == "alibi":
            self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def embed(self, x: torch.Tensor, start: int, rec: Recorder) -> torch.Tensor:
        """``x`` (b, t, d_in) plus its positions' embeddings (learned, sinusoidal); unchanged otherwise."""
        if self.kind not in ("learned", "sinusoidal"):
            return x
        positions = torch.arange(start, start + x.shape[1], device=x.device)  # (t,)
        if self.kind == "learned":
            table = rec("position_embeddings", self.pos_emb(positions), "pos_emb(positions): one learned row each")
        else:
            table = rec("position_embeddings", self.table[positions], "sinusoidal rows: sin even, cos odd dims")
        return rec("x_with_positions", x + table, "x + position embeddings: what W_query, W_key, W_value read")

    def rotate(self, name: str, heads: torch.Tensor, start: int, rec: Recorder) -> torch.Tensor:
        """(b, h, t, d) queries or keys rotated by RoPE at positions start … start + t − 1; unchanged otherwise."""
        if self.kind != "rope":
            return heads
        rotated = apply_rope(heads, self.cos, self.sin, offset=start)  # (b, h, t, d)
        return rec(f"{name}_rotated", rotated, f"{name} rotated by RoPE: pair k turns by position × θ_k")

    def score_bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor, rec: Recorder):
        """ALiBi's (h, t, s) bias for these positions, recorded; None for every other kind."""
        if self.kind != "alibi":
            return None
        bias = alibi_bias(self.slopes, query_positions, key_positions)  # (h, t, s)
        return rec("alibi_bias", bias, "ALiBi: −slope_h × |i − j|, added to the scaled scores")


# --- the scores with and without positions, from a trace's queries and keys (the pages' position knob) ---------------

SCORED_KINDS = ("none", "rope", "alibi")  # the kinds that act on queries, keys or scores; the others act on x


def positioned_scores(
    queries: torch.Tensor,
    keys: torch.Tensor,
    kind: str,
    *,
    rope_base: float = 10_000,
    allowed: torch.Tensor | None = None,
) -> dict[str, torch.Tensor | None]:
    """Queries and keys (b, h, t, d) at positions 0 … t − 1 scored as ``ExplicitAttention`` scores them, with
    ``kind``'s positions applied: RoPE rotates both, ALiBi adds its bias to the scaled scores.

    Returns ``queries`` and ``keys`` as scored (rotated for RoPE), ``scores`` (Q Kᵀ, b, h, t, t), ``bias`` (ALiBi's
    (h, t, t), else None), ``logits`` (what the softmax reads) and ``weights``; ``allowed`` (t, t), True = may
    attend, or None for every key. With "none" the numbers are the module's own, bit for bit. Learned and
    sinusoidal positions are added to x before the projections, so they are not a function of q and k.
    """
    if kind not in SCORED_KINDS:
        raise ValueError(f"positioned_scores applies {', '.join(SCORED_KINDS)}; {kind!r} is added to x instead")
    num_heads, num_tokens, head_dim = queries.shape[1], queries.shape[2], queries.shape[3]
    if kind == "rope":
        cos, sin = compute_rope_params(head_dim, theta_base=rope_base, context_length=num_tokens)
        queries = apply_rope(queries, cos.to(queries.device), sin.to(queries.device))  # (b, h, t, d)
        keys = apply_rope(keys, cos.to(keys.device), sin.to(keys.device))
    scores = queries @ keys.transpose(-2, -1)  # (b, h, t, t)
    logits = scores if allowed is None else scores.masked_fill(~allowed, -torch.inf)
    logits = logits / head_dim**0.5  # the book's order: mask, then divide
    bias = None
    if kind == "alibi":
        where = torch.arange(num_tokens, device=queries.device)  # (t,)
        bias = alibi_bias(alibi_slopes(num_heads).to(queries.device), where, where).to(logits.dtype)  # (h, t, t)
        logits = logits + bias
    weights = torch.softmax(logits, dim=-1)  # (b, h, t, t)
    if allowed is not None:
        weights = weights.masked_fill(~allowed.any(-1)[..., None], 0.0)  # a row with no key: zeros, as the module
    return {"queries": queries, "keys": keys, "scores": scores, "bias": bias, "logits": logits, "weights": weights}


def rope_angles(head_dim: int, theta_base: float, num_positions: int) -> torch.Tensor:
    """(num_positions, head_dim / 2): the angle p·θ_k that RoPE turns pair k by at position p; pair 0 fastest."""
    pairs = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2 … d − 2
    inv_freq = 1.0 / (theta_base ** (pairs / head_dim))  # (d/2,), as compute_rope_params
    return torch.arange(num_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T, d/2)


def rope_distance_scores(head_dim: int, theta_base: float, num_positions: int, start: int = 0) -> torch.Tensor:
    """(num_positions,): the score of an all-ones query at position start + Δ with an all-ones key at ``start``,
    for Δ = 0 … num_positions − 1: how RoPE alone makes a score fall and wave with the distance i − j."""
    cos, sin = compute_rope_params(head_dim, theta_base=theta_base, context_length=start + num_positions)
    ones = torch.ones(1, 1, num_positions, head_dim)  # (b, h, t, d): the same vector at every position
    rotated = apply_rope(ones, cos, sin, offset=start)  # (1, 1, t, d)
    return (rotated[0, 0] @ rotated[0, 0, 0]).double()  # (t,): query at start + Δ · key at start
