"""A browser tab reduced to its websocket, speaking Streamlit's own protocol, as the browser does.

It connects to ``ws://127.0.0.1:PORT/_stcore/stream`` (subprotocol "streamlit"), sends a ``BackMsg.rerun_script``
with its query string and widget states, and reads ``ForwardMsg``s until ``script_finished``. That costs a few
milliseconds of client CPU per rerun, so 30 sessions fit on 2 cores beside the server (30 browsers would not).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode

import websocket
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from explorer.glue.frame.chart import ELEMENT, figure_of
from harness.server import HOST


@dataclass
class RunResult:
    """What one script run sent to this session."""

    seconds: float = 0.0
    status: str = ""  # a ForwardMsg.ScriptFinishedStatus name, or "timeout" / "disconnected"
    texts: list[str] = field(default_factory=list)  # markdown, captions, headings, alerts, code
    errors: list[str] = field(default_factory=list)  # exception elements and st.error alerts
    warnings: list[str] = field(default_factory=list)
    charts: dict[str, dict] = field(default_factory=dict)  # widget key ("chart_output") -> figure
    widget_ids: dict[str, str] = field(default_factory=dict)  # user key ("w_seed") -> element id
    downloads: dict[str, str] = field(default_factory=dict)  # a download button's label -> its deferred file id
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

    def __init__(self, port: int, query_string: str = "", timeout: float = 180, page: str = "", headers=()):
        self.port, self.query_string, self.timeout = port, query_string, timeout
        self.page = page  # a page's URL name ("Step_through"); "" is app.py
        self.headers = list(headers)  # extra HTTP headers of the websocket's upgrade request (X-Forwarded-For)
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
            header=self.headers or None,
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
        message.rerun_script.page_name = self.page
        message.rerun_script.widget_states.widgets.extend(widgets)
        assert self.ws is not None
        self.ws.send_binary(message.SerializeToString())

    def send_clear_cache(self) -> None:
        """What the ⋮ menu's "Clear cache" sends (any client can send it, whatever the toolbar shows)."""
        message = BackMsg()
        message.clear_cache = True
        assert self.ws is not None
        self.ws.send_binary(message.SerializeToString())

    def download(self, file_id: str, times: int = 1) -> list[str]:
        """Ask for a download button's file ``times`` at once, as its click does (a backend operation); the URLs
        (or "error: ...") the server answers, in order."""
        assert self.ws is not None
        for k in range(times):
            message = BackMsg()
            message.backend_operation_request.request_id = f"download-{k}"
            message.backend_operation_request.session_id = self.session_id
            message.backend_operation_request.deferred_file.file_id = file_id
            self.ws.send_binary(message.SerializeToString())
        answers: dict[str, str] = {}
        deadline = time.monotonic() + self.timeout
        while len(answers) < times and time.monotonic() < deadline:
            data = self.ws.recv()
            if not isinstance(data, bytes):
                continue
            message = ForwardMsg()
            message.ParseFromString(data)
            if message.WhichOneof("type") == "backend_operation_response":
                response = message.backend_operation_response
                answers[response.request_id] = response.deferred_file.url or f"error: {response.error_msg}"
        return [answers.get(f"download-{k}", "timeout") for k in range(times)]

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
        elif kind == "download_button" and inner.deferred_file_id:
            result.downloads[inner.label] = inner.deferred_file_id
        elif kind == ELEMENT and _user_key(element_id) in keep:
            result.charts[_user_key(element_id)] = figure_of(inner)


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
