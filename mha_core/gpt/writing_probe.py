"""Does the shipped GPT write? Given a sentence, a space and the first 10 characters of the sentence again, greedy
decoding should finish the second copy on its own, character by character, with nothing true given after the start.

Teacher-forced accuracy (``english_probe``) hides compounding: 90% per character completes almost no sentence of 50
characters. This probe counts whole completions and how far each copy gets before its first mistake. ``SENTENCES``
are written for it, 45-120 characters, none in the corpus (a test checks every 20-character piece), and never used by
training (its English rows come from the corpus's training split).

Axis letters: b batch (sentences), T tokens, V vocabulary.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from mha_core.gpt.model import GPTModel

PREFIX = 10  # characters of the second copy given before the model writes on its own

SENTENCES = (
    "The baker opened his shop early on a cold morning.",
    "Anna carried a basket of pears up the steep hill.",
    "The little boat rocked gently beside the wooden pier.",
    "My cousin plays the violin in the school orchestra.",
    "Three ducks waddled across the road toward the pond.",
    "On the last day of the school trip we visited a castle, a chocolate factory and a farm full of very noisy geese.",
    "The clock tower rang twelve times over the empty square.",
    "Her new shoes squeaked on the polished gym floor.",
    "A fox crept past the henhouse while the farmer slept.",
    "We planted a cherry tree behind the garage last spring.",
    "The waiter dropped a tray of glasses and everyone clapped.",
    "Grandma hides chocolate in the blue tin above the sink.",
    "The storm knocked down the old fence near the barn.",
    "Jack lost his glove somewhere between school and home.",
    "A parrot at the zoo kept shouting hello to every visitor.",
    "The soup was too salty, so she added a potato to it.",
    "Our neighbours painted their front door a dark green colour.",
    "The kitten chased a ribbon under the sofa and got stuck there.",
    "On rainy days the children build forts out of blankets.",
    "The fisherman mended his nets while the gulls circled above.",
    "Ben forgot his lunch, so his friends shared their sandwiches with him.",
    "The old bridge creaked loudly as the heavy truck rolled across it.",
    "Every evening the lighthouse keeper climbed the narrow stairs to the lamp.",
    "The teacher asked the class to write a poem about the ocean.",
    "A swarm of bees settled on the branch of the apple tree.",
    "We waited for the bus in the rain for almost half an hour.",
    "The farmer's dog herded the goats back into the field before dark.",
    "Maria keeps a diary and writes in it every night before bed.",
    "The mountain road was closed because of snow, so we turned back.",
    "My grandfather grows tomatoes, beans and pumpkins in his garden.",
    "The museum guard yawned as the last visitors walked toward the exit.",
    "A hot air balloon drifted slowly over the fields on a calm summer evening.",
    "The twins argued about whose turn it was to feed the goldfish that morning.",
    "Last winter the pipes froze and the whole street had no water for two days.",
    "The chef tasted the sauce, frowned, and reached for a pinch of pepper.",
    "When the power went out, we lit candles and told stories in the dark.",
    "The postwoman whistled a tune as she pushed letters through each door on the lane.",
    "Our train stopped in a tunnel for ten minutes, and nobody knew why it had stopped.",
    "The old sailor told the children about storms, whales and islands made of ice.",
    "After the football match the players shook hands and walked slowly off the muddy pitch.",
    "She found an old photograph of her parents dancing at a wedding by the sea.",
    "The school choir practised the same song every afternoon until it sounded perfect.",
    "A tiny mouse lived behind the fridge and came out at night to look for crumbs.",
    "The gardener raked the leaves into a big pile, and the dog leapt straight into the centre of it.",
    "Every Saturday my aunt drives to the farmers market and comes back with far too many vegetables.",
    "The astronaut looked out of the small window and saw the blue planet turning slowly below her.",
    "When the snow finally melted, the village held a festival with music, games and warm bread for everyone.",
    "The bookshop on the corner has a sleepy cat that lies in the window and ignores every customer"
    " who taps the glass.",
    "In the summer holidays we camped beside a lake, caught small fish and watched the stars until we fell asleep.",
    "The carpenter measured the plank twice, cut it once, and fitted it perfectly into the gap"
    " in the old wooden floor.",
)


def prompt(sentence: str) -> str:
    """The sentence, a space and the first ``PREFIX`` characters of it again: where the model starts writing."""
    return f"{sentence} {sentence[:PREFIX]}"


@torch.no_grad()
def greedy_continue(model: GPTModel, tokenizer, prompts: list[str], lengths: list[int]) -> list[str]:
    """Each prompt continued by ``lengths[i]`` greedy tokens, all prompts in one batch. Rows are padded on the right:
    with the causal mask a pad after a row's last token changes nothing it reads, so each row decodes as if alone."""
    if len(prompts) != len(lengths) or min(lengths, default=1) < 1:
        raise ValueError(f"need one length >= 1 per prompt, got {len(prompts)} prompts and lengths {lengths}")
    encoded = [tokenizer.encode(text) for text in prompts]
    ends = torch.tensor([len(ids) for ids in encoded])  # (b,) each row's current length
    longest = int((ends + torch.tensor(lengths)).max()) - 1  # the last token read is never fed back
    if longest > model.cfg["context_length"]:
        reads = model.cfg["context_length"]
        raise ValueError(f"a prompt and its continuation need {longest} tokens, the model reads {reads}")
    was_training = model.training
    model.eval()
    ids = torch.zeros(len(prompts), longest + 1, dtype=torch.int64)  # (b, T + 1) right-padded
    for row, tokens in enumerate(encoded):
        ids[row, : len(tokens)] = torch.tensor(tokens)
    left = torch.tensor(lengths)  # (b,) tokens still to write
    rows = torch.arange(len(prompts))
    while bool((left > 0).any()):
        logits = model(ids[:, : int(ends[left > 0].max())])  # (b, t, V)
        guess = logits[rows, (ends - 1).clamp(max=logits.shape[1] - 1)].argmax(-1)  # (b,)
        writing = left > 0
        ids[rows[writing], ends[writing]] = guess[writing]
        ends, left = ends + writing, left - writing.long()
    model.train(was_training)
    return [tokenizer.decode(ids[row, len(encoded[row]) : ends[row]].tolist()) for row in range(len(prompts))]


