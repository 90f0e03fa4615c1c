"""One admission gate for everything expensive a link or a click can start, and the budgets behind it.

A public link can ask for the explorer at its largest, a trained model, or the Cost page's measurement. Each
of those adds hundreds of MB or many CPU-seconds to a server that thirty students share (690 MB, 2 CPUs on
Community Cloud's smallest app). So:

* every expensive job says what it needs in bytes (``budget`` estimates each page's peak) and goes through ``admit``
  and the one ``GATE``: a job above ``budget.light_bytes()`` (or any training or measurement) runs one at a time, so
  peaks never add up; a job over ``budget.job_bytes()`` (the server's budget, its measured rest) is refused, said;
* the queue is fair: visitors are served in turn (the one served longest ago first, then the earliest), and a tab
  has at most one job waiting (a newer request takes its place), so one student's tabs never push another back more
  than one job; a waiting job sees its place and the time waited, "busy" only when ``MAX_WAITING`` jobs wait;
* a job whose session has ended stops: while it waits, and wherever it polls ``should_stop`` (``SessionEndedError``);
* after a heavy job, freed memory goes back to the OS (``release_memory``), and when the last running page
  finishes (``page_finished``), what light pages freed too.

A new heavy path declares what it adds at its peak, in bytes, before it allocates anything::

    with admission.admit("loading GPT-2", need_bytes=budget.need_bytes("explorer", settings)):  # or its own estimate

Over the budget: ``OverBudgetError`` (fit first: ``budget.fitted``); ``heavy=True`` gates time-heavy work.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import itertools
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from explorer.glue.memory import budget

log = logging.getLogger("mha_explorer")

# --- budgets (measured: README, "A class on one small server") --------------------------------------------------------
MB = 2**20
SERVER_GOAL_MB = 690  # Community Cloud's smallest app
JOB_BYTES = budget.JOB_BYTES  # on 690 MB and more; less on a smaller or used server (budget.job_bytes)
LIGHT_BYTES = budget.LIGHT_BYTES  # jobs under budget.light_bytes() (a class's settings) pass without the queue
HEAVY_SLOTS = 1  # heavy jobs at once: their peaks must not add up
MAX_WAITING = 40  # jobs waiting at once (at most one per tab); beyond that the visitor is told the server is busy
POLL_S = 0.2  # how often a waiting job checks whether its session still exists
LOG_WAIT_S = 5.0  # a job that waits longer names, in the server log, the jobs it waits behind
TRAIN_TIME_BUDGET_S = 60.0  # one training run, checked between steps (the page's largest run takes ~15 s)


class SessionEndedError(Exception):
    """The session that asked for this work has ended (its tab was closed), or asked again: stop, show nothing."""


class ServerBusyError(Exception):
    """The queue is full (MAX_WAITING jobs wait), or a test's wait_s passed: other visitors' heavy jobs are running."""


class OverBudgetError(ValueError):
    """A job asked for more than JOB_BYTES: it is never run (pages fit their settings into the budget first)."""


@dataclass(eq=False)
class Ticket:
    """One job in the queue: who asked (their tab and, for fairness, their client) and what it needs."""

    label: str
    need_bytes: int
    client: str
    session: str | None
    seq: int
    superseded: bool = False


def _said(ticket: Ticket) -> str:
    """A job as the server log names it: its label, its bytes and its tab."""
    return f"{ticket.label}, about {ticket.need_bytes / MB:,.0f} MB ({ticket.session})"


class Gate:
    """A fair queue in front of ``slots`` heavy jobs at once, each at most ``capacity_bytes``.

    The next job is the waiting one whose client was served longest ago (never served first), then the earliest.
    ``capacity_bytes`` None: ``budget.job_bytes()``, read at each admission (what pages fit to). ``active``,
    ``peak_active`` and ``admitted`` are for tests and the load report.
    """

    def __init__(self, slots: int = HEAVY_SLOTS, capacity_bytes: int | None = None, max_waiting: int = MAX_WAITING):
        self.slots, self.capacity_bytes, self.max_waiting = slots, capacity_bytes, max_waiting
        self._cond = threading.Condition()
        self._waiting: list[Ticket] = []
        self._running: list[Ticket] = []
        self._served: dict[str, int] = {}  # client -> turn number of its last admitted job
        self._seq, self._turns = itertools.count(), itertools.count(1)
        self.active = self.peak_active = self.admitted = 0
        self._holder = threading.local()  # a job admitted in this thread: nested admits pass (no self-deadlock)

    def _order(self, ticket: Ticket) -> tuple[int, int]:
        return self._served.get(ticket.client, 0), ticket.seq

    def place(self, ticket: Ticket) -> int:
        """1 + the jobs before this one: those running and those the queue serves first."""
        with self._cond:
            key = self._order(ticket)
            return 1 + len(self._running) + sum(self._order(t) < key for t in self._waiting if t is not ticket)

    def describe(self) -> str:
        """Who runs and who waits, for the server log when a job waits long."""
        with self._cond:
            running = ", ".join(_said(t) for t in self._running) or "nothing"
            waiting = ", ".join(_said(t) for t in self._waiting)
            return f"running {running}; waiting {waiting}"

    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    def _enqueue(self, label: str, need_bytes: int, client: str, session: str | None) -> Ticket:
        with self._cond:
            ticket = Ticket(label, need_bytes, client, session, next(self._seq))
            earlier = [t for t in self._waiting if session is not None and t.session == session]
            for old in earlier:  # one job waiting per tab: the newer request keeps the older one's place
                old.superseded = True
                self._waiting.remove(old)
                ticket.seq = min(ticket.seq, old.seq)
            if len(self._waiting) >= self.max_waiting:
                raise ServerBusyError(f"The server is busy: {len(self._waiting)} large runs are waiting ({label}).")
            self._waiting.append(ticket)
            self._cond.notify_all()
            return ticket

    def _try_start(self, ticket: Ticket) -> bool:
        with self._cond:
            if ticket.superseded:
                raise SessionEndedError(f"{ticket.label}: a newer request from the same tab took its place")
            first = min(self._waiting, key=self._order)
            if first is not ticket or len(self._running) >= self.slots:
                self._cond.wait(POLL_S)
                return False
            self._waiting.remove(ticket)
            self._running.append(ticket)
            self._served[ticket.client] = next(self._turns)
            self.active = len(self._running)
            self.admitted += 1
            self.peak_active = max(self.peak_active, self.active)
            return True

    def _leave(self, ticket: Ticket) -> None:
        with self._cond:
            if ticket in self._waiting:
                self._waiting.remove(ticket)
            if ticket in self._running:
                self._running.remove(ticket)
            self.active = len(self._running)
            if not self._waiting and not self._running:
                self._served.clear()  # nobody waits: turns start afresh
            self._cond.notify_all()

    @contextlib.contextmanager
    def admit(
        self,
        label: str,
        should_stop: Callable[[], bool] | None = None,
        wait_s: float | None = None,
        *,
        need_bytes: int = 0,
        visitor: tuple[str | None, str] | None = None,
        on_wait: Callable[[int, float], None] | None = None,
    ) -> Iterator[None]:
        """Wait for this job's turn, run it, hand memory back. ``visitor``: (session id, client) for fairness."""
        if getattr(self._holder, "inside", False):
            yield
            return
        capacity = budget.job_bytes() if self.capacity_bytes is None else self.capacity_bytes
        if need_bytes > capacity:
            raise OverBudgetError(
                f"{label} needs about {need_bytes / MB:.0f} MB, over the {capacity / MB:.0f} MB one run may use "
                f"within {budget.budget_words()}"
            )
        session, client = visitor or (None, f"thread-{threading.get_ident()}")
        ticket = self._enqueue(label, need_bytes, client, session)
        try:
            self._wait_turn(ticket, should_stop, wait_s, on_wait)
        except BaseException:
            self._leave(ticket)
            raise
        self._holder.inside = True
        _RAN_HEAVY.flag = True
        try:
            yield
        finally:
            self._holder.inside = False
            self._leave(ticket)
            release_memory()

    def _wait_turn(self, ticket: Ticket, should_stop, wait_s: float | None, on_wait) -> None:
        begin, waited, logged = time.monotonic(), 0.0, False
        while not self._try_start(ticket):
            if not logged and time.monotonic() - begin > LOG_WAIT_S:
                logged = True
                log.warning("%s has waited %.0f s: %s", ticket.label, LOG_WAIT_S, self.describe())
            if should_stop is not None and should_stop():
                raise SessionEndedError(f"{ticket.label}: the session ended while it waited")
            waited = time.monotonic() - begin
            if wait_s is not None and waited > wait_s:
                raise ServerBusyError(
                    f"The server is busy with other visitors' large runs ({ticket.label} waited {wait_s:.0f} s)."
                )
            if on_wait is not None:
                on_wait(self.place(ticket), waited)
        if should_stop is not None and should_stop():
            raise SessionEndedError(f"{ticket.label}: the session ended while it waited")
        if on_wait is not None and waited:
            on_wait(0, waited)


