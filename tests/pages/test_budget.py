"""One budget in bytes: estimates that count dtype, train mode and dropout; pages fitted to it; caches bounded in
bytes; a fair gate. (The server's measured peak against these estimates: tests/server/test_memory_budget.py.)"""

import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from explorer.glue.memory import admission, budget, caches
from explorer.glue.state.settings import parse_query

from ..apptest_helpers import run_page

LARGEST = dict(num_heads="16", d_out="1024", num_tokens="1024", input="random", batch_size="1", d_in="64")
WORST = LARGEST | dict(d_in="1024", dtype="float64", train="true", dropout="0.5")


def test_a_warm_server_full_caches_and_one_job_that_errs_low_by_a_quarter_fit_the_smallest_server():
    held = budget.WARM_BYTES + budget.CACHE_BYTES + budget.ESTIMATE_ERROR * budget.JOB_BYTES
    assert held <= budget.SMALLEST_SERVER_BYTES, held / budget.MB
    assert budget.CACHE_BYTES == caches.TOTAL_BYTES


def test_an_estimate_counts_the_dtype_train_mode_and_dropout():
    base = replace(parse_query(LARGEST)[0], num_tokens=256, context_length=256)

    def need(**changes):
        return budget.need_bytes("explorer", replace(base, **changes))

    assert need() < need(dtype="float64") < 2 * need()  # the run's matrices double; the float32 figures do not
    assert need(train=True, dropout=0.5) > need()  # train mode with dropout: the mask and the dropped weights too
    assert need(train=True) == need()  # train mode without dropout keeps nothing more
    assert budget.need_bytes("heads", base) > need()  # two runs side by side
    assert need(batch_size=2) - need() == budget.cell_bytes("explorer", base) * 16 * 256**2


@pytest.mark.parametrize("query", [LARGEST, WORST], ids=["float32", "float64-train-dropout"])
def test_the_largest_link_is_fitted_into_the_budget_with_a_notice(query):
    settings, notices = parse_query(query)
    assert budget.need_bytes("explorer", settings) <= budget.JOB_BYTES
    assert settings.num_tokens < 1024 and any("MB one run may use" in n for n in notices), notices
    more = replace(settings, num_tokens=settings.num_tokens + 1)
    assert budget.need_bytes("explorer", more) > budget.JOB_BYTES  # the nearest length that fits, not less


@pytest.mark.parametrize(
    "page, name", [("pages/2_Heads_and_references.py", "heads"), ("pages/4_Knobs_that_teach.py", "knobs")]
)
def test_pages_that_run_more_fit_further_and_the_url_keeps_the_users_own(page, name):
    at = run_page(page, **WORST)
    assert not at.exception
    own = parse_query(WORST)[0]
    fitted = budget.fitted(name, own)
    assert fitted.num_tokens < own.num_tokens and budget.need_bytes(name, fitted) <= budget.JOB_BYTES
    notices = [w.value for w in at.warning]
    assert any(f"num_tokens={fitted.num_tokens}." in n for n in notices), notices
    assert at.session_state.settings == own  # the sidebar keeps the explorer's fitted settings for other pages


def test_a_job_over_the_budget_is_never_run():
    gate = admission.Gate(1)
    with pytest.raises(admission.OverBudgetError), gate.admit("too big", need_bytes=budget.job_bytes() + 1):
        pytest.fail("ran")
    assert gate.admitted == 0


# --- a fair queue ------------------------------------------------------------------------------------------------


def _queue(gate, jobs, order, hold):
    """Start ``jobs`` [(name, session, client)] in order, a little apart; each records its turn and holds the gate."""

    def job(name, session, client):
        with gate.admit(name, visitor=(session, client)):
            order.append(name)
            hold.wait(5) if name == jobs[0][0] else time.sleep(0.05)

    threads = []
    for name, session, client in jobs:
        thread = threading.Thread(target=job, args=(name, session, client))
        thread.start()
        threads.append(thread)
        time.sleep(0.05)
    return threads


def test_a_student_behind_another_students_tabs_is_served_next():
    gate, order, hold = admission.Gate(1), [], threading.Event()
    tabs = [(f"a{k}", f"tab-a{k}", "student-a") for k in range(5)]
    threads = _queue(gate, [*tabs, ("b", "tab-b", "student-b")], order, hold)
    hold.set()
    for thread in threads:
        thread.join(10)
    assert order == ["a0", "b", "a1", "a2", "a3", "a4"]  # b arrived last, and waited for one job only


