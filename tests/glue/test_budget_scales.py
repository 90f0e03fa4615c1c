"""The gate follows the budget it reads (issue 43): one job's bytes, the caches' bytes and the download bytes scale
with the server's memory (``MHA_SERVER_MB`` here; the cgroup's limit is read the same way: test_server_memory.py)
and with the baseline measured at rest; below the stated minimum only light work runs, and the pages say so."""

from __future__ import annotations

import threading
import time

import pytest

from explorer.glue.memory import admission, budget, caches, crowd, downloads
from explorer.glue.state.settings import parse_query

from ..apptest_helpers import run_page

MB = budget.MB
LARGEST = dict(num_heads="16", d_out="1024", num_tokens="1024", input="random", batch_size="1", d_in="64")


@pytest.fixture
def server_mb(monkeypatch):
    """Set MHA_SERVER_MB; the measured rest starts unmeasured and is put back afterwards."""
    monkeypatch.setattr(budget, "_REST", {"bytes": 0})

    def set_mb(mb: int) -> None:
        monkeypatch.setenv("MHA_SERVER_MB", str(mb))

    return set_mb


def held_at_peak() -> float:
    """A warm server (its measured baseline), full caches, one job that errs low by a quarter, and below 690 MB the
    page beside it."""
    beside = budget.BESIDE_BYTES if budget.server_bytes() < budget.SMALLEST_SERVER_BYTES else 0
    return budget.baseline_bytes() + budget.cache_bytes() + budget.ESTIMATE_ERROR * budget.job_room() + beside


def test_at_690_mb_and_above_the_budgets_are_the_measured_ones(server_mb):
    for mb in (690, 2700):
        server_mb(mb)
        assert budget.job_bytes() == budget.JOB_BYTES and budget.cache_bytes() == caches.TOTAL_BYTES
        assert downloads.held_bytes() == downloads.MAX_HELD_BYTES
        assert budget.light_bytes() == admission.LIGHT_BYTES and not budget.light_only()


@pytest.mark.parametrize("mb", [600, 500, 450, 440])
def test_below_690_mb_job_caches_and_downloads_shrink_and_still_add_up_to_the_server(server_mb, mb):
    server_mb(690)
    full = budget.job_bytes(), budget.cache_bytes(), downloads.held_bytes(), budget.light_bytes()
    server_mb(mb)
    now = budget.job_bytes(), budget.cache_bytes(), downloads.held_bytes(), budget.light_bytes()
    assert all(small < big for small, big in zip(now[:3], full[:3], strict=True)), (now, full)
    assert now[3] <= full[3] and now[3] * 4 <= now[0]  # light jobs at once stay within one job's room
    assert held_at_peak() <= mb * MB, (held_at_peak() / MB, mb)
    assert not budget.light_only()


def test_the_largest_link_at_450_mb_is_fitted_with_a_notice_naming_the_budget_and_its_source(server_mb):
    server_mb(450)
    settings, notices = parse_query(LARGEST)
    assert budget.need_bytes("explorer", settings) <= budget.job_bytes() < budget.JOB_BYTES
    assert any("this server's 450 MB (MHA_SERVER_MB)" in n for n in notices), notices
    server_mb(690)
    assert parse_query(LARGEST)[0].num_tokens > settings.num_tokens