GATE = Gate()
_RAN_HEAVY = threading.local()  # set in a thread that ran a heavy job: its page hands memory back when it ends


def ran_heavy() -> bool:
    """True once per heavy job run in this thread since the last call (the page boundary then releases memory)."""
    flag = getattr(_RAN_HEAVY, "flag", False)
    _RAN_HEAVY.flag = False
    return flag


def admit(
    label: str,
    *,
    need_bytes: int | None = None,
    heavy: bool | None = None,
    should_stop: Callable[[], bool] | None = None,
    wait_s: float | None = None,
    visitor: tuple[str | None, str] | None = None,
    on_wait: Callable[[int, float], None] | None = None,
):
    """The admission gate: a context manager around one expensive job.

    ``need_bytes``: what the job adds to the process at its peak (``explorer.glue.memory.budget``'s estimates); a job
    under ``LIGHT_BYTES`` passes straight through unless ``heavy`` (time-heavy work: training, measurements) says
    otherwise. ``heavy`` alone (the old form) gates without a byte estimate. ``should_stop`` defaults to
    ``session_ended()`` of the calling script's session, ``visitor`` to its tab and client, ``on_wait`` to a line on
    the page that shows the place in the queue and the time waited.
    """
    if heavy is None:
        heavy = need_bytes is None or need_bytes > budget.light_bytes()
    if not heavy:
        return contextlib.nullcontext()
    return GATE.admit(
        label,
        should_stop if should_stop is not None else session_ended(),
        wait_s,
        need_bytes=need_bytes or 0,
        visitor=visitor if visitor is not None else current_visitor(),
        on_wait=on_wait if on_wait is not None else queue_notice(),
    )