def test_one_job_waits_per_tab_and_a_newer_request_keeps_its_place():
    gate, order, hold = admission.Gate(1), [], threading.Event()
    outcomes = {}

    def job(name, session):
        try:
            with gate.admit(name, visitor=(session, session)):
                order.append(name)
                hold.wait(5) if name == "first" else None
        except admission.SessionEndedError:
            outcomes[name] = "replaced"

    names = [("first", "x"), ("old", "y"), ("other", "z"), ("new", "y")]
    threads = [threading.Thread(target=job, args=pair) for pair in names]
    for thread in threads:
        thread.start()
        time.sleep(0.1)
    assert gate.waiting() == 2  # y's older request left the queue
    hold.set()
    for thread in threads:
        thread.join(10)
    assert outcomes == {"old": "replaced"} and order == ["first", "new", "other"]


def test_a_waiting_job_sees_its_place_and_is_not_told_busy_while_its_turn_comes():
    gate, hold, seen = admission.Gate(1), threading.Event(), []

    def holder():
        with gate.admit("first", visitor=("s1", "a")):
            hold.wait(5)

    first = threading.Thread(target=holder)
    first.start()
    time.sleep(0.1)
    threading.Timer(admission.POLL_S * 8, hold.set).start()
    with gate.admit("second", visitor=("s2", "b"), on_wait=lambda place, waited: seen.append((place, waited))):
        pass
    first.join(5)
    assert seen and seen[0][0] == 2 and seen[-1][0] == 0  # place 2 behind the running job, then its turn
    assert max(w for _, w in seen) > admission.POLL_S * 4


def test_a_full_queue_says_busy_at_once():
    gate, hold = admission.Gate(1, max_waiting=1), threading.Event()

    def job(k):
        with gate.admit(f"job {k}", visitor=(f"s{k}", f"c{k}")):
            hold.wait(5)

    threads = [threading.Thread(target=job, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.1)
    begin = time.monotonic()
    with pytest.raises(admission.ServerBusyError), gate.admit("third", visitor=("s3", "c3")):
        pass
    assert time.monotonic() - begin < 3  # at once: a queued job would wait out the 5 s hold
    hold.set()
    for thread in threads:
        thread.join(5)


def test_the_old_call_form_still_gates_and_a_light_estimate_passes():
    admitted = admission.GATE.admitted
    with admission.admit("old form", heavy=True, should_stop=lambda: False):
        assert admission.GATE.active == 1
    with admission.admit("light", need_bytes=admission.LIGHT_BYTES, should_stop=lambda: False):
        assert admission.GATE.active == 0
    with admission.admit("heavy", need_bytes=admission.LIGHT_BYTES + 1, should_stop=lambda: False):
        assert admission.GATE.active == 1
    assert admission.GATE.admitted == admitted + 2


# --- caches bounded in bytes -------------------------------------------------------------------------------------


def test_a_byte_cache_holds_its_bytes_and_never_an_entry_larger_than_them():
    calls = []

    @caches.byte_cached(max_bytes=3 * 2**20, max_entries=64)
    def make(k: int, n: int):
        calls.append(k)
        return np.zeros(n, dtype=np.uint8)

    for k in range(8):
        make(k, 2**20)
    assert make.cache.bytes <= 3 * 2**20 and len(make.cache) == 2  # 1 MiB and a little each: two fit
    make(100, 4 * 2**20)
    make(100, 4 * 2**20)
    assert calls.count(100) == 2  # too large to keep: computed each time
    make(7, 2**20)
    assert calls.count(7) == 1  # the newest stayed
    make.clear()


def test_an_entry_size_counts_what_a_numpy_view_keeps_alive():
    whole = np.zeros((1000, 1000))
    assert caches.size_of({"row": whole[0]}) >= whole.nbytes


def test_the_npz_download_is_offered_while_it_fits_and_is_made_through_the_gate():
    medium = parse_query(dict(num_heads="16", d_out="256", num_tokens="256", input="random", batch_size="1"))[0]
    worst = parse_query(WORST)[0]
    assert caches.npz_offered(medium) and not caches.npz_offered(worst)
    assert budget.need_bytes("npz", medium) > admission.LIGHT_BYTES  # heavy enough to wait its turn
    admitted = admission.GATE.admitted
    packed = caches.npz_download(medium)()
    assert admission.GATE.admitted == admitted + 1
    assert packed[:2] == b"PK"  # a zip archive: numpy's .npz


def test_a_view_already_made_is_served_without_waiting_for_the_gate():
    made = []

    @caches.gated("explorer")
    @caches.byte_cached(max_bytes=2**20)
    def view(settings, k):
        made.append(k)
        return k

    heavy = parse_query(LARGEST)[0]
    assert caches.is_heavy(heavy)
    view(heavy, 1)
    admitted = admission.GATE.admitted
    assert view(heavy, 1) == 1 and made == [1]
    assert admission.GATE.admitted == admitted  # the hit took no turn
    view.__wrapped__.clear()