def test_at_400_mb_only_light_work_runs_and_the_gate_refuses_more_naming_the_budget(server_mb):
    server_mb(400)
    assert budget.light_only() and budget.job_bytes() == budget.MIN_JOB_BYTES
    assert "this server's 400 MB (MHA_SERVER_MB)" in budget.light_only_notice()
    refused = pytest.raises(admission.OverBudgetError, match=r"within this server's 400 MB \(MHA_SERVER_MB\)")
    with refused, admission.Gate().admit("a big run", need_bytes=budget.MIN_JOB_BYTES + MB):
        pytest.fail("ran")
    smallest = budget.smallest_server_bytes()
    assert smallest >= budget.WARM_BYTES + budget.MIN_CACHE_BYTES + budget.ESTIMATE_ERROR * budget.MIN_JOB_BYTES
    server_mb(smallest // MB)
    assert not budget.light_only()
    server_mb(smallest // MB - 1)
    assert budget.light_only()


def test_a_refusal_names_the_page_and_its_bytes_once(server_mb):
    """Before, the page's label carried its size too: "Not run: Follow a token at about 48 MB needs about 48 MB, over
    the 29 MB one run may use within this server's 450 MB" (the 450 MB morning's notices)."""
    server_mb(400)
    settings = parse_query(dict(num_heads="4", d_out="256", num_tokens="512", input="random"))[0]
    need = budget.need_bytes("follow", settings)
    assert need > budget.job_bytes()
    with pytest.raises(admission.OverBudgetError) as refused, caches.heavy_gate(settings, "follow"):
        pytest.fail("ran")
    said = str(refused.value)
    assert said.startswith(f"Follow a token needs about {need / MB:.0f} MB, over the "), said
    assert said.count(" MB") == 3, said  # the need, one run's share, the server's budget


def test_a_used_server_measured_at_rest_admits_less_than_a_fresh_one(server_mb):
    """The warm baseline the gate assumes is the measured one: a server that keeps 466 MB at rest (the issue's used
    server), 40 of them in its caches, leaves less room than WARM_BYTES would."""
    server_mb(690)
    fresh = budget.job_bytes()
    budget.note_rest(rss=466 * MB, cached=40 * MB)
    assert budget.baseline_bytes() == 426 * MB
    assert budget.job_bytes() < fresh and held_at_peak() <= 690 * MB
    refused = pytest.raises(admission.OverBudgetError, match="one run may use within this server's 690 MB")
    with refused, admission.Gate().admit("a fresh server's job", need_bytes=fresh):  # the gate follows the rest too
        pytest.fail("ran")
    budget.note_rest(rss=300 * MB, cached=0)  # less than a warm server: the warm server's bytes still count
    assert budget.baseline_bytes() == budget.WARM_BYTES


def test_the_caches_hold_what_the_budget_allows(server_mb):
    server_mb(450)
    caches.clear_all()  # what earlier tests left in the process's caches
    cache = caches.ByteCache("test.scales", max_bytes=64 * MB, max_entries=64, ttl_s=60)
    caches._REGISTRY.add(cache)
    try:
        for k in range(8):
            cache.put(("k", k), bytes(4 * MB), 4 * MB)
            caches._REGISTRY.enforce_total()
        assert cache.bytes <= budget.cache_bytes() < caches.TOTAL_BYTES  # at 690 MB it would keep all 32 MB
    finally:
        caches._REGISTRY.caches.remove(cache)


def test_pages_that_need_more_say_so_on_a_light_only_server_and_light_pages_do_not(server_mb):
    server_mb(400)
    cost = run_page("pages/6_Cost.py")
    assert not cost.exception and not cost.error
    assert any("Light pages only" in w.value and "400 MB (MHA_SERVER_MB)" in w.value for w in cost.warning)
    masks = run_page("pages/3_Masks_and_cross_attention.py")
    assert not masks.exception and not masks.error
    assert not any("Light pages only" in w.value for w in masks.warning)


def test_below_690_mb_pages_take_turns_and_a_closed_tab_stops_waiting(server_mb):
    server_mb(690)
    assert crowd.pages_at_once() is None  # a class on 690 MB runs as before
    server_mb(450)
    assert crowd.pages_at_once() == crowd.MIN_PAGES  # 450 MB leaves no room beside one job: two at once
    gate = crowd.Crowd(limit=lambda: 2)
    inside, release, order = threading.Barrier(3), threading.Event(), []

    def page(name: str) -> None:
        with gate.turn():
            order.append(name)
            if name != "third":
                inside.wait(10)
                release.wait(10)

    first, second = (threading.Thread(target=page, args=(n,)) for n in ("first", "second"))
    first.start(), second.start()
    inside.wait(10)  # two pages run
    third = threading.Thread(target=page, args=("third",))
    third.start()
    time.sleep(0.5)
    assert gate.running == 2 and "third" not in order  # the third waits its turn
    release.set()
    for thread in (first, second, third):
        thread.join(10)
    assert order[-1] == "third" and gate.peak == 2 and gate.waited == 1
    closed = crowd.Crowd(limit=lambda: 0)
    with pytest.raises(admission.SessionEndedError), closed.turn(should_stop=lambda: True):
        pytest.fail("ran")


def test_a_pages_token_labels_build_no_module_beside_the_gate(monkeypatch):
    """Follow a token and Heads asked for the labels alone through module_and_input: a heavy link built its module
    (36 MB at d_in = d_out = 1024 in float64) outside the gate, beside another page's job."""
    worst = LARGEST | dict(d_in="1024", dtype="float64", train="true", dropout="0.5")
    settings = parse_query(worst)[0]
    expected = caches.module_and_input(settings)[2]

    def no_module(*args, **kwargs):
        raise AssertionError("a module was built for its labels")

    monkeypatch.setattr(caches.runs, "build_module", no_module)
    monkeypatch.setattr(caches, "cached_module", no_module)
    assert caches.input_labels(settings) == list(expected)
