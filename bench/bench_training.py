"""Time training of every task at its default budget and print a markdown table.

Run: ``python bench/bench_training.py [--seeds 0 1 2] [--tasks previous_token induction]``.
Times are wall-clock seconds of ``train`` (training loop plus held-out evaluation), after a
short warm-up run so that torch's one-off start-up cost is not charged to the first task.
CUDA rows are added when torch sees a GPU. Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from mha_core.toy.tasks import TASKS  # noqa: E402
from mha_core.toy.tiny_training import train  # noqa: E402


def bench_row(task_name: str, device: str, seed: int) -> str:
    """One markdown table row for one training run."""
    start = time.perf_counter()
    result = train(task_name, seed=seed, device=device)
    seconds = time.perf_counter() - start
    layer, head, score = result.best_head()
    return (
        f"| {task_name} | {device} | {seed} | {result.config.num_layers} | {result.steps_run} | {seconds:.2f} "
        f"| {result.heldout_accuracy:.4f} | L{layer}H{head} {score:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    args = parser.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads outside training (training uses 1)")
    print()
    print("| task | device | seed | layers | steps | seconds | held-out accuracy | best head score |")
    print("|---|---|---|---|---|---|---|---|")
    for device in devices:
        train("previous_token", steps=5, device=device)  # warm-up: one-off start-up costs
        for task_name in args.tasks:
            for seed in args.seeds:
                print(bench_row(task_name, device, seed), flush=True)


if __name__ == "__main__":
    main()
