"""How the shipped GPT is measured while and after it trains: the random probe's head scores, held-out losses, and
a progress line. Torch only; a recipe is read for its vocabulary size and probe period alone.

Axis letters: L layers, b batch, h heads, T tokens, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mha_core.gpt import english_probe, head_scores
from mha_core.gpt.model import GPTModel
from mha_core.gpt.text_tokenizer import ByteTokenizer

PROBE_SEED = 1234  # the repeated random probe the head scores are measured on
PROBE_BATCH = 16


def probe(recipe) -> torch.Tensor:
    """(b, 2·period) the fixed repeated random probe the head scores are read on."""
    return head_scores.repeated_random_tokens(
        recipe.vocab_size, recipe.probe_period, repeats=2, batch_size=PROBE_BATCH, seed=PROBE_SEED
    )


@torch.no_grad()
def measure_heads(model: GPTModel, ids: torch.Tensor, period: int) -> dict[str, torch.Tensor]:
    """Each kind of score, (L, h), on ``ids`` (a probe repeating every ``period`` tokens), batch averaged."""
    was_training = model.training
    model.eval()
    weights = model.attention_weights(ids).mean(dim=1)  # (L, b, h, T, T) -> (L, h, T, T)
    model.train(was_training)
    return {
        "previous token": head_scores.previous_token_score(weights),
        "first token": head_scores.first_token_score(weights),
        "induction": head_scores.induction_score(weights, period),
    }


@torch.no_grad()
def mean_loss(model: GPTModel, windows: torch.Tensor, chunk: int = 16) -> float:
    """Mean next-token cross-entropy (nats) over (n, T + 1) windows, in eval mode."""
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, windows.shape[0], chunk):
        part = windows[i : i + chunk]  # (c, T + 1)
        logits = model(part[:, :-1])  # (c, T, V)
        total += F.cross_entropy(logits.flatten(0, 1), part[:, 1:].flatten(), reduction="sum").item()
    model.train(was_training)
    return total / (windows.shape[0] * (windows.shape[1] - 1))


@torch.no_grad()
def heldout_loss(model: GPTModel, ids: torch.Tensor, context_length: int) -> float:
    """Mean next-token cross-entropy (nats) over every token of ``ids`` after the first, read in consecutive
    windows of ``context_length`` (the last one shorter), in eval mode: the same targets as the unigram's."""
    was_training = model.training
    model.eval()
    total = 0.0
    for start in range(0, ids.numel() - 1, context_length):
        window = ids[start : start + context_length + 1][None]  # (1, ≤ T + 1)
        logits = model(window[:, :-1])  # (1, t, V)
        total += F.cross_entropy(logits[0], window[0, 1:], reduction="sum").item()
    model.train(was_training)
    return total / (ids.numel() - 1)


def report_progress(model: GPTModel, recipe, step: int, loss: float, seconds: float) -> None:
    """One line: step, loss, per kind the best head score of each layer on the random probe, and the repeated
    English probe (best induction head, the two copies' losses, the copy's greedy accuracy)."""
    scores = measure_heads(model, probe(recipe), recipe.probe_period)
    text = "  ".join(
        f"{kind[:4]} " + "/".join(f"{row.max():.2f}" for row in value)  # the best head of each layer
        for kind, value in scores.items()
    )
    english = english_probe.score_repeats(model, ByteTokenizer())
    said = (
        f"english ind {english.best_induction:.2f} loss {english.first_copy_loss:.2f}->{english.second_copy_loss:.2f}"
        f" acc {english.second_copy_accuracy:.2f}"
    )
    print(f"step {step:5d}  {seconds:7.1f}s  loss {loss:.3f}  {text}  {said}", flush=True)
