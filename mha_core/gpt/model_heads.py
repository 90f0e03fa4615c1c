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

from mha_core.gpt import attribution, generation, head_scores, knockout
from mha_core.gpt.model import GPTModel

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
    drawn: int  # distinct ids the probe draws from: a uniform guess among them costs ln(drawn)


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
    allowed: tuple[int, ...] = ()  # when given, draw from these ids only (the bytes a model was trained on)


def probe_tokens(model: GPTModel, probe: Probe = Probe()) -> torch.Tensor:
    """(b, 2P) seeded random ids repeated twice; by default past the single bytes (whole words or word pieces) and
    never the vocabulary's last id (GPT-2's end-of-text)."""
    period = max(2, min(probe.period, model.cfg["context_length"] // 2))
    if probe.allowed:
        table = torch.tensor(probe.allowed, dtype=torch.int64)  # (n,)
        picks = head_scores.repeated_random_tokens(len(table), period, batch_size=probe.batch_size, seed=probe.seed)
        return table[picks]  # (b, 2P) the allowed ids, repeated as the picks are
    low, high = drawn_range(model, probe)
    return head_scores.repeated_random_tokens(high, period, batch_size=probe.batch_size, seed=probe.seed, low=low)


def drawn_range(model: GPTModel, probe: Probe) -> tuple[int, int]:
    """[low, high): the ids a probe without ``allowed`` draws from."""
    vocab = model.cfg["vocab_size"]
    return (0, vocab) if probe.whole_vocabulary else (min(256, vocab // 4), vocab - 1)


def drawn_count(model: GPTModel, probe: Probe) -> int:
    """How many distinct ids the probe draws from: a uniform guess among them costs ln of this."""
    low, high = drawn_range(model, probe)
    return len(probe.allowed) if probe.allowed else high - low


def corpus_bytes(text: str, min_count: int = 100) -> tuple[int, ...]:
    """The byte values that occur at least ``min_count`` times in ``text`` (UTF-8): what a byte model read often."""
    counts = torch.bincount(torch.tensor(list(text.encode("utf-8")), dtype=torch.int64), minlength=256)  # (256,)
    return tuple(int(i) for i in (counts >= min_count).nonzero().flatten())


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
        drawn=drawn_count(model, probe),
    )


@dataclass(frozen=True, kw_only=True)
class TextScores:
    """Each head's three scores read on the typed text itself, and what a head that spreads evenly would score."""

    scores: dict[str, np.ndarray]  # kind -> (L, h) float32; induction NaN where the text repeats no stretch
    even: dict[str, float]  # kind -> the even-spread score over the same queries
    repeat_rows: tuple[int, ...]  # queries with an earlier copy of their last MIN_MATCH tokens (induction's rows)

    @property
    def repeat_queries(self) -> int:
        return len(self.repeat_rows)


MIN_MATCH = 3  # tokens that must match for a query to count as a repeat (one byte of English repeats everywhere)


def repeat_rows(ids) -> tuple[int, ...]:
    """The positions whose last MIN_MATCH tokens appeared earlier: where an induction head has a copy to read."""
    targets = head_scores.repeat_targets(torch.tensor(list(ids), dtype=torch.int64), MIN_MATCH)  # (T,)
    return tuple(int(r) for r in (targets >= 0).nonzero().flatten())


def text_scores(weights: np.ndarray, ids: tuple[int, ...]) -> TextScores:
    """Previous-token, first-token and induction scores on the text read (weights (L, h, T, T) from ``read_text``)."""
    w = torch.tensor(np.asarray(weights))  # (L, h, T, T), a copy: the reading's arrays are read-only
    targets = head_scores.repeat_targets(torch.tensor(ids, dtype=torch.int64), MIN_MATCH)  # (T,)
    later = torch.arange(1, len(ids))  # queries 1..T-1: the previous- and first-token scores' rows
    if len(ids) < 2:
        nan = np.full(w.shape[:2], np.nan, dtype=np.float32)
        return TextScores(scores=dict.fromkeys(head_scores.KINDS, nan), even=dict.fromkeys(head_scores.KINDS, 0.0),
                          repeat_rows=())  # fmt: skip
    scores = {
        "previous token": head_scores.previous_token_score(w),
        "first token": head_scores.first_token_score(w),
        "induction": head_scores.induction_score_on_text(w, targets),
    }
    rows = (targets >= 0).nonzero().flatten()
    even = {"previous token": head_scores.even_spread_score(later), "first token": head_scores.even_spread_score(later)}
    return TextScores(
        scores={kind: _frozen(score.float().numpy().copy()) for kind, score in scores.items()},
        even=even | {"induction": head_scores.even_spread_score(rows)},
        repeat_rows=tuple(int(r) for r in rows),
    )


@dataclass(frozen=True, kw_only=True)
class KnockoutReading:
    """The text read with heads knocked out, beside the intact model."""

    heads: tuple[tuple[int, int], ...]  # (layer, head) knocked out
    mode: str  # "zero" or "mean"
    loss: np.ndarray  # (T - 1,) nats, predicting token t + 1 at t, with the heads knocked out
    intact_loss: np.ndarray  # (T - 1,) the same, every head working
    top_labels: tuple[str, ...]  # the most likely next tokens after the last, heads knocked out
    top_probs: tuple[float, ...]
    scores: TextScores  # the heads' scores on the text, heads knocked out


@torch.no_grad()
def knockout_reading(model: GPTModel, tokenizer, ids: list[int], heads, mode: str = "zero") -> KnockoutReading:
    """Read ``ids`` with ``heads`` silenced (``knockout``), and without, for the page's before and after."""
    batch = torch.tensor([list(ids)], dtype=torch.int64)  # (1, T)
    knocked = knockout.forward_knocked_out(model, batch, heads, mode)
    intact = model(batch)  # (1, T, V)
    probs = torch.softmax(knocked.logits[0, -1].float(), dim=-1)  # (V,)
    top = torch.topk(probs, min(TOP_K, probs.shape[0]))
    return KnockoutReading(
        heads=tuple(sorted(knockout.check_heads(model, heads))),
        mode=mode,
        loss=_frozen(head_scores.loss_per_position(knocked.logits, batch)[0].numpy().copy()),
        intact_loss=_frozen(head_scores.loss_per_position(intact, batch)[0].numpy().copy()),
        top_labels=tuple(tokenizer.labels([int(i) for i in top.indices])),
        top_probs=tuple(float(p) for p in top.values),
        scores=text_scores(knocked.weights[:, 0].float().numpy(), tuple(ids)),  # (L, 1, h, T, T) -> (L, h, T, T)
    )


@torch.no_grad()
def continue_text(
    model: GPTModel,
    tokenizer,
    ids: list[int],
    new_tokens: int,
    *,
    temperature: float,
    top_k: int | None,
    seed: int,
    heads=(),
    mode: str = "zero",
) -> tuple[int, ...]:
    """The ids the model writes after ``ids`` (the book's ``generate``; greedy at temperature 0), seeded, with
    ``heads`` knocked out at every step."""
    batch = torch.tensor([list(ids)], dtype=torch.int64)  # (1, T)
    model.check_ids(batch)
    gen = torch.Generator().manual_seed(seed)
    out = generation.generate(
        model, batch, new_tokens, model.cfg["context_length"], temperature=temperature, top_k=top_k, generator=gen,
        heads=tuple(heads), mode=mode,
    )  # fmt: skip
    return tuple(int(i) for i in out[0, len(ids) :])


@dataclass(frozen=True, kw_only=True)
class CharacterReading:
    """The text read position by position: what each head looked at, the top guesses, and which part raised the
    right next token's logit (``attribution``). Position t predicts ``true_ids[t + 1]``."""

    ids: tuple[int, ...]  # (T,) what the model read: the text, or the given start and what it wrote on its own
    true_ids: tuple[int, ...]  # (T,) the text
    labels: tuple[str, ...]  # (T,) of ids
    true_labels: tuple[str, ...]  # (T,) of true_ids
    given: int  # tokens given; the rest the model wrote on its own (T when the true text is given throughout)
    weights: np.ndarray  # (L, h, T, T)
    top_labels: tuple[tuple[str, ...], ...]  # (T, k) the likeliest next tokens at each position
    top_ids: np.ndarray  # (T, k)
    top_probs: np.ndarray  # (T, k)
    head_dla: np.ndarray  # (L, h, T - 1) each head's direct logit attribution to the right next token
    other_dla: dict[str, np.ndarray]  # part -> (T - 1,): embeddings, biases, MLPs, the final LayerNorm's shift
    logit: np.ndarray  # (T - 1,) the right next token's logit
    right_prob: np.ndarray  # (T - 1,) its probability


@torch.no_grad()
def read_characters(
    model: GPTModel, tokenizer, ids: list[int], *, heads=(), mode="zero", own=False
) -> CharacterReading:
    """``ids`` (at least 2) read with ``heads`` knocked out; ``own``: the model writes greedily after the first
    ``attribution.prompt_length`` tokens and reads its own writing (the right token is still the text's)."""
    true_ids = [int(i) for i in ids]
    given = attribution.prompt_length(true_ids) if own else len(true_ids)
    fed = true_ids[:given] + list(
        continue_text(
            model,
            tokenizer,
            true_ids[:given],
            len(true_ids) - given,
            temperature=0.0,
            top_k=None,
            seed=0,
            heads=heads,
            mode=mode,
        )  # fmt: skip
    )
    parts = attribution.residual_parts(model, fed, heads, mode)
    dla = attribution.direct_logit_attribution(model, parts, true_ids[1:] + true_ids[:1])  # the last target unused
    probs = torch.softmax(parts.logits.float(), dim=-1)  # (T, V)
    top = torch.topk(probs, min(TOP_K, probs.shape[-1]), dim=-1)  # (T, k)
    right = probs[torch.arange(len(fed) - 1), torch.tensor(true_ids[1:], dtype=torch.int64)]  # (T - 1,)
    return CharacterReading(
        ids=tuple(fed),
        true_ids=tuple(true_ids),
        labels=tuple(tokenizer.labels(fed)),
        true_labels=tuple(tokenizer.labels(true_ids)),
        given=given,
        weights=_frozen(parts.weights.float().numpy().copy()),
        top_labels=tuple(tuple(tokenizer.labels(row)) for row in top.indices.tolist()),
        top_ids=_frozen(top.indices.numpy().copy()),
        top_probs=_frozen(top.values.float().numpy().copy()),
        head_dla=_frozen(dla.heads[..., :-1].float().numpy().copy()),
        other_dla={name: _frozen(v[:-1].float().numpy().copy()) for name, v in dla.other.items()},
        logit=_frozen(dla.logit[:-1].float().numpy().copy()),
        right_prob=_frozen(right.float().numpy().copy()),
    )
