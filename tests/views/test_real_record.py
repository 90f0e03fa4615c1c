"""explorer.views.real_record against the shipped record and the shipped model (issue 46, item 5: the reviewer's
(7), (8) and (9)): each sentence's numbers recomputed, the probe's losses from the model itself."""

from __future__ import annotations

import re
import statistics

import pytest
import torch

from explorer.views import real_record
from mha_core.gpt import english_probe, writing_probe
from mha_core.gpt import training as gpt_training


@pytest.fixture(scope="module")
def record() -> dict:
    return dict(gpt_training.load_record())


def test_the_knockout_record_gives_each_copy_and_the_gain_from_repetition(record):
    probe = record["english_probe"]
    said = real_record.knockout_record_lines(record)
    assert "with the true text given" in said
    rows = [probe] + list(probe["knockouts"])
    found = re.findall(r"\*\*(\d+\.\d\d) → (\d+\.\d\d)\*\*, a gain of \*\*(-?\d+\.\d\d)\*\*", said)
    assert len(found) == len(rows)
    for row, (first, second, gain) in zip(rows, found, strict=True):
        assert (first, second) == (f"{row['first_copy_loss']:.2f}", f"{row['second_copy_loss']:.2f}")
        assert gain == f"{row['first_copy_loss'] - row['second_copy_loss']:.2f}"


def test_the_records_probe_numbers_are_the_models(record):
    """The intact probe and one knock-out, recomputed from the shipped weights."""
    torch.set_num_threads(1)
    model, tokenizer = gpt_training.load_shipped()
    probe = record["english_probe"]
    intact = english_probe.score_repeats(model, tokenizer)
    assert intact.first_copy_loss == pytest.approx(probe["first_copy_loss"], abs=1e-4)
    assert intact.second_copy_loss == pytest.approx(probe["second_copy_loss"], abs=1e-4)
    assert intact.second_copy_accuracy == pytest.approx(probe["second_copy_accuracy"], abs=1e-6)
    row = probe["knockouts"][0]
    knocked = english_probe.score_repeats(model, tokenizer, knocked_out=row["heads"], mode=row["mode"])
    assert knocked.first_copy_loss == pytest.approx(row["first_copy_loss"], abs=1e-4)
    said = " ".join(real_record.probe_lines(record))
    gain = intact.first_copy_loss - intact.second_copy_loss
    assert f"a gain of **{gain:.2f}** from repetition" in said
    assert f"with the true text given the greedy guess is right **{intact.second_copy_accuracy:.0%}**" in said


def test_the_recipe_says_what_each_phase_trained_on(record):
    recipe = record["recipe"]
    line = real_record.recipe_line(record)
    assert f"{recipe['steps']:,} AdamW steps" in line
    assert f"The first {recipe['induction_warmup']:,} see only random bytes" in line and "none of that is text" in line
    assert "English" not in line and "Python's documentation" in line  # the repeated rows are documentation
    for key, what in real_record.ROW_KINDS.items():
        if recipe.get(key):
            assert f"{recipe[key]} rows of {what}" in line, key
    assert real_record.recipe_line({}) == "" and real_record.about_lines("own", {}, _facts())


def _facts():
    return type("Facts", (), dict(n_layers=2, n_heads=4, emb_dim=128, context_length=128, vocab_size=256))()


def test_the_training_curve_is_the_records_and_marks_the_induction_rows_fall(record):
    panels, said = real_record.phase_change(record, presenter=False)
    figure = panels[0].figure.to_dict()
    pairs = sorted((int(k), v) for k, v in record["train_loss"].items())
    assert list(figure["data"][0]["x"]) == [s for s, _ in pairs]
    assert list(figure["data"][0]["y"]) == pytest.approx([v for _, v in pairs])
    warmup = record["recipe"]["induction_warmup"]
    inside = [(s, v) for s, v in pairs if s <= warmup]
    plateau, end = sum(v for _, v in inside[:5]) / 5, inside[-1][1]
    half = min(s for s, v in inside if v < (plateau + end) / 2)  # by hand: the first logged step below half-way
    assert [shape["x0"] for shape in figure["layout"]["shapes"]] == [half, warmup]  # the fall, then text begins
    assert f"sits at **{plateau:.2f}** nats, then falls to **{end:.3f}**" in said and f"half-way at step {half}" in said
    points = record.get("milestones", [])
    if points:  # the shipped record keeps its checkpoints' measurements: the phase change's two more panels
        assert len(panels) == 3 and real_record.milestone_sentence(points) in said
    else:
        assert "no checkpoints' scores" in said and len(panels) == 1


def test_saved_checkpoints_are_drawn_against_the_step(record):
    points = [
        {"step": 100 * k, "probe_induction": 0.1 * k, "english_induction": 0.05 * k,
         "english_first_copy_loss": 3.0, "english_copy_loss": 3.0 - 0.25 * k}
        for k in range(1, 9)
    ]  # fmt: skip
    panels, said = real_record.phase_change(record | {"milestones": points}, presenter=True)
    assert [p.key for p in panels] == ["training_curve", "milestones_induction", "milestones_copy"]
    copy = {t["name"]: list(t["y"]) for t in panels[2].figure.to_dict()["data"]}
    assert copy["second copy (the copy)"] == pytest.approx([p["english_copy_loss"] for p in points])
    assert "from 0.05 at step 100 to 0.40 at step 800" in said and "from 2.75 to 1.00 nats per byte" in said


def test_the_writing_line_says_what_the_record_measured(record):
    """Issue 46: the page says exactly what the model writes on its own, each number recounted from the record."""
    writing = record["writing"]
    to_write = writing["to_write"]
    completed = sum(r == n for r, n in zip(writing["correct_before_mistake"], to_write, strict=True))
    line = real_record.writing_line(record)
    assert f"**{completed} of {len(to_write)}**" in line
    assert f"{min(to_write) + writing_probe.PREFIX}–{max(to_write) + writing_probe.PREFIX} characters" in line
    assert f"**{statistics.median(writing['correct_before_mistake']):g}** characters" in line
    assert line in real_record.about_lines("own", record, _facts())
    assert real_record.writing_line({}) == "" and real_record.writing_line({"writing": None}) == ""


def test_the_recipe_line_names_the_polish_phase_from_the_record(record):
    recipe = record["recipe"]
    line = real_record.recipe_line(record)
    polish = f"From step {recipe['polish_start']:,} to the end: {recipe['polish_text_rows']} documentation windows"
    assert (polish in line) == bool(recipe.get("polish_start"))
    without = record | {"recipe": recipe | {"polish_start": 0}}
    assert "to the end" not in real_record.recipe_line(without)
