"""A long training run that survives a stopped session: checkpoints in a run directory, a log file, and small
measurements at each checkpoint (the phase-change figure's points).

A run directory holds ``step-NNNNNN.pt`` (the last ``KEEP`` checkpoints: model, optimiser, batch generator and
torch's global RNG, the step, the losses and measurements so far, the seconds spent) and ``train.log``. Resuming
restores all of it, so a resumed run takes the same steps as one that never stopped (bit for bit on the same
machine and thread count). Torch only.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path

import torch

from mha_core.gpt import english_probe, head_scores, writing_probe
from mha_core.gpt import evaluation as gpt_eval
from mha_core.gpt.text_tokenizer import ByteTokenizer

KEEP = 2  # checkpoints kept in a run directory: the newest and one before it, in case the newest is damaged
LOG = "train.log"


def checkpoints(run_dir: Path) -> list[Path]:
    """The run directory's checkpoints, oldest first (the step is in the name, zero-padded)."""
    return sorted(Path(run_dir).glob("step-*.pt"))


def save(run_dir: Path, recipe, state: dict) -> Path:
    """``state`` (model, optimizer, generator objects; step, losses, milestones, wall_time_s) written to
    ``step-NNNNNN.pt`` through a temporary file (a kill mid-write keeps the last good one); older ones pruned."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "recipe": dataclasses.asdict(recipe),
        "model": state["model"].state_dict(),
        "optimizer": state["optimizer"].state_dict(),
        "generator": state["generator"].get_state(),
        "torch_rng": torch.get_rng_state(),
        "step": state["step"],
        "losses": dict(state["losses"]),
        "milestones": list(state["milestones"]),
        "wall_time_s": state["wall_time_s"],
    }
    path = run_dir / f"step-{state['step']:06d}.pt"
    partial = path.with_suffix(".partial")
    torch.save(payload, partial)
    partial.replace(path)
    for old in checkpoints(run_dir)[:-KEEP]:
        old.unlink()
    return path


FREE_FIELDS = frozenset({"steps"})  # a run may be lengthened (or cut short) when it resumes


def load(path: Path, recipe) -> dict:
    """A checkpoint's payload; a ValueError names the recipe fields (other than ``FREE_FIELDS``) that differ from
    ``recipe``."""
    payload = torch.load(path, weights_only=False)
    saved, wanted = dict(payload["recipe"]), dataclasses.asdict(recipe)
    changed = sorted(k for k, v in wanted.items() if k not in FREE_FIELDS and saved.get(k, v) != v)
    if changed:
        raise ValueError(f"{path} is a checkpoint of another recipe (fields {changed} differ): delete it or match")
    return payload


def restore(payload: dict, model, optimizer, generator) -> None:
    """Model, optimiser, batch generator and torch's global RNG as they were when the checkpoint was written."""
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    generator.set_state(payload["generator"])
    torch.set_rng_state(payload["torch_rng"])


def log(run_dir: Path | None, line: str) -> None:
    """Print a progress line and, in a run directory, append it to its log with the UTC time."""
    print(line, flush=True)
    if run_dir is not None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        with (Path(run_dir) / LOG).open("a") as handle:
            handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}  {line}\n")


@torch.no_grad()
def milestone(model, recipe, step: int, *, writing: bool) -> dict:
    """Small measurements at ``step`` for the phase-change figure: the best induction and previous-token heads on
    the random probe, the English probe's best induction head and both copies' losses (held-out repeated English),
    and with ``writing`` the free-running probe's completions (read off one teacher-forced pass)."""
    scores = gpt_eval.measure_heads(model, gpt_eval.probe(recipe), recipe.probe_period)
    english = english_probe.score_repeats(model, ByteTokenizer())
    point = {
        "step": step,
        "probe_induction": head_scores.strongest(scores["induction"])[2],
        "probe_previous_token": head_scores.strongest(scores["previous token"])[2],
        "english_induction": english.best_induction,
        "english_first_copy_loss": english.first_copy_loss,
        "english_copy_loss": english.second_copy_loss,
        "english_copy_accuracy": english.second_copy_accuracy,
    }
    if writing and recipe.context_length >= 2 * max(map(len, writing_probe.SENTENCES)) + 1:
        right = writing_probe.teacher_forced_mistakes(model, ByteTokenizer())
        to_write = [len(s) - writing_probe.PREFIX for s in writing_probe.SENTENCES]
        completed = sum(r == n for r, n in zip(right, to_write, strict=True))
        point |= {"completed": completed, "median_before_mistake": float(statistics.median(right))}
    return point


def writing(model, recipe) -> dict | None:
    """The record's free-running probe, decoded, on its sentences and on the English probe's (None where a sentence
    twice does not fit the context)."""
    if recipe.context_length < 2 * max(map(len, writing_probe.SENTENCES)) + 1:
        return None
    ours = writing_probe.free_running(model, ByteTokenizer())
    theirs = writing_probe.free_running(model, ByteTokenizer(), english_probe.SENTENCES)
    return writing_probe.summary(ours) | {"english_probe_sentences": writing_probe.summary(theirs)}


def describe(point: dict) -> str:
    """A milestone as one log line."""
    text = (
        f"probe ind {point['probe_induction']:.2f} prev {point['probe_previous_token']:.2f}  english ind "
        f"{point['english_induction']:.2f} copy loss {point['english_first_copy_loss']:.2f}->"
        f"{point['english_copy_loss']:.3f} acc {point['english_copy_accuracy']:.3f}"
    )
    if "completed" in point:
        text += f"  writes {point['completed']}/{len(writing_probe.SENTENCES)} median {point['median_before_mistake']}"
    return text
