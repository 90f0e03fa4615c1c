"""A class opens the teacher's link at once: N concurrent sessions, each from its own URL, moving widgets.

Each session is a websocket client that speaks Streamlit's own protocol, as the browser does: it connects
to ``ws://127.0.0.1:PORT/_stcore/stream`` (subprotocol "streamlit"), sends a ``BackMsg.rerun_script`` with
its query string and widget states, and reads ``ForwardMsg``s until ``script_finished``. That costs a few
milliseconds of client CPU per rerun, so 30 sessions fit on 2 cores beside the server (30 browsers would not).

Every rerun is checked:

* errors: exception elements, ``st.error`` alerts (the page boundary's message), runs that did not finish
  successfully, timeouts, and "page failed" lines in the server log;
* cross-talk: the URL the server wrote back parses to this session's own settings, the captions carry this
  session's attention shape (b, h, T, T), and the numbers of the "Final output" figure equal an independent
  ``mha_core`` computation (module built from the settings, plain forward) for this session's settings.

It reports rerun latency (p50, p95), the server's peak RSS (VmHWM and a 20 Hz sampler, children included)
and its RSS ``--settle-seconds`` after every session closed. Traffic goes to 127.0.0.1 only; every loop is
bounded in count and time, and the server is stopped at the end.

    python bench/load_test.py [--sessions 30 --seconds 60 --settle-seconds 60 --think 1 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import numpy as np
import torch
import websocket
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from explorer.glue import settings as cfg  # noqa: E402
from explorer.glue.settings import Settings  # noqa: E402
from explorer.views.figures import decode_array  # noqa: E402
from mha_core import runs  # noqa: E402

HOST = "127.0.0.1"  # every socket this file opens goes here, and only here


# --- the server and its memory ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _status_kb(pid: int, field_name: str) -> int:
    """A field of /proc/<pid>/status in kB (0 when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every process below pid (from /proc/*/stat), so a server's children count too."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_rss_mb(pid: int) -> float:
    """Resident memory of pid and its descendants, in MB (2**20 bytes)."""
    return sum(_status_kb(p, "VmRSS") for p in [pid, *descendants(pid)]) / 1024


def hwm_mb(pid: int) -> float:
    """The kernel's high-water mark of pid's resident memory since start or the last ``reset_hwm``."""
    return _status_kb(pid, "VmHWM") / 1024


def reset_hwm(pid: int) -> bool:
    """Reset VmHWM to the current RSS (writing 5 to clear_refs, Linux ≥ 4.0); False where not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


class RssSampler:
    """Samples the server tree's RSS at about 20 Hz in a thread; ``peak_mb`` since the last ``reset``."""

    def __init__(self, pid: int, interval: float = 0.05):
        self.pid, self.interval = pid, interval
        self._peak = 0.0
        self._hwm_reset = False
        self._children: list[int] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RssSampler:
        self.reset()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        last_scan = 0.0
        while not self._stop.is_set():
            if time.monotonic() - last_scan > 1.0:
                self._children, last_scan = descendants(self.pid), time.monotonic()
            rss = sum(_status_kb(p, "VmRSS") for p in [self.pid, *self._children]) / 1024
            with self._lock:
                self._peak = max(self._peak, rss)
            self._stop.wait(self.interval)

    def reset(self) -> None:
        with self._lock:
            self._hwm_reset = reset_hwm(self.pid)
            self._peak = tree_rss_mb(self.pid)

    @property
    def peak_mb(self) -> float:
        """The sampled peak, raised to the kernel's VmHWM when it could be reset (it misses no spike)."""
        with self._lock:
            peak = self._peak
        if self._hwm_reset:
            child_rss = sum(_status_kb(p, "VmRSS") for p in self._children) / 1024
            peak = max(peak, hwm_mb(self.pid) + child_rss)
        return peak


class StreamlitServer:
    """``python -m streamlit run app.py`` on 127.0.0.1 and a free port, stopped on exit."""

    def __init__(
        self,
        script: str = "app.py",
        extra_args: Iterable[str] = (),
        log_path: Path | None = None,
        start_timeout: float = 120,
        root: Path = ROOT,
        env: Mapping[str, str] | None = None,
    ):
        self.script, self.extra_args, self.start_timeout = script, list(extra_args), start_timeout
        self.root, self.env = Path(root), dict(env or {})
        self.port = free_port()
        self.log_path = log_path or ROOT / "artifacts" / "streamlit-load-test.log"  # the last server's log
        self.process: subprocess.Popen | None = None
        self.started_s = 0.0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> StreamlitServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in __exit__)
        env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", **self.env)
        command = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            self.script,
            "--server.headless=true",
            f"--server.port={self.port}",
            f"--server.address={HOST}",
            *self.extra_args,
        ]
        begin = time.monotonic()
        self.process = subprocess.Popen(command, cwd=self.root, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = begin + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        self.started_s = time.monotonic() - begin
                        return self
            except OSError:
                time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"the server was not healthy within {self.start_timeout} s; see {self.log_path}")

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def rss_mb(self) -> float:
        return tree_rss_mb(self.pid)


# --- one session: Streamlit's protocol ------------------------------------------------------------------------------


@dataclass
class RunResult:
    """What one script run sent to this session."""

    seconds: float = 0.0
    status: str = ""  # a ForwardMsg.ScriptFinishedStatus name, or "timeout" / "disconnected"
    texts: list[str] = field(default_factory=list)  # markdown, captions, headings, alerts, code
    errors: list[str] = field(default_factory=list)  # exception elements and st.error alerts
    warnings: list[str] = field(default_factory=list)
    charts: dict[str, str] = field(default_factory=dict)  # widget key ("chart_output") -> figure JSON
    widget_ids: dict[str, str] = field(default_factory=dict)  # user key ("w_seed") -> element id
    query_string: str | None = None  # what the script wrote into the URL, when it did
    messages: int = 0
    bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "FINISHED_SUCCESSFULLY" and not self.errors


def _user_key(element_id: str) -> str:
    """'$$ID-<hash>-w_seed' -> 'w_seed' (keyed elements end with their user key)."""
    return element_id.split("-", 2)[-1] if element_id.startswith("$$ID-") else element_id


class Session:
    """A browser tab, reduced to its websocket: the URL it was opened with and the widgets it moves."""

    def __init__(self, port: int, query_string: str = "", timeout: float = 180):
        self.port, self.query_string, self.timeout = port, query_string, timeout
        self.ws: websocket.WebSocket | None = None
        self.widget_ids: dict[str, str] = {}
        # As a browser tab behind a load balancer: the cookies it set (the sticky server) and the session id the
        # server gave, both sent again on a reconnection (the id as the third subprotocol entry, as the frontend does).
        self.cookies: dict[str, str] = {}
        self.session_id = ""

    def connect(self) -> Session:
        cookie = "; ".join(f"{name}={value}" for name, value in self.cookies.items()) or None
        self.ws = websocket.create_connection(
            f"ws://{HOST}:{self.port}/_stcore/stream",
            subprotocols=["streamlit", "", self.session_id] if self.session_id else ["streamlit"],
            cookie=cookie,
            timeout=self.timeout,
        )
        for name, value in (self.ws.getheaders() or {}).items():
            if name.lower() == "set-cookie":
                pair = value.split(";", 1)[0]
                self.cookies[pair.split("=", 1)[0].strip()] = pair.split("=", 1)[-1].strip()
        return self

    def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(OSError, websocket.WebSocketException):
                self.ws.close(timeout=2)
            self.ws = None

    def __enter__(self) -> Session:
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def send_rerun(self, widgets: Iterable[WidgetState] = ()) -> None:
        message = BackMsg()
        message.rerun_script.query_string = self.query_string
        message.rerun_script.widget_states.widgets.extend(widgets)
        assert self.ws is not None
        self.ws.send_binary(message.SerializeToString())

    def widget(self, key: str, **value) -> WidgetState:
        """A WidgetState for the keyed widget seen in an earlier run, e.g. widget("w_seed", double_value=7)."""
        state = WidgetState(id=self.widget_ids[key])
        if "double_array_value" in value:
            state.double_array_value.data.extend(value.pop("double_array_value"))
        for name, item in value.items():
            setattr(state, name, item)
        return state

    def run(
        self, widgets: Iterable[WidgetState] = (), keep_charts: Iterable[str] = ("chart_output", "chart_attn_weights")
    ) -> RunResult:
        """Rerun the script with these widget values and collect what it sends, until script_finished."""
        keep = set(keep_charts)
        result = RunResult()
        begin = time.monotonic()
        self.send_rerun(widgets)
        deadline = begin + self.timeout
        assert self.ws is not None
        try:
            while time.monotonic() < deadline:
                data = self.ws.recv()
                if not isinstance(data, bytes):
                    continue
                result.messages += 1
                result.bytes += len(data)
                message = ForwardMsg()
                message.ParseFromString(data)
                kind = message.WhichOneof("type")
                if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                    self._element(message.delta.new_element, result, keep)
                elif kind == "new_session" and message.new_session.initialize.session_id:
                    self.session_id = message.new_session.initialize.session_id
                elif kind == "page_info_changed":
                    result.query_string = message.page_info_changed.query_string
                elif kind == "script_finished":
                    result.status = ForwardMsg.ScriptFinishedStatus.Name(message.script_finished)
                    if message.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                        break
            else:
                result.status = "timeout"
        except websocket.WebSocketTimeoutException:
            result.status = "timeout"
        except (OSError, websocket.WebSocketException) as error:
            result.status = f"disconnected ({type(error).__name__})"
        result.seconds = time.monotonic() - begin
        if result.query_string is not None:
            self.query_string = result.query_string  # the browser's address bar follows the script
        self.widget_ids.update(result.widget_ids)
        return result

    @staticmethod
    def _element(element, result: RunResult, keep: set[str]) -> None:
        kind = element.WhichOneof("type")
        inner = getattr(element, kind)
        element_id = getattr(inner, "id", "") if kind != "exception" else ""
        if element_id:
            result.widget_ids[_user_key(element_id)] = element_id
        if kind == "markdown" or kind == "heading":
            result.texts.append(inner.body)
        elif kind == "code":
            result.texts.append(inner.code_text)
        elif kind == "alert":
            result.texts.append(inner.body)
            if inner.format == Alert.ERROR:
                result.errors.append(f"st.error: {inner.body[:300]}")
            elif inner.format == Alert.WARNING:
                result.warnings.append(inner.body)
        elif kind == "exception":
            result.errors.append(f"exception {inner.type}: {inner.message[:300]}")
        elif kind == "plotly_chart" and _user_key(element_id) in keep:
            result.charts[_user_key(element_id)] = inner.spec


# --- what each session expects --------------------------------------------------------------------------------------


def shown_output(figure_json: str) -> np.ndarray | None:
    """The exact numbers of a figure's heads stacked (h, i, j): the "Final output" or the attention weights;
    None when they were downsampled to uint8 codes."""
    figure = json.loads(figure_json)
    traces = [t for t in figure["data"] if (t.get("meta") or {}).get("role") == "values"]
    if not traces:
        return None
    traces.sort(key=lambda t: t["meta"].get("head", 0))
    heads = [decode_array(t["z"]) for t in traces]
    if any(z.dtype.kind != "f" for z in heads):
        return None
    return np.stack(heads)


_EXPECTED: dict[tuple[Settings, int], np.ndarray] = {}
_EXPECTED_LOCK = threading.Lock()


def expected_output(settings: Settings, batch_index: int = 0) -> np.ndarray:
    """output[batch_index] (T, d_out) from mha_core alone: the module built from the settings, a plain forward."""
    key = (settings, batch_index)
    with _EXPECTED_LOCK:
        if key not in _EXPECTED:
            module = runs.build_module(settings.module_spec())
            x, _ = runs.build_input(settings.input_spec())
            weight = module.W_query.weight
            with torch.no_grad():
                output = module(x.to(device=weight.device, dtype=weight.dtype))  # (b, T, d_out)
            _EXPECTED[key] = output[batch_index].float().cpu().numpy()[None]  # (1, T, d_out)
        return _EXPECTED[key]


def expected_weights(settings: Settings, batch_index: int = 0) -> np.ndarray:
    """attn_weights[batch_index] (h, T, T) from mha_core's own trace (blocked keys weigh exactly 0)."""
    module = runs.build_module(settings.module_spec())
    x, _ = runs.build_input(settings.input_spec())
    return runs.run_trace(module, x, train=False, seed=settings.seed).numpy("attn_weights")[batch_index]


def settings_from_query(query_string: str) -> Settings:
    params = {k: v for k, v in parse_qs(query_string, keep_blank_values=True).items() if k in cfg.FIELD_NAMES}
    return cfg.parse_query(params)[0]


@dataclass
class Check:
    """One rerun's verdict on cross-talk."""

    url_ok: bool
    shape_ok: bool
    numbers: str  # "equal", "different", "not shown"

    @property
    def cross_talk(self) -> bool:
        return not self.url_ok or not self.shape_ok or self.numbers == "different"


def check_run(result: RunResult, expected: Settings) -> Check:
    url_ok = result.query_string is None or settings_from_query(result.query_string) == expected
    b, h, t = expected.batch_size, expected.num_heads, expected.num_tokens
    shapes = (f"({b}, {h}, {t}, {t})", f"({b}, {h}, {t}, {expected.head_dim})")  # attention or reshapes section
    shape_ok = any(shape in text for text in result.texts for shape in shapes)
    numbers = "not shown"
    for key, expect in (("chart_output", expected_output), ("chart_attn_weights", expected_weights)):
        shown = shown_output(result.charts[key]) if key in result.charts else None
        if shown is not None:
            want = expect(expected)
            same = shown.shape == want.shape and np.allclose(shown, want, rtol=1e-5, atol=1e-6, equal_nan=True)
            numbers = "equal" if same and numbers != "different" else "different"
    return Check(url_ok, shape_ok, numbers)


def session_query(index: int) -> dict[str, str]:
    """Session ``index``'s own link: small, distinct settings, so numbers tell the sessions apart."""
    heads = 1 + index % 4
    head_dim = 2 + index % 3
    return {
        "num_heads": str(heads),
        "d_out": str(heads * head_dim),
        "num_tokens": str(4 + (index * 7) % 29),
        "d_in": str(4 + index % 5),
        "batch_size": str(1 + index % 2),
        "input": "random",
        "seed": str(1000 + index),
        "section": "reshapes" if index % 2 else "attention",  # the page draws and sends only the open section
    }


# --- the load test --------------------------------------------------------------------------------------------------


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


@dataclass
class LoadReport:
    sessions: int
    seconds: float
    logs: list[SessionLog]
    server_start_s: float
    idle_mb: float
    peak_mb: float
    closed_mb: float
    settled_mb: float
    settle_seconds: float
    server_errors: list[str]
    disconnect: dict | None = None

    @property
    def errors(self) -> list[str]:
        return [e for log in self.logs for e in log.errors] + self.server_errors

    @property
    def runs(self) -> int:
        return sum(len(log.checks) for log in self.logs)

    @property
    def cross_talk(self) -> int:
        return sum(check.cross_talk for log in self.logs for check in log.checks)

    @property
    def numbers_verified(self) -> int:
        return sum(check.numbers == "equal" for log in self.logs for check in log.checks)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return float(np.percentile(values, q))


def server_errors(log_text: str) -> list[str]:
    """Lines of the server log that say a page failed or a traceback escaped."""
    return [line for line in log_text.splitlines() if "page failed" in line or line.startswith("Traceback")]


def run_load(
    sessions: int = 30,
    seconds: float = 60,
    settle_seconds: float = 60,
    max_reruns: int = 40,
    think: tuple[float, float] = (1.0, 3.0),
    disconnect_check: bool = True,
    progress=print,
    root: Path = ROOT,
    env: Mapping[str, str] | None = None,
) -> LoadReport:
    """Start a server, run the sessions concurrently, close them, watch memory settle; stop the server.

    ``root`` and ``env`` run another checkout or another allocator setting.
    """
    with StreamlitServer(root=root, env=env) as server, RssSampler(server.pid) as sampler:
        progress(f"server up in {server.started_s:.1f} s on port {server.port}")
        time.sleep(2)
        idle = server.rss_mb()
        sampler.reset()
        logs = [SessionLog(k, urlencode(session_query(k))) for k in range(sessions)]
        start = threading.Barrier(sessions)
        began = time.monotonic()
        deadline = began + seconds
        threads = [
            threading.Thread(
                target=drive_session, args=(k, server.port, deadline, max_reruns, think, start, logs[k]), daemon=True
            )
            for k in range(sessions)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(1.0, deadline - time.monotonic()) + 240)
        elapsed = time.monotonic() - began
        peak = sampler.peak_mb
        closed = server.rss_mb()
        progress(f"{sessions} sessions done in {elapsed:.0f} s; peak {peak:.0f} MB; settling {settle_seconds:.0f} s")
        settle_end = time.monotonic() + settle_seconds
        while time.monotonic() < settle_end:
            time.sleep(min(1.0, max(0.0, settle_end - time.monotonic())))
        settled = server.rss_mb()
        disconnect = disconnect_mid_run(server) if disconnect_check else None
        return LoadReport(
            sessions,
            elapsed,
            logs,
            server.started_s,
            idle,
            peak,
            closed,
            settled,
            settle_seconds,
            server_errors(server.log_text()),
            disconnect,
        )


def metrics(url: str) -> dict[str, float]:
    """The server's /_stcore/metrics as {"name{labels}": value} (active_sessions, session_events_total, ...)."""
    found = {}
    with urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                found[name] = float(value)
    return found


def big_query() -> dict[str, str]:
    """16 heads × 512 tokens (4 × 16 MiB attention matrices), with a seed nobody else uses: the cache can't answer."""
    return {
        "num_heads": "16",
        "d_out": "256",
        "num_tokens": "512",
        "batch_size": "1",
        "input": "random",
        "d_in": "16",
        "seed": str(random.randrange(10**6, 10**7)),
    }


def hang_up_mid_run(port: int, query: Mapping[str, str], linger: float = 0.2) -> None:
    """Open a session, start its run, and close the socket once the script is drawing (before its big compute)."""
    session = Session(port, urlencode(query), timeout=60).connect()
    session.send_rerun()
    assert session.ws is not None
    for _ in range(200):  # the sidebar's deltas arrive before the module runs
        message = ForwardMsg()
        message.ParseFromString(session.ws.recv())
        if message.WhichOneof("type") == "delta":
            break
    time.sleep(linger)
    session.close()


def disconnect_mid_run(server: StreamlitServer, repeats: int = 1, settle_seconds: float = 5) -> dict:
    """Hang up mid-run `repeats` times, then check memory, the session count, and that others are still served.

    A leak grows with every hang-up; memory the allocator keeps for reuse does not. So RSS is read after each one.
    """
    before = server.rss_mb()
    after_each = []
    with RssSampler(server.pid, interval=0.02) as sampler:
        for _ in range(repeats):
            hang_up_mid_run(server.port, big_query())
            time.sleep(settle_seconds)
            after_each.append(server.rss_mb())
        peak = sampler.peak_mb
    counts = metrics(server.url)
    query = urlencode(session_query(0))
    with Session(server.port, query) as other:
        result = other.run()
    check = check_run(result, settings_from_query(query))
    return {
        "rss_before_mb": before,
        "peak_mb": peak,
        "rss_after_mb": after_each[-1],
        "rss_after_each_mb": after_each,
        "active_sessions_after": counts.get("active_sessions", float("nan")),
        "other_session_ok": result.ok,
        "other_session_errors": result.errors,
        "other_session_cross_talk": check.cross_talk,
        "server_alive": server.process is not None and server.process.poll() is None,
    }


CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def wait_for_charts(page, timeout: float) -> None:
    """Until the script has finished and every plotly chart has drawn its SVG."""
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout * 1000)
    page.wait_for_function(
        "() => { const charts = document.querySelectorAll(\"[data-testid='stPlotlyChart']\");"
        " return charts.length > 0 && [...charts].every(c => c.querySelector('svg.main-svg')); }",
        timeout=timeout * 1000,
    )


def cold_start(query: str = "", timeout: float = 180) -> dict[str, float]:
    """Seconds from the server process's start to the first page fully rendered in headless Chromium.

    The browser is started first (a student's browser is already open). "Fully rendered": the script has
    finished (``data-test-script-state="notRunning"``) and every plotly chart on the page has drawn its SVG.
    """
    import shutil

    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as playwright:
        browser = (
            playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
            if executable
            else playwright.chromium.launch(args=CHROMIUM_FLAGS)
        )
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        begin = time.monotonic()
        with StreamlitServer(start_timeout=timeout) as server:
            healthy = time.monotonic() - begin
            page.goto(f"{server.url}/?{query}", timeout=timeout * 1000)
            wait_for_charts(page, timeout)
            rendered = time.monotonic() - begin
            charts = page.locator("[data-testid='stPlotlyChart']").count()
            page.goto(f"{server.url}/?{query}", timeout=timeout * 1000)  # a second student: modules imported
            second_begin = time.monotonic()
            wait_for_charts(page, timeout)
            second = time.monotonic() - second_begin
        browser.close()
    return {"healthy_s": healthy, "first_page_s": rendered, "charts": charts, "warm_page_s": second}


def markdown_report(report: LoadReport) -> str:
    firsts = [log.first for log in report.logs if log.first is not None]
    reruns = [s for log in report.logs for s in log.reruns]
    rows = [
        ("sessions (concurrent, each its own URL)", f"{report.sessions}"),
        ("duration", f"{report.seconds:.0f} s"),
        ("script runs (first loads + widget changes)", f"{report.runs} ({len(firsts)} + {len(reruns)})"),
        ("errors (exceptions, st.error, failed runs, server log)", f"{len(report.errors)}"),
        ("cross-talk (runs showing another session's URL, shape or numbers)", f"{report.cross_talk}"),
        ("runs whose output numbers were checked against mha_core", f"{report.numbers_verified}"),
        ("first-load latency p50 / p95", f"{percentile(firsts, 50):.2f} s / {percentile(firsts, 95):.2f} s"),
        ("rerun latency p50 / p95", f"{percentile(reruns, 50):.2f} s / {percentile(reruns, 95):.2f} s"),
        ("server start (process → healthy)", f"{report.server_start_s:.1f} s"),
        ("server RSS idle", f"{report.idle_mb:.0f} MB"),
        ("server peak RSS (VmHWM, children included)", f"{report.peak_mb:.0f} MB"),
        ("server RSS when all sessions had closed", f"{report.closed_mb:.0f} MB"),
        (f"server RSS {report.settle_seconds:.0f} s later", f"{report.settled_mb:.0f} MB"),
    ]
    if report.disconnect:
        d = report.disconnect
        rows.append(
            (
                "hang-up mid-run (16 heads × 512 tokens): RSS before / peak / after",
                f"{d['rss_before_mb']:.0f} / {d['peak_mb']:.0f} / {d['rss_after_mb']:.0f} MB",
            )
        )
        rows.append(("sessions still active after the hang-up", f"{d['active_sessions_after']:.0f}"))
        rows.append(
            (
                "after the hang-up, another session is served correctly",
                "yes" if d["other_session_ok"] and not d["other_session_cross_talk"] else "NO",
            )
        )
    lines = ["| measure | value |", "| --- | --- |"] + [f"| {name} | {value} |" for name, value in rows]
    if report.errors:
        lines += ["", "Errors (first 10):", ""] + [f"- {e}" for e in report.errors[:10]]
    details = [d for log in report.logs for d in log.cross_talk]
    if details:
        lines += ["", "Cross-talk (first 10):", ""] + [f"- {d}" for d in details[:10]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60, help="how long the sessions keep moving widgets")
    parser.add_argument("--settle-seconds", type=float, default=60, help="wait after closing before the last RSS")
    parser.add_argument("--max-reruns", type=int, default=40, help="widget changes per session, at most")
    parser.add_argument(
        "--think",
        type=float,
        nargs=2,
        default=(1.0, 3.0),
        metavar=("MIN", "MAX"),
        help="seconds a student waits between two widget changes",
    )
    parser.add_argument("--no-disconnect-check", action="store_true")
    parser.add_argument(
        "--cold-start",
        action="store_true",
        help="only measure the cold start (server process → first page rendered in Chromium)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 200 or not 0 < args.seconds <= 1800 or not 0 <= args.settle_seconds <= 600:
        parser.error("sessions 1–200, seconds 0–1800, settle-seconds 0–600")
    progress = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    if args.cold_start:
        found = cold_start()
        print(
            "| cold start | seconds |\n| --- | --- |\n"
            f"| server process → healthy | {found['healthy_s']:.1f} |\n"
            f"| server process → first page fully rendered ({found['charts']} charts) | "
            f"{found['first_page_s']:.1f} |\n"
            f"| the next visitor's page, fully rendered | {found['warm_page_s']:.1f} |"
        )
        return 0
    report = run_load(
        args.sessions,
        args.seconds,
        args.settle_seconds,
        args.max_reruns,
        tuple(args.think),
        not args.no_disconnect_check,
        progress=progress,
    )
    print(
        f"### Load test: {args.sessions} sessions, {args.seconds:.0f} s, 2 CPU cores shared with the "
        "server and the clients\n"
    )
    print(markdown_report(report))
    return 0 if not report.errors and not report.cross_talk else 1


if __name__ == "__main__":
    sys.exit(main())
