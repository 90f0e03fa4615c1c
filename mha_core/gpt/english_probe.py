"""The developers' own repeated-English probe: sentences written for it, never in the training corpus.

Each sentence is read twice ("S S"): a model with working induction heads attends, on the second copy, to the
token after the same stretch in the first, and predicts the copy. The shipped model is scored on these (its record,
README and the Real heads page quote the numbers); ``tests/mha_core`` checks that no 20-character piece of any
sentence occurs in the corpus, so the scores are on text the model never saw.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mha_core.gpt import head_scores, knockout
from mha_core.gpt.model import GPTModel

SENTENCES = (
    "The cat sat on the mat and looked at the dog.",
    "My sister bakes bread every Sunday morning.",
    "A red kite flew over the quiet green valley.",
    "We walked to the market to buy fresh apples.",
    "The old clock in the hall stopped at noon.",
    "Rain fell softly on the roof all night long.",
    "Tom left his blue umbrella on the train.",
    "Our teacher read a story about a brave fox.",
    "The river was cold, so nobody went swimming.",
    "She planted tulips along the garden fence.",
    "A small boat drifted slowly toward the island.",
    "The children laughed when the puppy sneezed.",
    "He painted the kitchen door a bright yellow.",
    "Snow covered the hills before the sun came up.",
    "The baker sold every loaf before lunchtime.",
    "Grandpa keeps his fishing rods in the shed.",
    "A tall giraffe ate leaves from the top branch.",
    "The train to the coast leaves at half past nine.",
    "Mia found a shiny pebble near the lighthouse.",
    "The band played loud music until midnight.",
    "Bees buzzed around the purple flowers in May.",
    "The farmer counted his sheep twice that evening.",
    "Leo drew a map of the village on a napkin.",
    "The moon was bright above the sleeping town.",
    "Two owls sat together on the frozen branch.",
    "Her grandmother knitted a scarf for the winter.",
    "The football rolled into the neighbour's pond.",
    "We ate pancakes with honey on the porch.",
    "A gentle wind moved the curtains by the window.",
    "The doctor told him to drink more water.",
    "The library closes early on Saturday afternoons.",
    "Sam and Ella built a sandcastle by the sea.",
    "The kettle whistled while the toast was burning.",
    "An orange cat slept in a basket of socks.",
    "The hikers reached the summit before the storm.",
    "My uncle drives a tractor through the wheat.",
    "The museum has a dinosaur with huge teeth.",
    "Lucy wrote a letter to her friend in Spain.",
    "The horses ran across the meadow at dawn.",
    "A bright rainbow appeared after the thunder.",
    "The students packed their bags and waited for the yellow bus.",
    "After dinner we played cards by the fire until it was dark.",
    "A lost dog followed the postman all the way to the bakery.",
    "My brother fixed the old bicycle with a hammer and some tape.",
    "The gardener watered the roses before the sun became too hot.",
    "Every winter the lake freezes and the town goes skating there.",
    "She sang a quiet song while the baby fell asleep in her arms.",
    "The pilot waved to the crowd as the little plane took off.",
    "We saw three deer at the edge of the forest this morning.",
    "Nobody could find the key to the attic, so it stayed locked.",
)


def doubled(sentence: str) -> str:
    """The sentence typed twice, a space between: the text the probe reads."""
    return f"{sentence} {sentence}"


@dataclass(frozen=True, kw_only=True)
class EnglishScores:
    """What the probe measures, pooled over every sentence (L layers, h heads)."""

    induction: list[list[float]]  # (L, h) mean weight at the induction offset on the second copies
    first_copy_loss: float  # mean nats per token predicting the first copy (after its first token)
    second_copy_loss: float  # the same on the second copy
    second_copy_accuracy: float  # share of the second copy's tokens that the greedy guess gets right
    sentences: int
    tokens_scored: int  # per copy, all sentences together

    @property
    def best_induction(self) -> float:
        return max(max(row) for row in self.induction)


@torch.no_grad()
def score_repeats(
    model: GPTModel, tokenizer, sentences: tuple[str, ...] = SENTENCES, *, knocked_out=(), mode: str = "zero"
) -> EnglishScores:
    """Each sentence doubled through the model: induction scores, both copies' losses and the copy's accuracy;
    with ``knocked_out`` heads ((layer, head) pairs) silenced (``knockout``), so a circuit's effect is measured.

    With P the sentence's tokens plus the space, the text is 2P − 1 tokens; position t predicts t + 1, the first
    copy is read at t = 0..P−2 and the second at t = P..2P−3, both after their copy's first token."""
    was_training = model.training
    model.eval()
    induction, first, second, right, count = [], 0.0, 0.0, 0, 0
    for sentence in sentences:
        period = len(tokenizer.encode(sentence)) + 1
        ids = torch.tensor([tokenizer.encode(doubled(sentence))])  # (1, 2P - 1)
        run = knockout.forward_knocked_out(model, ids, knocked_out, mode)
        induction.append(head_scores.induction_score(run.weights[:, 0], period))  # (L, 1, h, T, T) -> (L, h)
        logits = run.logits  # (1, 2P - 1, V)
        loss = head_scores.loss_per_position(logits, ids)[0]  # (2P - 2,)
        first += loss[: period - 1].sum().item()
        second += loss[period:].sum().item()
        right += (logits[0, period:-1].argmax(-1) == ids[0, period + 1 :]).sum().item()
        count += period - 2
    model.train(was_training)
    return EnglishScores(
        induction=torch.stack(induction).mean(dim=0).tolist(),  # (n, L, h) -> (L, h)
        first_copy_loss=first / (count + len(sentences)),  # the first copy scores one more token: the space
        second_copy_loss=second / count,
        second_copy_accuracy=right / count,
        sentences=len(sentences),
        tokens_scored=count,
    )