@dataclass(frozen=True, kw_only=True)
class WritingScores:
    """Free-running copies: how many finish exactly, and how far each gets before its first mistake."""

    completed: int  # sentences whose whole remainder was written exactly
    sentences: int
    correct_before_mistake: list[int]  # per sentence: characters written right before the first wrong one
    to_write: list[int]  # per sentence: characters it had to write
    written: list[str]  # what the model wrote

    @property
    def completed_share(self) -> float:
        return self.completed / self.sentences

    @property
    def median_before_mistake(self) -> float:
        return float(statistics.median(self.correct_before_mistake))


def first_mistake(written: str, truth: str) -> int:
    """How many characters of ``written`` match ``truth`` before the first that does not."""
    for i, (a, b) in enumerate(zip(written, truth, strict=False)):
        if a != b:
            return i
    return min(len(written), len(truth))


@torch.no_grad()
def teacher_forced_mistakes(model: GPTModel, tokenizer, sentences: tuple[str, ...] = SENTENCES) -> list[int]:
    """Per sentence, the characters the free-running copy gets right before its first mistake, read off one
    teacher-forced pass: until its first mistake greedy decoding has written the true text, so its first wrong
    guess is the first position where the guess given the true text is wrong. One forward pass instead of one per
    character: cheap enough for every checkpoint of a run (``free_running`` decodes, and a test checks they agree)."""
    texts = [tokenizer.encode(doubled) for doubled in (f"{s} {s}" for s in sentences)]
    ids = torch.zeros(len(texts), max(map(len, texts)), dtype=torch.int64)  # (b, T) right-padded
    for row, tokens in enumerate(texts):
        ids[row, : len(tokens)] = torch.tensor(tokens)
    was_training = model.training
    model.eval()
    guesses = model(ids[:, :-1]).argmax(-1)  # (b, T - 1): position t's guess for token t + 1
    model.train(was_training)
    right = []
    for row, (sentence, tokens) in enumerate(zip(sentences, texts, strict=True)):
        start = len(prompt(sentence))  # the first token written on its own
        wrong = (guesses[row, start - 1 : len(tokens) - 1] != ids[row, start : len(tokens)]).nonzero()  # (k, 1)
        right.append(int(wrong[0, 0]) if len(wrong) else len(tokens) - start)
    return right


def free_running(model: GPTModel, tokenizer, sentences: tuple[str, ...] = SENTENCES) -> WritingScores:
    """Each sentence's prompt continued greedily by the rest of the sentence (``len - PREFIX`` characters), scored."""
    if any(len(s) <= PREFIX or not s.isascii() for s in sentences):
        raise ValueError(f"sentences must be ASCII and longer than {PREFIX} characters")
    truths = [s[PREFIX:] for s in sentences]
    written = greedy_continue(model, tokenizer, [prompt(s) for s in sentences], [len(t) for t in truths])
    right = [first_mistake(w, t) for w, t in zip(written, truths, strict=True)]
    return WritingScores(
        completed=sum(r == len(t) for r, t in zip(right, truths, strict=True)),
        sentences=len(sentences),
        correct_before_mistake=right,
        to_write=[len(t) for t in truths],
        written=written,
    )


def summary(scores: WritingScores) -> dict:
    """The record's account: counts, share, median, and per sentence how far it got and what it wrote."""
    return {
        "sentences": scores.sentences,
        "completed": scores.completed,
        "completed_share": scores.completed_share,
        "median_before_mistake": scores.median_before_mistake,
        "correct_before_mistake": scores.correct_before_mistake,
        "to_write": scores.to_write,
        "written": scores.written,
    }
