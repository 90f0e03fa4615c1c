"""The free-running probe (issue 46): greedy decoding in one batch, its scoring, and its held-out sentences.

The scorer is checked with an oracle model that writes planted texts, so every count and first mistake is known;
the batched decoder against decoding each prompt alone. The shipped model's own numbers are in test_gpt_training.
"""

from __future__ import annotations

import statistics

import pytest
import torch
import torch.nn as nn

from mha_core.gpt import data as gpt_data
from mha_core.gpt import english_probe, writing_probe
from mha_core.gpt.model import GPTModel
from mha_core.gpt.text_tokenizer import ByteTokenizer

TOKENIZER = ByteTokenizer()


class Oracle(nn.Module):
    """Writes fixed texts: a row that starts like one of ``texts`` gets, at every position, that text's next byte."""

    def __init__(self, texts: list[str], context_length: int = 256):
        super().__init__()
        self.cfg = {"context_length": context_length}
        self.texts = [TOKENIZER.encode(text) for text in texts]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, 256)  # (b, T, V)
        for row, tokens in enumerate(ids.tolist()):
            text = next(t for t in self.texts if t[:20] == tokens[:20])
            for position in range(min(len(tokens), len(text) - 1)):
                logits[row, position, text[position + 1]] = 1.0
        return logits


def tiny_gpt() -> GPTModel:
    torch.manual_seed(3)
    cfg = {"vocab_size": 256, "context_length": 64, "emb_dim": 16, "n_heads": 2, "n_layers": 2, "drop_rate": 0.0}
    return GPTModel(cfg | {"qkv_bias": False}).eval()


def test_one_batch_writes_what_each_prompt_writes_alone():
    """Right padding is harmless under the causal mask: each row decodes as the plain one-prompt loop does."""
    model = tiny_gpt()
    prompts, lengths = ["The cat sat", "A much longer prompt, here", "x"], [7, 3, 12]
    batched = writing_probe.greedy_continue(model, TOKENIZER, prompts, lengths)
    for text, length, written in zip(prompts, lengths, batched, strict=True):
        ids = torch.tensor([TOKENIZER.encode(text)])  # (1, t)
        with torch.no_grad():
            for _ in range(length):
                ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)  # (1, t + 1)
        assert written == TOKENIZER.decode(ids[0, len(text) :].tolist())
        assert len(written.encode("utf-8", errors="surrogateescape")) >= 1


def test_free_running_counts_whole_copies_and_the_first_mistake():
    """An oracle that copies some sentences exactly and errs at a planted character in the others."""
    sentences = writing_probe.SENTENCES[:6]
    mistakes = {1: 0, 3: 17, 4: 5}  # sentence index -> characters written right before a wrong one
    written = []
    for i, sentence in enumerate(sentences):
        rest = list(sentence[writing_probe.PREFIX :])
        if i in mistakes:
            rest[mistakes[i]] = "#"
        written.append(writing_probe.prompt(sentence) + "".join(rest))
    scores = writing_probe.free_running(Oracle(written), TOKENIZER, sentences)
    expected = [mistakes.get(i, len(s) - writing_probe.PREFIX) for i, s in enumerate(sentences)]
    assert scores.correct_before_mistake == expected
    assert scores.completed == len(sentences) - len(mistakes) and scores.sentences == len(sentences)
    assert scores.median_before_mistake == statistics.median(expected)
    assert scores.to_write == [len(s) - writing_probe.PREFIX for s in sentences]
    assert scores.written[3][mistakes[3]] == "#"
    assert writing_probe.teacher_forced_mistakes(Oracle(written), TOKENIZER, sentences) == expected
    summary = writing_probe.summary(scores)
    assert summary["completed_share"] == pytest.approx(scores.completed / len(sentences))


@pytest.mark.parametrize(
    ("written", "truth", "right"), [("abc", "abc", 3), ("abd", "abc", 2), ("xbc", "abc", 0), ("ab", "abc", 2)]
)
def test_first_mistake_counts_the_matching_start(written, truth, right):
    assert writing_probe.first_mistake(written, truth) == right


def test_a_prompt_too_long_for_the_context_is_a_value_error_naming_the_numbers():
    with pytest.raises(ValueError, match=r"need 70 tokens, the model reads 64"):
        writing_probe.greedy_continue(tiny_gpt(), TOKENIZER, ["a" * 60], [11])
    with pytest.raises(ValueError, match="one length >= 1 per prompt"):
        writing_probe.greedy_continue(tiny_gpt(), TOKENIZER, ["a", "b"], [3])


def test_the_held_out_sentences_are_45_to_120_characters_never_in_the_corpus():
    """Written for the probe: no 20-character piece in the corpus (training or held-out), none of the English
    probe's sentences, and twice with a space they fit a 256-byte context."""
    text = "".join(gpt_data.corpus())
    assert len(writing_probe.SENTENCES) >= 50 and len(set(writing_probe.SENTENCES)) == len(writing_probe.SENTENCES)
    assert not set(writing_probe.SENTENCES) & set(english_probe.SENTENCES)
    for sentence in writing_probe.SENTENCES:
        assert 45 <= len(sentence) <= 120 and sentence.isascii(), sentence
        pieces = [sentence[i : i + 20] for i in range(len(sentence) - 19)]
        assert not [p for p in pieces if p in text], sentence
    assert 2 * max(map(len, writing_probe.SENTENCES)) + 1 <= 256


def test_doubled_rows_type_each_piece_twice_and_score_the_second_copy():
    train_text, _ = gpt_data.corpus()
    ids = gpt_data.encode(TOKENIZER, train_text)
    pool = gpt_data.sentences(train_text, 20, 60)
    assert all(20 <= len(s) <= 60 for s in pool) and len(pool) > 100
    rows, targets, scored = gpt_data.doubled_rows(pool, torch.Generator().manual_seed(4), 5, 128, ids)
    assert rows.shape == targets.shape == scored.shape == (5, 128)
    assert torch.equal(targets[:, :-1], rows[:, 1:])
    for row, target, mask in zip(rows.tolist(), targets.tolist(), scored.tolist(), strict=True):
        text, start = row + target[-1:], 0  # (T + 1,) the whole row; a piece starts at ``start``
        while True:  # each piece: S, a space, S again, a newline; the targets scored are the second S and the newline
            size = mask.index(True, start) - start  # the first scored target follows the space after S
            assert not any(mask[start : start + size]) and text[start + size] == ord(" ")
            copy = text[start + size + 1 : start + 2 * size + 1]
            assert copy == text[start : start + len(copy)]
            if start + 2 * size + 2 > len(text) - 1 or True not in mask[start + 2 * size + 2 :]:
                break  # the last piece, perhaps cut short by the row's end
            assert text[start + 2 * size + 1] == ord("\n") and all(mask[start + size : start + 2 * size + 1])
            start += 2 * size + 2
        assert any(mask)
