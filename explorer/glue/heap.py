"""Freed heap back to the OS: glibc's ``malloc_trim``, after heavy jobs (``admission.release_memory``) and when the
last running page finishes (``page_finished``). Nothing where the C library is not glibc (macOS, musl).
"""

from __future__ import annotations

import ctypes
import threading
import time

TRIM_EVERY_S = 1.0  # at most one trim a second when pages finish one after another
TRIM_BUSY_S = 10.0  # under continuous load (a page always running), a trim at least this often


class _Pages:
    """Pages running now: when the last one finishes, freed heap goes back to the OS (``malloc_trim``).

    glibc keeps what a page's run freed in its arenas: a used server's RSS climbed phase after phase (374 → 507 MB
    kept) though nothing held it. No collection here (``release_memory`` does that after heavy jobs).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self.running = self.trims = 0
        self._last_s = time.monotonic()

    def started(self) -> None:
        with self._lock:
            self.running += 1

    def finished(self) -> None:
        with self._lock:
            self.running = max(0, self.running - 1)
            since = time.monotonic() - self._last_s
            due = since >= TRIM_BUSY_S or (self.running == 0 and since >= TRIM_EVERY_S)
            if due:
                self._last_s, self.trims = time.monotonic(), self.trims + 1
        if due:
            trim()


PAGES = _Pages()


def page_started() -> None:
    """A page's run begins (``boundary.run_page``, through ``admission``)."""
    PAGES.started()


def page_finished() -> None:
    """A page's run ended: the heap is trimmed when it was the last one running (rate-limited, ``_Pages``)."""
    PAGES.finished()


def trim() -> None:
    """Freed heap back to the OS, without a collection; nothing where the C library is not glibc."""
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