def session_ended() -> Callable[[], bool]:
    """A check, safe from any thread, that is True once the session running this script has ended.

    Captured in the script thread (it reads the script run context); outside a Streamlit server (AppTest,
    a notebook) there is no session to end, and the check is always False.
    """
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None or not Runtime.exists():
        return lambda: False
    runtime, session_id = Runtime.instance(), ctx.session_id
    return lambda: not runtime.is_active_session(session_id)


def either(*checks: Callable[[], bool] | None) -> Callable[[], bool]:
    """One stop check from several (a Stop button's flag and the session's end)."""
    present = [check for check in checks if check is not None]
    return lambda: any(check() for check in present)


def current_visitor() -> tuple[str | None, str] | None:
    """(session id, client) of the script running in this thread, or None outside a session.

    The client is the address the request came from: the last X-Forwarded-For hop (what the proxy in front of the
    app saw; earlier hops are the client's own words), else the socket's address, else the tab itself. Tabs of one
    student share it, so the queue serves other students between them.
    """
    try:
        ctx = get_script_run_ctx(suppress_warning=True)
        if ctx is None:
            return None
        forwarded = (st.context.headers.get("X-Forwarded-For") or "").split(",")[-1].strip()
        return ctx.session_id, forwarded or st.context.ip_address or ctx.session_id
    except Exception:  # noqa: BLE001 - no context to read (a bare script, a test thread): no fairness key
        return None


def queue_notice() -> Callable[[int, float], None] | None:
    """A callback that shows, in the running page, this job's place in the queue and the time it has waited."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return None
    shown: dict = {"last": -1.0, "slot": None}

    def show(place: int, waited_s: float) -> None:
        """place 0: the job's turn came; the line goes."""
        if place == 0:
            if shown["slot"] is not None:
                shown["slot"].empty()
        elif waited_s - shown["last"] >= 1.0:
            shown["last"] = waited_s
            shown["slot"] = shown["slot"] or st.empty()
            ahead = place - 1
            shown["slot"].info(
                f"Waiting for the server: {ahead} larger run{'s' if ahead != 1 else ''} ahead of yours "
                f"(place {place} in the queue), {waited_s:.0f} s so far. Your turn is coming; keep this tab open.",
                icon=":material/hourglass:",
            )

    return show


def release_memory() -> None:
    """Collect, then ask glibc to return freed heap pages to the OS (RSS otherwise keeps them). Cheap: the start-up
    heap is frozen out of the collector (``server_setup``), so this walks only what sessions made."""
    gc.collect()
    trim()


def trim() -> None:
    """Freed heap back to the OS, without a collection; nothing where the C library is not glibc."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


TRIM_EVERY_S = 1.0  # at most one trim a second when pages finish one after another
TRIM_BUSY_S = 10.0  # under continuous load (a page always running), a trim at least this often


class _Pages:
    """Pages running now. glibc keeps what a page's run freed in its arenas: a used server's kept RSS climbed phase
    after phase (374 → 507 MB) though nothing held it. So the last page to finish trims the heap (rate-limited)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._lock, self._clock = threading.Lock(), clock
        self.running = self.trims = 0
        self._last_s = clock()
        self.cached: Callable[[], int] = lambda: 0  # the caches' bytes now (caches sets it: it imports this module)

    def started(self) -> None:
        with self._lock:
            self.running += 1

    def finished(self) -> None:
        with self._lock:
            self.running = max(0, self.running - 1)
            since = self._clock() - self._last_s
            due = since >= TRIM_BUSY_S or (self.running == 0 and since >= TRIM_EVERY_S)
            at_rest = due and self.running == 0
            if due:
                self._last_s, self.trims = self._clock(), self.trims + 1
        if due:
            trim()
        if at_rest and "streamlit.web.bootstrap" in sys.modules:  # a `streamlit run` server (not AppTest) at rest:
            budget.note_rest(budget.own_rss_bytes(), self.cached())  # its baseline now: pages fit to it


PAGES = _Pages()
page_started = PAGES.started  # a page's run begins (boundary.run_page)
page_finished = PAGES.finished  # and ends: the last one running trims the heap


def _load_libc():
    """glibc, tuned so a big trace's memory goes back to the OS: blocks ≥ 1 MiB mmapped, at most 2 arenas (too late
    to cap Streamlit's 6; capped from the process's start, nothing measurable changed: docs/memory.md)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, 2)  # M_ARENA_MAX
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
        return libc
    except (OSError, AttributeError):  # not glibc (macOS, musl): the defaults stay
        return None


_LIBC = _load_libc()
