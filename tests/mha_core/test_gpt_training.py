"""The shipped GPT (issue 18): the book's architecture, reproducible training, and the heads it is shipped for.

The record (own_gpt.json) is checked against what the code recomputes from the shipped files: the first
training losses (a short retrain of the same recipe and seed), the held-out and unigram losses, the head
scores on the probe. Tolerances are relative, never bitwise: matmuls differ slightly between CPUs.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import mha_core
from mha_core.attention.modules import trace_forward
from mha_core.gpt import curriculum, english_probe, head_scores, training_run, writing_probe
from mha_core.gpt import data as gpt_data
from mha_core.gpt import evaluation as gpt_eval
from mha_core.gpt import generation as gpt_generation
from mha_core.gpt import training as gpt_training
from mha_core.gpt.model import GPTModel

TINY = {"vocab_size": 50, "context_length": 12, "emb_dim": 16, "n_heads": 4, "n_layers": 3, "drop_rate": 0.0}
RETRAIN_STEPS = 20


@pytest.fixture
def one_thread():
    """Training on one thread: the shipped run used one, and two threads on a busy 2-core machine crawl."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def shipped():
    return gpt_training.load_shipped()


@pytest.fixture(scope="module")
def record():
    return gpt_training.load_record()


@pytest.fixture(scope="module")
def recipe(record):
    return gpt_training.Recipe(**record["recipe"])


@pytest.fixture(scope="module")
def prepared(recipe):
    """(tokenizer, training ids, held-out ids): the corpus as bytes."""
    return gpt_training.prepare(recipe)


def tiny_model() -> GPTModel:
    torch.manual_seed(0)
    return GPTModel({**TINY, "qkv_bias": True}).eval()


# the book's architecture (issue 18, item 1) --------------------------------------------------------------------


