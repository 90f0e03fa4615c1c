"""What each training step of the shipped GPT reads and at what rate: the phases of ``training.Recipe`` (the
induction warm-up, text with repeats, the alphabet curriculum, the polish), the rows each draws and the loss over them.

Split from ``training`` so that the recipe's schedule reads in one place; ``recipe`` is a ``training.Recipe``.
Axis letters: b batch, T tokens.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from mha_core.gpt import data as gpt_data
from mha_core.gpt.model import GPTModel


def letters_at(recipe, step: int) -> int:
    """Phase 2's alphabet size at ``step``: from ``alphabet_from`` down to ``alphabet_to``, geometrically."""
    progress = min(1.0, max(0, step - recipe.curriculum_start) / recipe.alphabet_decay)
    ratio = recipe.alphabet_to / recipe.alphabet_from
    return max(recipe.alphabet_to, round(recipe.alphabet_from * ratio**progress))


def learning_rate(recipe, step: int) -> float:
    """Linear ramp over ``lr_warmup`` steps, then a cosine from ``lr`` down to ``final_lr`` at ``lr_horizon``;
    in phase 2 ``curriculum_lr`` and in phase 3 ``polish_lr``, each falling towards a tenth over its last
    ``anneal`` steps."""
    if recipe.polish_start and step >= recipe.polish_start:
        return recipe.polish_lr * annealed(recipe, recipe.steps - step)
    if step >= recipe.curriculum_start:
        return recipe.curriculum_lr * annealed(recipe, (recipe.polish_start or recipe.steps) - step)
    if step < recipe.lr_warmup:
        return recipe.lr * (step + 1) / recipe.lr_warmup
    progress = (step - recipe.lr_warmup) / max(1, recipe.lr_horizon - recipe.lr_warmup)
    return recipe.final_lr + (recipe.lr - recipe.final_lr) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def annealed(recipe, steps_left: int) -> float:
    """A phase's rate factor: 1, falling linearly to 0.1 over the phase's last ``anneal`` steps."""
    return max(0.1, min(1.0, steps_left / recipe.anneal)) if recipe.anneal else 1.0


def phase_of(recipe, step: int) -> int:
    """Which phase ``step`` is in: 1 (warm-up and text), 2 (the alphabet curriculum) or 3 (the polish)."""
    if recipe.polish_start and step >= recipe.polish_start:
        return 3
    return 2 if step >= recipe.curriculum_start else 1


def sentence_pool(recipe, train_ids: torch.Tensor) -> list[torch.Tensor]:
    """The training text's sentences that ``doubled_rows`` repeat (none when the recipe has no such rows)."""
    if not recipe.doubled_rows:
        return []
    text = bytes(train_ids.tolist()).decode("utf-8", errors="replace")
    longest = min(recipe.sentence_max, (recipe.context_length - 1) // 2)  # twice, a space between, fits
    return gpt_data.sentences(text, recipe.sentence_min, longest)


def batch_loss(model: GPTModel, recipe, data: tuple, gen: torch.Generator, step: int):
    """One step's loss on ``data`` (training ids, sentence pool): in the warm-up, the mean cross-entropy on the
    repeats of short random-byte induction rows; after it, the mean over the kinds of rows of each kind's mean (text
    everywhere, random bytes, alphabet rows and doubled sentences on the repeat)."""
    train_ids, pool = data
    if phase_of(recipe, step) == 3:
        length = recipe.context_length + 1
        text = gpt_data.text_windows(train_ids, gen, recipe.polish_text_rows, length)  # (b, T + 1)
        rows = [
            (text[:, :-1], text[:, 1:], torch.ones(text.shape[0], length - 1, dtype=torch.bool)),
            gpt_data.doubled_rows(pool, gen, recipe.polish_doubled_rows, recipe.context_length, train_ids),
            gpt_data.alphabet_rows(gen, recipe.polish_alphabet_rows, recipe.alphabet_length, recipe.alphabet_to),
        ]
        return sum(F.cross_entropy(model(ids)[scored], targets[scored]) for ids, targets, scored in rows) / len(rows)
    if step < recipe.induction_warmup:
        rows = [gpt_data.induction_rows(gen, recipe.warmup_rows, recipe.warmup_length, recipe.vocab_size)]
    elif step >= recipe.curriculum_start:
        letters = letters_at(recipe, step)
        rows = [gpt_data.alphabet_rows(gen, recipe.alphabet_rows, recipe.alphabet_length, letters)]
        length, span = recipe.context_length + 1, (recipe.span_min, recipe.span_max)
        for text in (
            gpt_data.text_windows(train_ids, gen, recipe.batch_size, length),
            gpt_data.periodic_text_rows(train_ids, gen, recipe.periodic_rows, length, span),
        ):  # each (b, T + 1)
            rows.append((text[:, :-1], text[:, 1:], torch.ones(text.shape[0], length - 1, dtype=torch.bool)))
    else:
        length, span = recipe.context_length + 1, (recipe.span_min, recipe.span_max)
        texts = [gpt_data.text_windows(train_ids, gen, recipe.batch_size, length)]  # each (b, T + 1)
        if recipe.text_repeat_rows:
            texts.append(gpt_data.repeated_text_rows(train_ids, gen, recipe.text_repeat_rows, length, span))
        if recipe.periodic_rows:
            texts.append(gpt_data.periodic_text_rows(train_ids, gen, recipe.periodic_rows, length, span))
        if recipe.few_letter_rows:
            texts.append(gpt_data.few_letter_rows(gen, recipe.few_letter_rows, length, recipe.few_letters))
        rows = [(t[:, :-1], t[:, 1:], torch.ones(t.shape[0], length - 1, dtype=torch.bool)) for t in texts]
        if recipe.repeat_rows:
            rows.append(gpt_data.induction_rows(gen, recipe.repeat_rows, recipe.context_length, recipe.vocab_size))
    if recipe.doubled_rows and step >= recipe.induction_warmup:
        rows.append(gpt_data.doubled_rows(pool, gen, recipe.doubled_rows, recipe.context_length, train_ids))
    means = [F.cross_entropy(model(ids)[scored], targets[scored]) for ids, targets, scored in rows]
    return sum(means) / len(means)
