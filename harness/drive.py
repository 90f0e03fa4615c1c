"""A student's session over time: open its own link, move a widget every few seconds, check every run.

bench/load_test.py runs many of these against one server, deploy/local_cluster.py through HAProxy (where a run cut
off by its server's death reconnects once, as the browser does).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np
import websocket
from streamlit.proto.WidgetStates_pb2 import WidgetState

from explorer.glue.state import settings as cfg
from explorer.glue.state.settings import Settings
from harness.checks import Check, check_run, settings_from_query
from harness.session import RunResult, Session


@dataclass
class SessionLog:
    index: int
    query: str
    first: float | None = None
    reruns: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    cross_talk: list[str] = field(default_factory=list)  # what a run showed that was not this session's
    reconnects: int = 0  # websockets reopened after their server went away (``drive_session(reconnect=True)``)


def _apply(expected: Settings, key: str, value) -> Settings:
    """What the app's widget callback makes of a widget change (d_out follows num_heads × head_dim)."""
    if key == "w_seed":
        raw = replace(expected, seed=int(value))
    elif key == "w_num_heads":
        raw = replace(expected, num_heads=int(value), d_out=int(value) * expected.head_dim)
    else:
        raise ValueError(key)
    return cfg.reconcile(raw)[0]


def drive_session(
    index: int,
    port: int,
    deadline: float,
    max_reruns: int,
    think: tuple[float, float],
    start: threading.Barrier | None,
    log: SessionLog,
    reconnect: bool = False,
) -> None:
    """Open the session's link, then move a widget every few seconds until the deadline; check every run.

    ``reconnect``: behind a load balancer, a run cut off by its server's death reconnects once, as the browser
    does, and is sent again; that counts in ``log.reconnects``, and only a second failure is an error.
    """
    rng = random.Random(index)
    expected = settings_from_query(log.query)
    session = Session(port, log.query)
    try:
        if start is not None:
            start.wait(timeout=60)
        session.connect()
        result = session.run()
        log.first = result.seconds
        _record(log, result, expected)
        for step in range(max_reruns):
            pause = rng.uniform(*think)
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
            if step % 2 == 0 or "w_num_heads" not in session.widget_ids:
                key, value = "w_seed", expected.seed + 1 + rng.randrange(5)
                widget = session.widget(key, double_value=float(value))
            else:
                key, value = "w_num_heads", 1 + (expected.num_heads % 4)
                widget = session.widget(key, double_array_value=[float(value)])
            expected = _apply(expected, key, value)
            if reconnect:
                result, expected = run_or_reconnect(session, [widget], log, expected)
            else:
                result = session.run([widget])
            log.reruns.append(result.seconds)
            _record(log, result, expected)
    except Exception as error:  # noqa: BLE001 - a load test counts every failure, whatever it is
        log.errors.append(f"client {type(error).__name__}: {error}")
    finally:
        session.close()


def run_or_reconnect(
    session: Session, widgets: list[WidgetState], log: SessionLog, expected: Settings
) -> tuple[RunResult, Settings]:
    """One run; if the websocket was closed under it (its server died), reconnect once and run again.

    A process that never saw this session starts its page from the URL, so the widget change cut off with its
    server may be lost: the page shows the URL's settings again. That is this session's own earlier state, not
    another session's, so the URL's settings become the expected ones (and any other settings are cross-talk).
    """
    url_settings = settings_from_query(session.query_string)
    try:
        result = session.run(widgets)
    except (OSError, websocket.WebSocketException) as error:  # the send itself found the socket closed
        result = RunResult(status=f"disconnected ({type(error).__name__})")
    if not result.status.startswith("disconnected"):
        return result, expected
    log.reconnects += 1
    session.close()
    result = session.connect().run(widgets)
    if check_run(result, expected).cross_talk and not check_run(result, url_settings).cross_talk:
        return result, url_settings
    return result, expected


def _record(log: SessionLog, result: RunResult, expected: Settings) -> None:
    if not result.ok:
        log.errors.extend(result.errors or [f"run status {result.status}"])
    check = check_run(result, expected)
    log.checks.append(check)
    if check.cross_talk:
        shown = settings_from_query(result.query_string) if result.query_string else None
        log.cross_talk.append(
            f"session {log.index}: expected {expected}, URL {shown}, shape ok {check.shape_ok}, numbers {check.numbers}"
        )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return float(np.percentile(values, q))
