"""Helpers shared by the teaching tests: a step of Step through by key, its number, the explorer's run."""

from __future__ import annotations

from explorer.glue.state.settings import Settings
from explorer.views import step_through_steps
from mha_core.runs import forward as runs


def step(key: str) -> step_through_steps.Step:
    return next(s for s in step_through_steps.STEPS if s.key == key)


def number(key: str) -> int:
    return next(n for n, s in enumerate(step_through_steps.STEPS, start=1) if s.key == key)


def explorer_run(settings: Settings | None = None) -> runs.ExplorerRun:
    settings = settings or Settings()
    module = runs.build_module(settings.module_spec())
    x, labels = runs.build_input(settings.input_spec())
    return runs.run_explorer(module, x, labels, train=settings.train, seed=settings.seed, dropout=settings.dropout)
