"""What a real GPT's heads do, as plain numpy arrays: the Real heads page's numbers, computed once per (model, text).

Two computations, both read-only on a shared model (eval mode, ``torch.no_grad``; nothing is stored on it):

* ``read_text``: one typed sentence through the model: every layer's attention weights (the real ``att`` of each
  block, traced on its real input), and the next-token prediction after the last token (top k with probabilities).
* ``probe_heads``: a random token sequence repeated (``head_scores.repeated_random_tokens``): each head's previous-
  token, first-token and induction score, and the loss at every position, which falls on the second copy when the
  model has induction heads (it can copy what followed the earlier occurrence; random tokens cannot be guessed).

Axis letters: L layers, b batch, h heads, T tokens, V vocabulary, P the probe's period.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import head_scores
from .gpt import GPTModel

TOP_K = 5
PROBE_PERIOD = 24  # random tokens per copy: long enough that chance repeats inside one copy are rare
PROBE_BATCH = 4  # probe sequences averaged, so a score is not one sequence's accident
PROBE_SEED = 0


@dataclass(frozen=True, kw_only=True)
class TextReading:
    """One sentence through the model. Arrays are read-only views: shared by every session."""

    ids: tuple[int, ...]  # (T,)
    labels: tuple[str, ...]  # (T,) one display label per token
    text: str  # the tokens read, decoded (the sentence, cut to the tokens drawn)
    weights: np.ndarray  # (L, h, T, T) float32 softmax weights, queries on rows
    top_ids: tuple[int, ...]  # (k,) the most likely next tokens, most likely first
    top_labels: tuple[str, ...]  # (k,)
    top_probs: tuple[float, ...]  # (k,) their probabilities (of the full softmax over V)


@dataclass(frozen=True, kw_only=True)
class HeadProbe:
    """The repeated random sequence and what it reveals about every head."""

    period: int  # P: tokens per copy; the sequence is two copies, 2P tokens
    scores: dict[str, np.ndarray]  # kind (head_scores.KINDS) -> (L, h) float32 mean weight
    strongest: dict[str, tuple[int, int, float]]  # kind -> (layer, head, score)
    loss: np.ndarray  # (2P - 1,) mean cross-entropy (nats) of predicting token t+1 at position t
    first_copy_loss: float  # mean over positions 0..P-2 (predicting the rest of the first copy)
    second_copy_loss: float  # mean over positions P..2P-2 (predicting the second copy after its first token)
    labels: tuple[str, ...]  # (2P,) the first probe sequence's tokens


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@torch.no_grad()
def read_text(model: GPTModel, tokenizer, ids: list[int], *, top_k: int = TOP_K) -> TextReading:
    """Every layer's weights on ``ids`` and the top-k next tokens after the last one; ValueError for bad ids."""
    batch = torch.tensor([list(ids)], dtype=torch.int64)  # (1, T)
    model.check_ids(batch)
    weights = model.attention_weights(batch)[:, 0]  # (L, 1, h, T, T) -> (L, h, T, T)
    logits = model(batch)[0, -1]  # (1, T, V) -> (V,) after the last token
    probs = torch.softmax(logits.float(), dim=-1)  # (V,)
    top = torch.topk(probs, min(top_k, probs.shape[0]))
    top_ids = tuple(int(i) for i in top.indices)
    return TextReading(
        ids=tuple(int(i) for i in ids),
        labels=tuple(tokenizer.labels(list(ids))),
        text=tokenizer.decode(list(ids)),
        weights=_frozen(weights.float().numpy().copy()),
        top_ids=top_ids,
        top_labels=tuple(tokenizer.labels(list(top_ids))),
        top_probs=tuple(float(p) for p in top.values),
    )


@dataclass(frozen=True, kw_only=True)
class Probe:
    """Which repeated random sequence: the shipped model's record names the one its head scores were read on."""

    period: int = PROBE_PERIOD
    batch_size: int = PROBE_BATCH
    seed: int = PROBE_SEED
    whole_vocabulary: bool = False  # draw from every id (the training's probe), else past the bytes and before EOT


def probe_tokens(model: GPTModel, probe: Probe = Probe()) -> torch.Tensor:
    """(b, 2P) seeded random ids repeated twice; by default past the single bytes (whole words or word pieces) and
    never the vocabulary's last id (GPT-2's end-of-text)."""
    vocab = model.cfg["vocab_size"]
    period = max(2, min(probe.period, model.cfg["context_length"] // 2))
    high, low = (vocab, 0) if probe.whole_vocabulary else (vocab - 1, min(256, vocab // 4))
    return head_scores.repeated_random_tokens(high, period, batch_size=probe.batch_size, seed=probe.seed, low=low)


@torch.no_grad()
def probe_heads(model: GPTModel, tokenizer, probe: Probe = Probe()) -> HeadProbe:
    """Every head's three scores and the per-position loss on the repeated random probe."""
    ids = probe_tokens(model, probe)  # (b, 2P)
    period = ids.shape[1] // 2
    weights = model.attention_weights(ids)  # (L, b, h, 2P, 2P)
    scores = {
        "previous token": head_scores.previous_token_score(weights),  # (L, b, h)
        "first token": head_scores.first_token_score(weights),
        "induction": head_scores.induction_score(weights, period),
    }
    scores = {kind: score.mean(dim=1) for kind, score in scores.items()}  # (L, b, h) -> (L, h)
    loss = head_scores.loss_per_position(model(ids), ids).mean(dim=0)  # (b, 2P-1) -> (2P-1,)
    return HeadProbe(
        period=period,
        scores={kind: _frozen(score.float().numpy().copy()) for kind, score in scores.items()},
        strongest={kind: head_scores.strongest(score) for kind, score in scores.items()},
        loss=_frozen(loss.float().numpy().copy()),
        first_copy_loss=float(loss[: period - 1].mean()),
        second_copy_loss=float(loss[period:].mean()),
        labels=tuple(tokenizer.labels(ids[0].tolist())),
    )
