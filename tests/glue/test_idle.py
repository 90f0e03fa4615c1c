"""explorer.glue.memory.idle: the caches are cleared once per idle spell, after the configured time without a
visitor."""

import streamlit as st

from explorer.glue.memory import idle


def test_clears_once_after_the_idle_time_and_again_after_the_next_class():
    clock = idle.IdleClock(after_s=300)
    assert not clock.should_clear(3, now=0)  # a class is connected
    assert not clock.should_clear(0, now=10)  # the last one left at 10 s
    assert not clock.should_clear(0, now=309)
    assert clock.should_clear(0, now=310)  # 300 s without anyone
    assert not clock.should_clear(0, now=900)  # once per idle spell
    assert not clock.should_clear(1, now=1000)  # the next class...
    assert not clock.should_clear(0, now=1100)
    assert clock.should_clear(0, now=1400)  # ...and its idle spell


def test_a_visitor_in_between_restarts_the_count():
    clock = idle.IdleClock(after_s=60)
    assert not clock.should_clear(0, now=0)
    assert not clock.should_clear(1, now=50)
    assert not clock.should_clear(0, now=100)
    assert not clock.should_clear(0, now=150)
    assert clock.should_clear(0, now=160)


def test_outside_a_server_nothing_is_counted_or_cleared():
    assert idle.connected_sessions() is None  # AppTest, notebooks, tests: no runtime
    clock = idle.IdleClock(after_s=0)
    assert not clock.should_clear(None, now=1e9)


def test_clear_caches_empties_every_cache():
    calls = []

    @st.cache_resource
    def resource(n):
        calls.append(n)
        return [n]

    resource(1)
    resource(1)
    assert calls == [1]
    idle.clear_caches()
    resource(1)
    assert calls == [1, 1]


def test_expired_closed_sessions_are_dropped_not_kept_until_the_next_disconnect():
    from types import SimpleNamespace

    from streamlit.runtime.memory_session_storage import MemorySessionStorage

    storage = MemorySessionStorage(ttl_seconds=0)  # every stored session has expired at once
    storage.save(SimpleNamespace(session=SimpleNamespace(id="closed-tab"), client=None))
    assert storage.list() == []  # Streamlit no longer lists it...
    assert len(storage._cache._data) == 1  # ...but still holds it, with everything its last run made
    assert idle.drop_expired_sessions(storage) == 1
    assert len(storage._cache._data) == 0
    assert idle.drop_expired_sessions(storage) == 0
    assert idle.drop_expired_sessions() == 0  # no server here: nothing to drop


def test_the_idle_clear_drops_closed_sessions_before_memory_goes_back(monkeypatch):
    calls = []
    monkeypatch.setattr(idle, "drop_expired_sessions", lambda: calls.append("sessions") or 3)
    monkeypatch.setattr(idle.admission, "release_memory", lambda: calls.append("release"))
    idle.clear_caches()
    assert calls == ["sessions", "release"]
