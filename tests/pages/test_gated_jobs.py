"""Issue 10's repros, continued: what a crafted link can start waits its turn at one admission gate and stops when
its tab closes; and continuiti's pluggable attention call.

Each of these failed before the fix: a Cost measurement beside a big run, a closed tab's work running on.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
import torch

from explorer.glue.cached import real_circuits, real_models, training_runs
from explorer.glue.memory import admission, budget, caches
from explorer.glue.state import settings as cfg
from mha_core.runs import profiling
from mha_core.toy import tiny_training

from ..apptest_helpers import check_page, open_page

# --- the admission gate -----------------------------------------------------------------------------------------


def test_heavy_jobs_never_overlap_and_a_waiting_job_leaves_when_its_session_ends():
    gate = admission.Gate(1)
    inside, overlap = [], []
    ended = threading.Event()

    def job(k: int) -> None:
        with gate.admit(f"job {k}"):
            inside.append(k)
            overlap.append(gate.active)
            time.sleep(0.2)

    threads = [threading.Thread(target=job, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)
    waited = {}

    def closed_tab() -> None:
        begin = time.monotonic()
        try:
            with gate.admit("closed tab", should_stop=ended.is_set):
                waited["ran"] = True
        except admission.SessionEndedError:
            waited["left_after"] = time.monotonic() - begin
            waited["jobs_begun"] = len(inside)

    leaver = threading.Thread(target=closed_tab)
    leaver.start()
    time.sleep(0.1)
    ended.set()
    leaver.join(5)
    for thread in threads:
        thread.join(10)
    assert sorted(inside) == [0, 1, 2, 3] and max(overlap) == 1 and gate.peak_active == 1
    # It left at its next poll, while jobs queued before it still waited (a clock bound raced under load).
    assert "ran" not in waited and waited["jobs_begun"] < 4, waited


def test_a_job_that_waits_too_long_is_told_the_server_is_busy():
    gate = admission.Gate(1)
    holding, release = threading.Event(), threading.Event()

    def other_visitor() -> None:
        with gate.admit("first"):
            holding.set()
            release.wait(10)

    other = threading.Thread(target=other_visitor)
    other.start()
    holding.wait(5)
    with pytest.raises(admission.ServerBusyError, match="busy"), gate.admit("second", wait_s=0.3):
        pass
    release.set()
    other.join(5)
    with gate.admit("third", wait_s=0.3):  # the slot came back
        assert gate.active == 1


def test_a_nested_admission_in_the_same_thread_does_not_deadlock():
    gate = admission.Gate(1)
    with gate.admit("outer"), gate.admit("inner", wait_s=0.5):
        assert gate.active == 1


def test_session_ended_asks_the_runtime_about_this_session(monkeypatch):
    from streamlit.runtime import Runtime

    active = {"s1"}

    class FakeRuntime:
        def is_active_session(self, session_id):
            return session_id in active

    class FakeContext:
        session_id = "s1"

    monkeypatch.setattr(Runtime, "exists", staticmethod(lambda: True))
    monkeypatch.setattr(Runtime, "instance", staticmethod(lambda: FakeRuntime()))
    monkeypatch.setattr(admission, "get_script_run_ctx", lambda suppress_warning=False: FakeContext())
    ended = admission.session_ended()
    assert not ended()
    active.clear()  # the tab closed: the websocket session manager drops it from the active sessions
    assert ended()


def test_a_training_job_stops_when_its_session_ends():
    config = tiny_training.make_config("previous_token", steps=2000, seed=11)
    closed = threading.Event()
    job = training_runs.TrainingJob(config, training_runs.ResultStore(), session_ended=closed.is_set).start()
    while not job.history()[0] and job.running:
        time.sleep(0.02)
    closed.set()
    assert job.wait(10)
    assert job.result is not None and job.result.stopped_early and job.result.steps_run < config.steps


def test_the_cost_measurement_goes_through_the_gate_and_stops_when_its_session_ends(monkeypatch):
    admitted = admission.GATE.admitted
    calls = {"n": 0}

    def ends_after_two_checks():
        def ended():
            calls["n"] += 1
            return calls["n"] > 2

        return ended

    monkeypatch.setattr(admission, "session_ended", ends_after_two_checks)
    at = open_page("pages/6_Cost.py", {"num_heads": "2", "d_out": "8", "max_tokens": "256"})
    at.button(key="cost_measure").click().run()
    assert not at.exception and not at.error
    assert admission.GATE.admitted == admitted + 1
    assert "cost_report" not in at.session_state  # stopped between measurements, nothing kept
    assert profiling._MEASURING.acquire(timeout=1)  # and the measurement lock was given back
    profiling._MEASURING.release()


def test_the_cost_measurement_is_held_to_its_memory_budget():
    at = open_page("pages/6_Cost.py", {"num_heads": "16", "d_out": "1024", "max_tokens": "1024", "batch_size": "1"})
    check_page(at, [], "Cost at 16 heads")
    assert any(f"memory budget of {budget.JOB_BYTES // budget.MB} MB" in w.value for w in at.warning)
    settings = cfg.parse_query({"num_heads": "16", "d_out": "1024", "batch_size": "1"})[0]
    longest = budget.cost_max_tokens(settings, 1024, profiling.TOKEN_STEPS)
    assert longest == 512  # 4.3 × 16 · 512² · 4 B + 60 B × 1024² + 12 MiB = 144 MiB fits 200 MiB; 1024 tokens do not
    assert budget.cost_max_tokens(replace(settings, dtype="float64"), 1024, profiling.TOKEN_STEPS) == 256  # twice


def test_explorer_heavy_runs_take_the_gate():
    small, large = cfg.DEFAULTS, cfg.parse_query({"num_heads": "16", "num_tokens": "512", "batch_size": "1"})[0]
    assert not caches.is_heavy(small) and caches.is_heavy(large)
    admitted = admission.GATE.admitted
    with caches.heavy_gate(small):
        assert admission.GATE.admitted == admitted
    with caches.heavy_gate(large):
        assert admission.GATE.active == 1
    assert admission.GATE.admitted == admitted + 1


# --- continuiti's attention call --------------------------------------------------------------------------------


def test_a_plain_continuiti_style_attention_plugs_in():
    """A callable taking only (query, key, value, attn_mask=None), called by keyword, gets no dropout_p or recorder."""
    import torch.nn.functional as F

    from mha_core.attention.modules import QKVMultiHeadAttention, trace_forward

    calls = []

    def plain(query, key, value, attn_mask=None):
        calls.append(attn_mask)
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)

    torch.manual_seed(0)
    reference = QKVMultiHeadAttention(8, 2)
    module = QKVMultiHeadAttention(8, 2, attention=plain)
    module.load_state_dict(reference.state_dict())
    q, kv = torch.rand(2, 3, 8), torch.rand(2, 5, 8)
    mask = torch.rand(2, 3, 5) > 0.3
    mask[..., 0] = True
    assert torch.allclose(module(q, kv, kv, mask), reference(q, kv, kv, mask), atol=1e-6)
    assert calls[-1].shape == (2, 1, 3, 5)
    assert torch.allclose(trace_forward(module, q, kv, kv).output, reference(q, kv, kv), atol=1e-6)
    with pytest.raises(ValueError, match="dropout_p=0.5 needs an attention that accepts dropout_p"):
        QKVMultiHeadAttention(8, 2, attention=plain, dropout_p=0.5)


def test_torch_sdpa_wrapped_takes_dropout_by_keyword():
    import torch.nn.functional as F

    from mha_core.attention.modules import QKVMultiHeadAttention

    seen = []

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0):
        seen.append(dropout_p)
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p)

    module = QKVMultiHeadAttention(8, 2, attention=sdpa, dropout_p=0.25)
    x = torch.rand(1, 4, 8)
    module.eval()(x, x, x)
    module.train()(x, x, x)
    assert seen == [0.0, 0.25]  # dropout only in training mode, passed because the signature accepts it


def test_writing_and_knocking_out_wait_their_turn_sized_by_what_they_do(monkeypatch):
    """Real heads' "Continue my sentence" and knock-outs ran as light work, all at once: 30 writing tabs made a
    bystander's default page take 5.6 s. They take the gate as heavy work now, with their bytes, and a result
    already made waits for nobody."""
    admitted = []
    real_admit = admission.admit

    def watching(label, **kwargs):
        admitted.append((label, kwargs))
        return real_admit(label, **kwargs)

    monkeypatch.setattr(admission, "admit", watching)
    text = f"A sentence the caches have not seen, {time.time_ns()}; a sentence the caches have not seen."
    at = open_page("pages/8_Real_heads.py", {"model": "own", "text": text, "ablate": "0.1"})
    at.number_input(key="w_rh_write").set_value(7)
    at.button(key="w_rh_continue").click().run()
    check_page(at, [text], "writing 7 tokens")
    writes = [kwargs for label, kwargs in admitted if "writing 7 tokens" in label]
    knocks = [kwargs for label, kwargs in admitted if "knocking heads out" in label]
    tokens = len(real_models.token_ids("own", text)[: real_models.page_cap("own")])
    layers = real_models.model_and_tokenizer("own")[0].cfg["n_layers"]
    assert len(writes) == 1 and writes[0]["heavy"], admitted
    assert writes[0]["need_bytes"] == real_circuits.run_bytes("own", tokens + 7, 0)
    assert knocks and all(kwargs["heavy"] for kwargs in knocks), admitted
    assert knocks[0]["need_bytes"] == real_circuits.run_bytes("own", tokens, layers)
    assert real_circuits.run_bytes("own", tokens + 70, 0) > writes[0]["need_bytes"]  # sized by what it does
    admitted.clear()
    at.run()  # the same continuation and knock-out, made already: no wait at the gate
    assert not [label for label, _ in admitted if "writing" in label or "knocking" in label], admitted
