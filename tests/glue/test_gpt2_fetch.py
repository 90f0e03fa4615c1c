"""explorer.glue.cached.real_models.download_gpt2 offline, with a fake fetch that hangs or fails.

Before: a fetch held the heavy-job slot while the network did not answer (six presses, six attempts 10 s apart, the
slot held 61.5 s, a bystander's largest Explorer run 61.1 s instead of 2.1 s), and after one failure GPT-2 was off for
every session until a restart. Now the network is waited on outside the slot, one fetch runs at a time, and a failure
is retried with back-off, the page saying when.
"""

from __future__ import annotations

import threading
import time
import types

import pytest

from explorer.glue.cached import real_models
from explorer.glue.memory import admission


class UnavailableError(Exception):
    pass


class StoppedError(Exception):
    pass


def fake_api(fetch):
    """A stand-in for mha_core.gpt.download whose download is ``fetch``; GPT-2 fits (MHA_SERVER_MB below)."""
    calls = []

    def download_gpt2(progress=None, should_stop=None, timeout=None):
        calls.append(timeout)
        return fetch()

    api = types.SimpleNamespace(
        GPT2Unavailable=UnavailableError,
        DownloadStoppedError=StoppedError,
        download_gpt2=download_gpt2,
        gpt2_cached=lambda: not api.failing,
        gpt2_bytes=lambda tokens=1024: types.SimpleNamespace(kept=1, loading=1),
        failing=False,
    )
    return api, calls


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setenv("MHA_SERVER_MB", "24000")
    real_models.forget_gpt2_failures()
    yield
    real_models.forget_gpt2_failures()


def test_a_hanging_fetch_holds_no_heavy_slot_and_a_bystander_runs_at_once(monkeypatch):
    release = threading.Event()
    api, calls = fake_api(lambda: release.wait(20))
    monkeypatch.setattr(real_models, "_gpt2_api", lambda: api)
    fetch = threading.Thread(target=real_models.download_gpt2, args=(None,))
    fetch.start()
    try:
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert calls == [real_models.FETCH_TIMEOUT_S]  # the fetch is waiting on the "network", with a timeout
        started = time.monotonic()
        bystander = admission.admit(
            "the largest Explorer run",
            need_bytes=admission.JOB_BYTES,
            should_stop=lambda: False,
            wait_s=2.0,
            visitor=("bystander", "their client"),
            on_wait=None,
        )
        with bystander:  # ServerBusyError after 2 s if the fetch held the slot
            waited = time.monotonic() - started
        assert waited < 1.0, waited
    finally:
        release.set()
        fetch.join(10)


def test_one_fetch_at_a_time_and_a_second_press_takes_its_result(monkeypatch):
    release = threading.Event()
    api, calls = fake_api(lambda: release.wait(20))
    monkeypatch.setattr(real_models, "_gpt2_api", lambda: api)
    results = []
    presses = [threading.Thread(target=lambda: results.append(real_models.download_gpt2(None))) for _ in range(3)]
    for press in presses:
        press.start()
    time.sleep(0.5)
    assert len(calls) == 1  # the others wait for it
    release.set()
    for press in presses:
        press.join(10)
    assert results == [True, True, True] and len(calls) == 1


def test_a_failure_is_remembered_and_retried_with_back_off_saying_when(monkeypatch):
    def unreachable():
        raise UnavailableError("huggingface.co did not answer")

    api, calls = fake_api(unreachable)
    api.failing = True
    monkeypatch.setattr(real_models, "_gpt2_api", lambda: api)
    clock = [1000.0]
    monkeypatch.setattr(real_models.time, "monotonic", lambda: clock[0])
    assert real_models.download_gpt2(None) is False and len(calls) == 1
    assert real_models.gpt2_offline() and real_models.gpt2_retry_in() == real_models.RETRY_FIRST_S
    assert "tries again in 30 s (failed 1 time)" in real_models.gpt2_absent_reason()
    for _ in range(5):  # presses before the retry is due try nothing
        assert real_models.download_gpt2(None) is False
    assert len(calls) == 1
    clock[0] += real_models.RETRY_FIRST_S + 1
    assert not real_models.gpt2_offline()  # the page offers the button again
    assert real_models.download_gpt2(None) is False and len(calls) == 2
    assert real_models.gpt2_retry_in() == 2 * real_models.RETRY_FIRST_S  # twice as long
    assert "tries again in 60 s (failed 2 times)" in real_models.gpt2_absent_reason()
    clock[0] += 2 * real_models.RETRY_FIRST_S + 1
    api.failing = False
    api.download_gpt2 = lambda progress=None, should_stop=None, timeout=None: calls.append(timeout)
    assert real_models.download_gpt2(None) is True and len(calls) == 3
    assert not real_models.gpt2_offline() and real_models.gpt2_retry_in() == 0  # the failures are forgotten
    many = [real_models.RETRY_FIRST_S * 2 ** (n - 1) for n in range(1, 12)]
    assert min(max(many), real_models.RETRY_MAX_S) == real_models.RETRY_MAX_S  # the back-off stops at 30 min