def test_the_model_has_the_books_parts_and_the_projects_attention():
    model = tiny_model()
    for name in ("tok_emb", "pos_emb", "drop_emb", "trf_blocks", "final_norm", "out_head"):
        assert hasattr(model, name), name
    assert len(model.trf_blocks) == TINY["n_layers"]
    for block in model.trf_blocks:
        assert isinstance(block.att, mha_core.MultiHeadAttention)
        for name in ("ff", "norm1", "norm2"):
            assert hasattr(block, name), name


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_tracing_a_blocks_attention_on_its_real_input_gives_what_the_block_computes(layer):
    model = tiny_model()
    ids = torch.randint(0, TINY["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(1))  # (b, T)
    seen = {}
    hook = model.trf_blocks[layer].att.register_forward_hook(lambda _m, _i, out: seen.setdefault("out", out))
    with torch.no_grad():
        model(ids)
    hook.remove()
    traced = trace_forward(model.trf_blocks[layer].att, model.attention_input(ids, layer))
    assert traced.output.shape == (2, 9, TINY["emb_dim"])
    torch.testing.assert_close(traced.output, seen["out"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("ids", "numbers"),
    [
        (torch.tensor([[1, 2, 50]]), r"\[0, 50\).*1\.\.50"),
        (torch.tensor([[-1, 2]]), r"\[0, 50\).*-1\.\.2"),
        (torch.zeros(1, 13, dtype=torch.int64), r"13 tokens.*1 to 12"),
    ],
)
def test_bad_ids_raise_a_value_error_naming_the_numbers(ids, numbers):
    with pytest.raises(ValueError, match=numbers):
        tiny_model()(ids)


# head scores on hand-made weights ------------------------------------------------------------------------------


def test_head_scores_read_the_right_cells_of_hand_made_weights():
    head0 = [
        [1.0, 0.0, 0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.5, 0.5, 0.0, 0.0],
        [0.0, 0.5, 0.25, 0.25, 0.0],
        [0.0, 0.0, 0.5, 0.25, 0.25],
    ]
    head1 = [[1.0, 0.0, 0.0, 0.0, 0.0]] * 5  # always on the first token
    weights = torch.tensor([head0, head1])  # (h, T, T), queries on rows
    assert head_scores.previous_token_score(weights).tolist() == [(1.0 + 0.5 + 0.25 + 0.25) / 4, 0.25]
    assert head_scores.first_token_score(weights).tolist() == [0.25, 1.0]
    # period 3: queries 3 and 4 on keys 1 and 2
    assert head_scores.induction_score(weights, 3).tolist() == [0.5, 0.0]
    assert head_scores.induction_score(weights[None], 3).shape == (1, 2)  # leading axes kept
    assert head_scores.strongest(torch.tensor([[0.1, 0.2], [0.7, 0.3]])) == (1, 0, pytest.approx(0.7))


def test_a_perfect_induction_pattern_scores_one_and_the_wrong_period_scores_zero():
    period, length = 3, 6
    weights = torch.zeros(1, length, length)  # (h, T, T)
    weights[0, 0, 0] = 1.0
    for i in range(1, length):
        weights[0, i, i - period + 1 if i >= period else 0] = 1.0
    assert head_scores.induction_score(weights, period).tolist() == [1.0]
    assert head_scores.induction_score(weights, period + 1).tolist() == [0.0]
    with pytest.raises(ValueError, match=r"period must be in \[1, 5\] for T=6, got 6"):
        head_scores.induction_score(weights, 6)


# the shipped files ---------------------------------------------------------------------------------------------


def test_the_weights_file_is_at_most_10_mb():
    assert (gpt_training.SHIPPED / gpt_training.WEIGHTS).stat().st_size <= 10 * 2**20


def test_the_shipped_model_loads_in_eval_mode_float32_and_gives_logits(shipped, record):
    model, tokenizer = shipped
    assert isinstance(model, GPTModel) and not model.training
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert model.cfg == record["config"] and tokenizer.vocab_size == record["config"]["vocab_size"]
    ids = torch.tensor([tokenizer.encode("def f(x):\n    return x + 1")])  # (1, T)
    assert model(ids).shape == (1, ids.shape[1], record["config"]["vocab_size"])


@pytest.mark.parametrize("text", ["The for statement iterates.", "naïve café ☕ — 𝔘nicode\ttabs\n", "x=1;;  y"])
def test_the_shipped_tokenizer_is_utf8_bytes_and_round_trips_any_text(shipped, text):
    _, tokenizer = shipped
    ids = tokenizer.encode(text)
    assert ids == list(text.encode("utf-8")) and tokenizer.vocab_size == 256
    assert tokenizer.decode(ids) == text


def test_the_byte_tokenizer_decodes_any_ids_and_labels_each_byte(shipped):
    _, tokenizer = shipped
    assert tokenizer.decode([0xE2, 0x98, 0x95]) == "☕"
    assert tokenizer.decode([0xE2, 0x98]) == "\ufffd"  # a cut character (or random bytes) still decodes
    assert tokenizer.labels([ord("a"), 32, 10, 9, 0xE2, 127]) == ["a", "·", "⏎", "⇥", "xe2", "x7f"]
    with pytest.raises(ValueError, match=r"\[256\] lie outside the vocabulary \[0, 256\)"):
        tokenizer.decode([256])


def test_induction_rows_score_exactly_the_repeat_and_their_targets_are_the_next_ids():
    ids, targets, scored = gpt_data.induction_rows(torch.Generator().manual_seed(3), 8, 32, 256)  # (8, 32) each
    assert ids.shape == targets.shape == scored.shape == (8, 32)
    for row, target, mask in zip(ids, targets, scored, strict=True):
        first = int(mask.nonzero()[0])  # the first token of the second copy
        period = 32 - first
        assert mask[first:].all() and not mask[:first].any()
        assert torch.equal(row[first:], row[first - period : first])  # the segment, repeated
        assert torch.equal(target[first:-1], row[first + 1 :])  # in the repeat the target is the next id
        assert len(set(row[:first].tolist())) == first  # before the repeat, all distinct


def test_a_short_retrain_reproduces_the_recorded_losses_and_the_loss_falls(prepared, record, recipe, one_thread):
    _, train_ids, _ = prepared
    _, losses, _, _ = gpt_training.train(recipe, train_ids, stop_after=RETRAIN_STEPS)
    assert sorted(losses) == list(range(recipe.log_every, RETRAIN_STEPS + 1, recipe.log_every))
    for step, loss in losses.items():
        assert loss == pytest.approx(record["train_loss"][str(step)], rel=1e-3), step
    recorded = [record["train_loss"][str(step)] for step in sorted(map(int, record["train_loss"]))]
    assert losses[RETRAIN_STEPS] < losses[recipe.log_every] < math.log(recipe.vocab_size) + 0.5
    assert recorded[-1] < recorded[0] - 1.0


def test_the_model_beats_the_unigram_baseline_on_held_out_text(shipped, prepared, record, recipe):
    model, _ = shipped
    _, train_ids, heldout_ids = prepared
    unigram = gpt_data.unigram_loss(train_ids, heldout_ids[1:], recipe.vocab_size)  # the targets the model reads
    assert unigram == pytest.approx(record["unigram_heldout_loss"], rel=1e-6)
    windows = gpt_data.heldout_windows(heldout_ids, recipe.context_length, max_windows=8)  # (8, T + 1)
    loss = gpt_eval.mean_loss(model, windows)
    assert loss < unigram - 1.0
    assert record["heldout_loss"] < record["unigram_heldout_loss"] - 1.0


def test_the_head_scores_recomputed_on_the_probe_match_the_record(shipped, record, recipe):
    model, _ = shipped
    scores = gpt_eval.measure_heads(model, gpt_eval.probe(recipe), recipe.probe_period)
    for kind, value in scores.items():
        assert value.shape == (recipe.n_layers, recipe.n_heads)
        torch.testing.assert_close(value, torch.tensor(record["head_scores"][kind]), rtol=1e-3, atol=1e-4)
        layer, head, best = head_scores.strongest(value)
        assert record["strongest"][kind][:2] == [layer, head] and best == pytest.approx(record["strongest"][kind][2])


def test_the_shipped_model_has_a_previous_token_and_an_induction_head(shipped, recipe):
    """On the probe and on a probe with another period, so the induction head follows content, not a distance."""
    model, _ = shipped
    scores = gpt_eval.measure_heads(model, gpt_eval.probe(recipe), recipe.probe_period)
    assert head_scores.strongest(scores["previous token"])[2] >= 0.5
    assert head_scores.strongest(scores["induction"])[2] >= 0.4
    period = recipe.probe_period // 2 + 5
    ids = head_scores.repeated_random_tokens(recipe.vocab_size, period, batch_size=8, seed=7)  # (8, 2·period)
    assert head_scores.strongest(gpt_eval.measure_heads(model, ids, period)["induction"])[2] >= 0.4


# English the model never saw (issue 32) -------------------------------------------------------------------------


def test_the_probe_sentences_are_not_in_the_corpus():
    text = "".join(gpt_data.corpus())
    for sentence in english_probe.SENTENCES:
        pieces = [sentence[i : i + 20] for i in range(len(sentence) - 19)]
        assert not [p for p in pieces if p in text], sentence
    assert len(english_probe.SENTENCES) >= 40 and max(map(len, english_probe.SENTENCES)) <= 63  # twice fits in 128


def test_on_repeated_english_it_never_saw_the_induction_heads_copy(shipped, record):
    """Issue 32's bar, recomputed from the shipped files: best induction head >= 0.4 at the induction offset, the
    copy's loss at most half the first copy's, >= 80% of the copy guessed, a previous-token head >= 0.5 on text."""
    model, tokenizer = shipped
    scores = english_probe.score_repeats(model, tokenizer)
    assert scores.best_induction >= 0.4
    assert scores.second_copy_loss <= 0.5 * scores.first_copy_loss
    assert scores.second_copy_accuracy >= 0.8
    recorded = record["english_probe"]
    assert scores.best_induction == pytest.approx(recorded["best_induction"], rel=1e-3)
    assert scores.second_copy_loss == pytest.approx(recorded["second_copy_loss"], rel=1e-3)
    assert recorded["best_previous_token_on_text"] >= 0.5


def test_the_shipped_model_writes_what_its_record_says_and_keeps_its_bars(shipped, record, recipe):
    """Issue 46's free-running measure, recomputed from the shipped files: a sentence of 120 characters fits twice;
    every count as recorded (all from one teacher-forced pass, the first five by greedy decoding too); and the
    English probe, the previous-token head and the held-out loss keep their bars."""
    model, tokenizer = shipped
    assert recipe.context_length >= 2 * 120 + 1
    right = writing_probe.teacher_forced_mistakes(model, tokenizer)
    assert right == record["writing"]["correct_before_mistake"]
    decoded = writing_probe.free_running(model, tokenizer, writing_probe.SENTENCES[:5])
    assert decoded.correct_before_mistake == right[:5]
    to_write = [len(s) - writing_probe.PREFIX for s in writing_probe.SENTENCES]
    assert sum(r == n for r, n in zip(right, to_write, strict=True)) == record["writing"]["completed"]
    english = english_probe.score_repeats(model, tokenizer)
    assert english.best_induction >= 0.5 and english.second_copy_accuracy >= 0.98
    assert record["english_probe"]["best_previous_token_on_text"] >= 0.5
    assert record["heldout_loss"] <= 1.40


@pytest.mark.xfail(
    strict=True,
    reason="issue 46's bar, not reached within its 2-hour budget: the shipped model completes 12 of the 50 held-out "
    "sentences on its own, the bar is 45 (docs/decisions.md: what its mistakes are and what was tried)",
)
def test_the_shipped_model_writes_the_held_out_sentences_on_its_own(record):
    """Issue 46's bar: greedy decoding completes >= 90% of the held-out sentences (the count is the record's, which
    the test above recomputes from the shipped files)."""
    assert record["writing"]["completed"] >= 0.9 * len(writing_probe.SENTENCES)


def test_the_readme_screenshot_of_the_model_writing_says_what_the_model_writes(shipped):
    """README's picture of "Continue my sentence" (bench/screenshots.py takes it): the numbers in its description,
    recomputed with the library's generation, with every head and with layer 1's four induction heads zeroed."""
    from bench import screenshots

    model, tokenizer = shipped
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    claim = re.search(r"writes the other (\d+) exactly with every head.*?induction heads (\d+) of (\d+) match", readme)
    assert claim, "README no longer describes the writing screenshot"
    count, knocked_match, knocked_of = map(int, claim.groups())
    sentence = screenshots.WRITES
    prompt_ids = tokenizer.encode(f"{sentence} {sentence[:10]}")
    copy = tokenizer.encode(sentence[10:])
    assert count == knocked_of == len(copy)
    prompt = torch.tensor([prompt_ids])
    for heads, expected in (((), count), (tuple((1, h) for h in range(4)), knocked_match)):
        out = gpt_generation.generate(model, prompt, count, model.cfg["context_length"], heads=heads, mode="zero")
        written = out[0, len(prompt_ids) :].tolist()
        assert sum(w == c for w, c in zip(written, copy, strict=True)) == expected, (heads, tokenizer.decode(written))
    assert "&ablate=1.0,1.1,1.2,1.3" in screenshots.WRITING


def test_knocking_out_the_previous_token_heads_breaks_the_copy(shipped, record):
    model, tokenizer = shipped
    heads = [tuple(pair) for pair in record["english_probe"]["heads"]["previous-token heads"]]
    assert heads and all(layer == 0 for layer, _ in heads)
    knocked = english_probe.score_repeats(model, tokenizer, english_probe.SENTENCES[:10], knocked_out=heads)
    intact = english_probe.score_repeats(model, tokenizer, english_probe.SENTENCES[:10])
    assert knocked.second_copy_loss > intact.second_copy_loss + 1.0
    assert knocked.second_copy_accuracy < intact.second_copy_accuracy - 0.4


def test_heldout_loss_reads_every_heldout_token_beside_the_unigram(shipped, prepared, record, recipe):
    model, _ = shipped
    _, train_ids, heldout_ids = prepared
    assert record["heldout_tokens_scored"] == heldout_ids.numel() - 1
    assert record["unigram_heldout_loss"] == pytest.approx(
        gpt_data.unigram_loss(train_ids, heldout_ids[1:], recipe.vocab_size), rel=1e-9
    )
    part = heldout_ids[: 3 * recipe.context_length + 7]  # three whole windows and a short one
    windows = gpt_data.heldout_windows(part, recipe.context_length)  # (3, T + 1): the whole ones
    whole = gpt_eval.mean_loss(model, windows) * 3 * recipe.context_length
    tail = part[3 * recipe.context_length :]  # (8,): the short window's 7 targets
    short = F.cross_entropy(model(tail[None, :-1])[0], tail[1:], reduction="sum").item()
    assert gpt_eval.heldout_loss(model, part, recipe.context_length) == pytest.approx(
        (whole + short) / (part.numel() - 1), rel=1e-5
    )


def test_alphabet_rows_repeat_a_stretch_and_score_inside_the_copy():
    ids, targets, scored = gpt_data.alphabet_rows(torch.Generator().manual_seed(2), 6, 64, 3)
    assert ids.shape == targets.shape == scored.shape == (6, 64)
    for row, target, mask in zip(ids, targets, scored, strict=True):
        assert len(set(row.tolist())) <= 3 and all(33 <= int(v) < 127 for v in row)
        assert torch.equal(target[:-1], row[1:])
        assert mask.any()
    with pytest.raises(ValueError, match="letters"):
        gpt_data.alphabet_rows(torch.Generator(), 1, 64, 1)


def test_phase_two_shrinks_the_alphabet_and_keeps_its_rate(recipe):
    assert curriculum.letters_at(recipe, recipe.curriculum_start) == recipe.alphabet_from
    assert curriculum.letters_at(recipe, recipe.curriculum_start + recipe.alphabet_decay) == recipe.alphabet_to
    middle = curriculum.letters_at(recipe, recipe.curriculum_start + recipe.alphabet_decay // 2)
    assert recipe.alphabet_to < middle < recipe.alphabet_from
    assert curriculum.learning_rate(recipe, recipe.curriculum_start) == recipe.curriculum_lr
    assert curriculum.learning_rate(recipe, 0) == pytest.approx(recipe.lr)


TINY_RUN = {  # a recipe small enough for a test: every phase, and doubled sentences, in ten steps
    "context_length": 128,  # the English probe's sentences twice (the milestones) fit
    "emb_dim": 16, "n_heads": 2, "steps": 10, "induction_warmup": 2, "warmup_rows": 4, "warmup_length": 8,
    "batch_size": 2, "text_repeat_rows": 2, "periodic_rows": 2, "few_letter_rows": 2, "repeat_rows": 2,
    "doubled_rows": 2, "span_min": 2, "span_max": 8, "curriculum_start": 6, "alphabet_rows": 2,
    "alphabet_length": 16, "anneal": 3, "log_every": 1,
}  # fmt: skip


def test_a_run_resumes_from_its_checkpoint_bit_for_bit(prepared, tmp_path, one_thread):
    """Ten steps in one go equal five, a stop, and five more from the run directory: the model, the losses and
    the milestones are identical (same machine, same thread count), the log says where it resumed."""
    _, train_ids, _ = prepared
    tiny = gpt_training.Recipe(**TINY_RUN)
    straight, losses, _, milestones = gpt_training.train(tiny, train_ids, run_dir=tmp_path / "a", checkpoint_every=5)
    gpt_training.train(tiny, train_ids, stop_after=5, run_dir=tmp_path / "b", checkpoint_every=5)
    assert [p.name for p in training_run.checkpoints(tmp_path / "b")] == ["step-000005.pt"]
    resumed, resumed_losses, _, resumed_milestones = gpt_training.train(
        tiny, train_ids, run_dir=tmp_path / "b", checkpoint_every=5
    )
    assert sorted(resumed_losses) == list(range(1, 11)) and resumed_losses == losses
    assert resumed_milestones == milestones and [m["step"] for m in milestones] == [5, 10]
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)
    assert "resuming at step 5 from step-000005.pt" in (tmp_path / "b" / training_run.LOG).read_text()
    assert curriculum.learning_rate(tiny, 9) < curriculum.learning_rate(tiny, 6) == tiny.curriculum_lr


def test_resume_reads_the_recipe_from_the_run_and_refuses_another(prepared, tmp_path, one_thread):
    _, train_ids, _ = prepared
    tiny = gpt_training.Recipe(**TINY_RUN)
    gpt_training.train(tiny, train_ids, stop_after=2, run_dir=tmp_path, checkpoint_every=1)
    assert [p.name for p in training_run.checkpoints(tmp_path)] == ["step-000001.pt", "step-000002.pt"][
        -training_run.KEEP :
    ]
    recipe, options = gpt_training.parse_args(["resume", f"run={tmp_path}", "threads=1"])
    assert recipe == tiny and options["run"] == tmp_path and options["threads"] == 1
    longer, _ = gpt_training.parse_args(["resume", f"run={tmp_path}", "steps=12"])
    assert longer == dataclasses.replace(tiny, steps=12)
    _, losses, _, _ = gpt_training.train(longer, train_ids, stop_after=3, run_dir=tmp_path, checkpoint_every=1)
    assert sorted(losses) == [1, 2, 3]  # a longer run goes on from the checkpoint of the shorter one
    other = gpt_training.Recipe(**TINY_RUN | {"emb_dim": 32})
    with pytest.raises(ValueError, match=r"fields \['emb_dim'\] differ"):
        gpt_training.train(other, train_ids, run_dir=tmp_path)
    with pytest.raises(ValueError, match="holds no checkpoint"):
        gpt_training.parse_args(["resume", f"run={tmp_path / 'empty'}"])
    with pytest.raises(ValueError, match="unknown argument 'colour=red'"):
        gpt_training.parse_args(["colour=red"])
