"""How many pages run at once on a server given less than 690 MB (issue 43).

Each running page adds a few MB of its own beside the gate's one heavy job: its settings and widgets, its light runs
(under ``budget.light_bytes()``, which pass the gate at once), the figures it serialises and sends. On 690 MB the
quarter kept for an estimate's error holds them (a class's morning peaked at 648 MB); on a smaller server that quarter
is a few MB, and tabs at once went over: ten Real heads tabs at once added 61 MB on a 450 MB server, six of the
heaviest links 64 MB. So below 690 MB pages take turns: as many run at once as the room left beside the caches and
one heavy job holds at ``PAGE_BYTES`` each, at least ``MIN_PAGES``. The others wait (a closed tab stops waiting).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from explorer.glue.memory import admission, budget

MB = 2**20
PAGE_BYTES = 6 * MB  # what one page adds beside the heavy job: 61 MB for ten Real heads tabs at once
MIN_PAGES = 2  # a page can always run beside one other (one of them may hold the heavy slot)
POLL_S = 0.2  # how often a waiting page checks whether its tab is still open


def pages_at_once() -> int | None:
    """How many pages may run at once now: None (no limit) on 690 MB and more, else what the room beside the
    baseline, the caches and one heavy job (with its estimate's error) holds, at least MIN_PAGES."""
    server = budget.server_bytes()
    if server >= budget.SMALLEST_SERVER_BYTES:
        return None
    heavy = int(budget.ESTIMATE_ERROR * budget.job_bytes())
    beside = server - budget.baseline_bytes() - budget.cache_bytes() - heavy
    return max(MIN_PAGES, beside // PAGE_BYTES)


class Crowd:
    """Pages running now, and a turn for each page that would be one too many."""

    def __init__(self, limit: Callable[[], int | None] = pages_at_once):
        self._limit, self._cond = limit, threading.Condition()
        self.running = self.peak = self.waited = 0

    @contextlib.contextmanager
    def turn(self, should_stop: Callable[[], bool] = lambda: False) -> Iterator[None]:
        """Wait until fewer than the limit run (SessionEndedError once the tab is closed), run, leave."""
        with self._cond:
            counted = False
            while (limit := self._limit()) is not None and self.running >= limit:
                if should_stop():
                    raise admission.SessionEndedError("a page waiting for its turn: the session ended")
                self.waited += not counted
                counted = True
                self._cond.wait(POLL_S)
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            yield
        finally:
            with self._cond:
                self.running -= 1
                self._cond.notify_all()


CROWD = Crowd()