@torch.no_grad()
def previous_token_scores(model: GPTModel, windows: torch.Tensor) -> torch.Tensor:
    """(L, h) each head's previous-token score on plain text: (n, T) windows, averaged."""
    was_training = model.training
    model.eval()
    weights = model.attention_weights(windows)  # (L, n, h, T, T)
    model.train(was_training)
    return head_scores.previous_token_score(weights).mean(dim=1)  # (L, n, h) -> (L, h)


INDUCTION_BAR = 0.1  # a layer's head counts as an induction head on the probe at this mean weight (even spread: ~0.02)
PREVIOUS_BAR = 0.3  # and a previous-token head on plain text at this one


def _summary(scores: EnglishScores) -> dict:
    return {
        "best_induction": scores.best_induction,
        "first_copy_loss": scores.first_copy_loss,
        "second_copy_loss": scores.second_copy_loss,
        "second_copy_accuracy": scores.second_copy_accuracy,
    }


@torch.no_grad()
def report(model: GPTModel, tokenizer, plain_windows: torch.Tensor) -> dict:
    """The record's account of the probe: scores, the previous-token scores on plain text (``plain_windows``
    (n, T)), which heads are which, and the probe again with each kind knocked out (zeroed, then mean-ablated)."""
    intact = score_repeats(model, tokenizer)
    previous = previous_token_scores(model, plain_windows)  # (L, h)
    induction = torch.tensor(intact.induction)  # (L, h)
    kinds = {
        "previous-token heads": [(l, h) for l, h in (previous >= PREVIOUS_BAR).nonzero().tolist() if l == 0],
        "induction heads": [(l, h) for l, h in (induction >= INDUCTION_BAR).nonzero().tolist() if l > 0],
    }
    knockouts = []
    for kind, heads in kinds.items():
        for mode in ("zero", "mean"):
            if heads:
                scores = score_repeats(model, tokenizer, knocked_out=heads, mode=mode)
                knockouts.append({"kind": kind, "heads": heads, "mode": mode} | _summary(scores))
    return {
        "sentences": intact.sentences,
        "tokens_per_copy": intact.tokens_scored,
        "induction": intact.induction,
        "previous_token_on_text": previous.tolist(),
        "best_previous_token_on_text": float(previous.max()),
        "heads": kinds,
        "knockouts": knockouts,
    } | _summary(intact)
