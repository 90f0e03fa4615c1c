"""Text the model writes: the book's chapter-5 loop, one token at a time, greedy or sampled.

``generate_text_simple`` is section 4.7's greedy loop; ``generate`` is section 5.3's, with temperature and top-k
sampling, here seeded by a ``torch.Generator`` so a page can write the same continuation twice. Both crop the
context to the model's last ``context_size`` tokens, as the book does, so a long prompt never fails. ``generate``
can write with heads knocked out (``knockout``): each step's logits come from the knocked-out forward pass.

Axis letters: b batch, T tokens, V vocabulary.
"""

from __future__ import annotations

import torch

from mha_core.gpt import knockout
from mha_core.gpt.model import GPTModel

# The least temperature above 0 (greedy). Far below it, logits / temperature overflow float32 (at 1e-38 to inf, and
# softmax of inf is nan: "probability tensor contains either inf, nan or element < 0"); at 0.01 sampling is already
# greedy in all but ties.
MIN_TEMPERATURE = 0.01


def _check(idx: torch.Tensor, max_new_tokens: int, context_size: int) -> None:
    if not isinstance(idx, torch.Tensor) or idx.ndim != 2 or idx.shape[1] < 1:
        raise ValueError(
            f"idx must be a (batch, tokens) tensor with at least one token, got {getattr(idx, 'shape', idx)}"
        )
    if max_new_tokens < 0 or context_size < 1:
        raise ValueError(f"need max_new_tokens >= 0 and context_size >= 1, got {max_new_tokens} and {context_size}")


@torch.no_grad()
def generate_text_simple(model: GPTModel, idx: torch.Tensor, max_new_tokens: int, context_size: int) -> torch.Tensor:
    """(b, T) -> (b, T + max_new_tokens): append the most likely next token, ``max_new_tokens`` times."""
    _check(idx, max_new_tokens, context_size)
    for _ in range(max_new_tokens):
        logits = model(idx[:, -context_size:])[:, -1, :]  # (b, T, V) -> (b, V): the last position only
        idx = torch.cat([idx, logits.argmax(dim=-1, keepdim=True)], dim=1)  # (b, T + 1)
    return idx


@torch.no_grad()
def generate(
    model: GPTModel,
    idx: torch.Tensor,
    max_new_tokens: int,
    context_size: int,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    heads: tuple[tuple[int, int], ...] = (),
    mode: str = "zero",
) -> torch.Tensor:
    """(b, T) -> (b, T + max_new_tokens). Temperature 0 is greedy (``generate_text_simple``); above 0 the logits are
    divided by it and sampled, after keeping only the ``top_k`` largest when given. ``heads`` ((layer, head) pairs)
    are knocked out at every step (``mode`` "zero" or "mean": the mean over the tokens read at that step)."""
    _check(idx, max_new_tokens, context_size)
    knockout.check_heads(model, heads)
    if not (temperature == 0.0 or MIN_TEMPERATURE <= temperature < float("inf")) or (top_k is not None and top_k < 1):
        raise ValueError(
            f"need temperature 0 (greedy) or at least {MIN_TEMPERATURE}, and top_k >= 1 (or None), "
            f"got {temperature} and {top_k}"
        )
    for _ in range(max_new_tokens):
        window = idx[:, -context_size:]  # (b, ≤ context_size)
        if heads:
            logits = knockout.forward_knocked_out(model, window, heads, mode, keep_weights=False).logits  # (b, T, V)
        else:
            logits = model(window)  # (b, T, V)
        logits = logits[:, -1, :].float()  # (b, V)
        if top_k is not None and top_k < logits.shape[-1]:
            kth = torch.topk(logits, top_k).values[:, -1:]  # (b, 1) the k-th largest
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if temperature > 0.0:
            probs = torch.softmax(logits / temperature, dim=-1)  # (b, V)
            next_id = torch.multinomial(probs, 1, generator=generator)  # (b, 1)
        else:
            next_id = logits.argmax(dim=-1, keepdim=True)  # (b, 1)
        idx = torch.cat([idx, next_id], dim=1)  # (b, T + 1)
    return idx
