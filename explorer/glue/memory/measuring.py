"""The Cost page's measurement, through the admission gate: one at a time, stopped when its tab closes."""

from __future__ import annotations

from collections.abc import Callable

from explorer.glue.memory import admission, budget
from mha_core.runs import profiling

TIME_BUDGET_S = 30.0  # one measurement, all lengths and variants together


def cost_spec(settings, wanted_tokens: int, time_budget_s: float = TIME_BUDGET_S) -> profiling.CostSpec:
    """What the Cost page measures for these sidebar settings: up to the longest length ≤ wanted that fits the
    byte budget (``budget.cost_max_tokens``)."""
    return profiling.CostSpec(
        num_heads=settings.num_heads,
        head_dim=settings.head_dim,
        batch_size=settings.batch_size,
        device=settings.device,
        dtype=settings.dtype,
        seed=settings.seed,
        max_tokens=budget.cost_max_tokens(settings, wanted_tokens, profiling.TOKEN_STEPS),
        time_budget_s=time_budget_s,
    )


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
