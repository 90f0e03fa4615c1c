"""admission.page_finished and caches.module_for: what a page's run freed goes back to the OS when the last running page
finishes, and a heavy run's module is not kept.

Before, glibc kept what light pages freed and the cache kept the largest link's module: on a used server the kept
RSS climbed phase after phase (tests/server/test_memory_budget.py, the load phases: heavy again kept 466 MB, warm 377).
"""

from __future__ import annotations

import pytest

from explorer.glue.memory import admission, caches
from explorer.glue.state.settings import Settings

LIGHT = Settings(num_heads=2, d_out=8, d_in=8, num_tokens=8, batch_size=1, context_length=8, input="random")
HEAVY = Settings(num_heads=4, d_out=1024, d_in=1024, num_tokens=64, batch_size=1, context_length=64, input="random")


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Libc:
    def __init__(self):
        self.trims = 0

    def malloc_trim(self, pad: int) -> int:
        self.trims += 1
        return 1


@pytest.fixture
def pages(monkeypatch):
    clock, libc = Clock(), Libc()
    monkeypatch.setattr(admission, "_LIBC", libc)
    return admission._Pages(clock), clock, libc


def test_the_last_page_to_finish_trims_the_heap_and_not_before(pages):
    running, clock, libc = pages
    clock.now += 5
    running.started()
    running.started()
    running.finished()
    assert libc.trims == 0  # another page still runs: its arrays are still in use
    running.finished()
    assert libc.trims == 1 and running.running == 0


def test_pages_finishing_one_after_another_trim_at_most_once_a_second(pages):
    running, clock, libc = pages
    for _ in range(10):  # ten short pages in 0.5 s
        clock.now += 0.05
        running.started()
        running.finished()
    assert libc.trims == 0  # the last trim (the start) was under TRIM_EVERY_S ago
    clock.now += admission.TRIM_EVERY_S
    running.started()
    running.finished()
    assert libc.trims == 1


def test_under_continuous_load_the_heap_is_trimmed_every_ten_seconds(pages):
    running, clock, libc = pages
    running.started()  # one page always running: never the last one to finish
    for _ in range(25):
        clock.now += 1
        running.started()
        running.finished()
    assert libc.trims == 25 // admission.TRIM_BUSY_S
    assert running.running == 1


def test_without_glibc_a_trim_does_nothing(monkeypatch):
    monkeypatch.setattr(admission, "_LIBC", None)
    admission.trim()  # no error where the C library is not glibc
    admission.release_memory()


def test_a_heavy_run_builds_its_module_and_a_light_one_shares_the_cached_one():
    assert caches.is_heavy(HEAVY) and not caches.is_heavy(LIGHT)
    assert caches.module_for(LIGHT) is caches.module_for(LIGHT)
    first, second = caches.module_for(HEAVY), caches.module_for(HEAVY)
    assert first is not second  # built for each run: nothing of it stays in the caches
    hit, _ = caches.cached_module.peek(HEAVY.module_spec())
    assert not hit
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert a.shape == b.shape and bool((a == b).all())  # the same seeded weights
