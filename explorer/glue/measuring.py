"""The Cost page's measurement, through the admission gate: one at a time, stopped when its tab closes."""

from __future__ import annotations

from collections.abc import Callable

from mha_core import profiling

from . import admission, budget


def measure_cost(spec: profiling.CostSpec, show_progress: Callable[[float, str], object]) -> profiling.CostReport:
    """Measure under the gate; a closed tab raises SessionEndedError between measurements, a full gate
    ServerBusyError."""
    ended = admission.session_ended()

    def progress(done: float, text: str) -> None:
        if ended():
            raise admission.SessionEndedError("the Cost measurement")
        show_progress(min(1.0, done), text)

    need = budget.cost_need_bytes(spec)
    with admission.admit("the Cost measurement", heavy=True, need_bytes=need, should_stop=ended):
        return profiling.measure(spec, progress=progress)
