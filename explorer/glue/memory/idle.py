"""When nobody has been connected for a while, hand the caches' memory back, so idle RSS returns near its start.

Streamlit's caches expire entries only when they are next used, so after a class has left the server would hold
its views, runs and trained models until the next visitor, possibly hours later. A daemon thread watches the
number of connected sessions; once it has been 0 for ``IDLE_CLEAR_S`` seconds (a minute, as long as Streamlit keeps a
closed tab's session; ``MHA_IDLE_CLEAR_S`` in the environment for measurements), every cache is cleared and freed
memory goes back to the OS. At 5 minutes a used server held its full caches and glibc's fragments through a class's
break: 482 MB two minutes after twenty tabs closed, 410 once cleared (warm 392; docs/memory.md). What stays is what
any visitor needs first: torch, plotly and Streamlit themselves. The next visitor rebuilds what they open, which
costs the same as a cache miss.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

import streamlit as st
from streamlit import runtime

from explorer.glue.memory import admission, caches

IDLE_CLEAR_S = float(os.environ.get("MHA_IDLE_CLEAR_S", "60"))
CHECK_S = min(15.0, max(1.0, IDLE_CLEAR_S / 4))  # the clear comes IDLE_CLEAR_S to IDLE_CLEAR_S + CHECK_S after

log = logging.getLogger("mha_explorer")
_started = threading.Lock()
_thread: threading.Thread | None = None


def connected_sessions() -> int | None:
    """Sessions with an open websocket now, or None outside a running server (AppTest, a notebook)."""
    if not runtime.exists():
        return None
    manager = getattr(runtime.get_instance(), "_session_mgr", None)
    return None if manager is None else manager.num_active_sessions()


def drop_expired_sessions(storage=None) -> int:
    """Drop the closed tabs' sessions whose ``server.disconnectedSessionTTL`` has passed; how many were dropped.

    Streamlit keeps a closed tab's session (its session state, widgets and last run's objects) for that TTL so the tab
    can reconnect, in a TTL cache that removes expired entries only when it is written to or counted: after a class
    the last tabs' sessions stayed in memory until the next visitor closed a tab, and were still there when the idle
    clear collected (8 MB of cycles after a compressed soak). 0 outside a server, or if Streamlit's storage changes.
    """
    if storage is None:
        if not runtime.exists():
            return 0
        storage = getattr(getattr(runtime.get_instance(), "_session_mgr", None), "_session_storage", None)
    expire = getattr(getattr(storage, "_cache", None), "expire", None)
    return len(expire()) if callable(expire) else 0


def clear_caches() -> None:
    """Every st.cache_data and st.cache_resource entry and the expired closed sessions, then memory back to the OS."""
    st.cache_data.clear()
    st.cache_resource.clear()
    caches.clear_all()
    dropped = drop_expired_sessions()
    admission.release_memory()
    log.info(
        "no visitor for %.0f s: caches cleared, %d closed sessions dropped, memory handed back", IDLE_CLEAR_S, dropped
    )


@dataclass
class IdleClock:
    """Decides when to clear: once per idle spell, after ``after_s`` seconds with no session connected."""

    after_s: float = IDLE_CLEAR_S
    idle_since: float | None = None
    cleared: bool = False

    def should_clear(self, sessions: int | None, now: float) -> bool:
        if sessions is None or sessions > 0:  # someone is here (or no server to ask): a new spell starts later
            self.idle_since, self.cleared = None, False
            return False
        if self.idle_since is None:
            self.idle_since = now
        if self.cleared or now - self.idle_since < self.after_s:
            return False
        self.cleared = True
        return True


def _watch() -> None:
    clock = IdleClock()
    while True:
        time.sleep(CHECK_S)
        try:
            if clock.should_clear(connected_sessions(), time.monotonic()):
                clear_caches()
        except Exception:  # noqa: BLE001 - a watcher must outlive a runtime it cannot read
            log.exception("idle watcher failed; it keeps watching")


def start_watcher() -> None:
    """Start the watcher once per process (every page calls this; only a running server gets one)."""
    global _thread
    with _started:
        if _thread is None and connected_sessions() is not None:
            _thread = threading.Thread(target=_watch, name="mha-idle-watcher", daemon=True)
            _thread.start()
