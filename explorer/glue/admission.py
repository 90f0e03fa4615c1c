"""One admission gate for everything expensive a link or a click can start, and the budgets behind it.

A public link can ask for the explorer at its largest, a trained model, or the Cost page's measurement. Each
of those adds hundreds of MB or many CPU-seconds to a server that thirty students share (690 MB, 2 CPUs on
Community Cloud's smallest app). So:

* every expensive job goes through ``admit`` and the one process-wide ``GATE``: one heavy job at a time, so
  their peaks never add up (a job's own peak is bounded by clamping its settings: see the budgets below);
* a job waits at most ``WAIT_S`` for its turn, then the visitor is told the server is busy (``ServerBusyError``);
* a job whose session has ended stops: while it waits, and wherever it polls ``should_stop`` (between
  training steps, between measurements). A closed tab costs the server nothing more (``SessionEndedError``);
* after a heavy job, freed memory is handed back to the OS (``release_memory``), so idle RSS returns.

No page logic here; ``caches.heavy_gate``/``gated``/``is_heavy`` delegate to this module.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator

log = logging.getLogger("mha_explorer")

# --- budgets (measured: README, "A class on one small server") --------------------------------------------------------
SERVER_GOAL_MB = 690  # Community Cloud's smallest app
HEAVY_CELLS = 2**20  # explorer runs with b·h·T² above this (4 MiB per float32 attention matrix) take the gate
HEAVY_SLOTS = 1  # heavy jobs at once: their peaks must not add up
WAIT_S = 120.0  # longest wait for the gate before the visitor is told the server is busy
POLL_S = 0.2  # how often a waiting job checks whether its session still exists
TRAIN_TIME_BUDGET_S = 60.0  # one training run, checked between steps (the page's largest run takes ~15 s)
# The Cost page's measurement holds about seven (b, h, T, T) matrices at its longest length (measured: +442 MB at
# 16 heads × 1024² tokens), so it gets half the explorer's attention cells: +221 MB at most.
COST_MAX_CELLS = 8 * 2**20


class SessionEndedError(Exception):
    """The session that asked for this work has ended (its tab was closed): stop, show nothing."""


class ServerBusyError(Exception):
    """The gate stayed closed for WAIT_S: other visitors' heavy jobs are running."""


class Gate:
    """A counting gate with a bounded wait that gives up when the waiting session ends.

    ``active`` and ``peak_active`` are for tests and the load report.
    """

    def __init__(self, slots: int = HEAVY_SLOTS):
        self.slots = slots
        self._semaphore = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.active = 0
        self.peak_active = 0
        self.admitted = 0
        self._holder = threading.local()  # a job admitted in this thread: nested admits pass (no self-deadlock)

    @contextlib.contextmanager
    def admit(
        self, label: str, should_stop: Callable[[], bool] | None = None, wait_s: float = WAIT_S
    ) -> Iterator[None]:
        if getattr(self._holder, "inside", False):
            yield
            return
        deadline = time.monotonic() + wait_s
        while not self._semaphore.acquire(timeout=POLL_S):
            if should_stop is not None and should_stop():
                raise SessionEndedError(f"{label}: the session ended while it waited")
            if time.monotonic() > deadline:
                raise ServerBusyError(
                    f"The server is busy with other visitors' large runs ({label} waited {wait_s:.0f} s)."
                )
        try:
            if should_stop is not None and should_stop():
                raise SessionEndedError(f"{label}: the session ended while it waited")
            with self._lock:
                self.active += 1
                self.admitted += 1
                self.peak_active = max(self.peak_active, self.active)
            self._holder.inside = True
            try:
                yield
            finally:
                self._holder.inside = False
                with self._lock:
                    self.active -= 1
        finally:
            self._semaphore.release()
            release_memory()


GATE = Gate()


def admit(label: str, *, heavy: bool = True, should_stop: Callable[[], bool] | None = None, wait_s: float = WAIT_S):
    """The admission gate: a context manager around one expensive job; light jobs pass straight through.

    ``should_stop`` defaults to ``session_ended()`` of the calling script's session.
    """
    if not heavy:
        return contextlib.nullcontext()
    return GATE.admit(label, should_stop if should_stop is not None else session_ended(), wait_s)


def session_ended() -> Callable[[], bool]:
    """A check, safe from any thread, that is True once the session running this script has ended.

    Captured in the script thread (it reads the script run context); outside a Streamlit server (AppTest,
    a notebook) there is no session to end, and the check is always False.
    """
    try:
        from streamlit.runtime import Runtime
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
    except ImportError:  # pragma: no cover - streamlit is a requirement
        return lambda: False
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None or not Runtime.exists():
        return lambda: False
    runtime, session_id = Runtime.instance(), ctx.session_id
    return lambda: not runtime.is_active_session(session_id)


def either(*checks: Callable[[], bool] | None) -> Callable[[], bool]:
    """One stop check from several (a Stop button's flag and the session's end)."""
    present = [check for check in checks if check is not None]
    return lambda: any(check() for check in present)


# --- what a job costs -------------------------------------------------------------------------------------------


def attention_cells(batch_size: int, num_heads: int, num_tokens: int) -> int:
    return batch_size * num_heads * num_tokens**2


def explorer_is_heavy(settings) -> bool:
    """The explorer's pages hold about four (b, h, T, T) float32 matrices at once while figures are built."""
    return attention_cells(settings.batch_size, settings.num_heads, settings.num_tokens) > HEAVY_CELLS


def cost_max_tokens(batch_size: int, num_heads: int, wanted: int, steps) -> int:
    """The longest measured length ≤ wanted (of ``steps``) whose b·h·T² fits COST_MAX_CELLS."""
    fitting = [t for t in steps if t <= wanted and attention_cells(batch_size, num_heads, t) <= COST_MAX_CELLS]
    return fitting[-1] if fitting else min(steps)


# --- memory back to the OS --------------------------------------------------------------------------------------


def release_memory() -> None:
    """Collect, then ask glibc to return freed heap pages to the OS (RSS otherwise keeps them).

    Cheap: the start-up heap is frozen out of the collector (``server_setup``), so this walks only what sessions made.
    """
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _load_libc():
    """glibc, tuned so a big trace's memory goes back to the OS: blocks ≥ 1 MiB mmapped, at most 2 arenas.

    The arena cap comes too late to cap anything: this module is imported on the first page run, when Streamlit's
    threads have already made 6 arenas, and glibc keeps them (malloc_info). Capping them from the process's start
    (``MALLOC_ARENA_MAX=2`` in the environment) was measured and changed nothing: after 60 s of 8 heads × 64 tokens
    with fresh seeds (bench/soak.py's medium visits, 2 clients), idle RSS 311 MB with 2 arenas, 317 MB with 6, both
    from 285 MB after the first visit.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, 2)  # M_ARENA_MAX
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
        return libc
    except (OSError, AttributeError):  # not glibc (macOS, musl): the defaults stay
        return None


_LIBC = _load_libc()
