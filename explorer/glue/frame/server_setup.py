"""Process-wide settings for the app server, made once at start-up, before any session runs.

Six of them, all because a Streamlit server is one process whose sessions are threads sharing one interpreter:

1. torch's thread pools (below).
2. The start-up heap is frozen out of the garbage collector. Streamlit runs a full ``gc.collect()`` after every
   script run (``runner.postScriptGC``); with torch, plotly and Streamlit imported that walks about 220,000
   long-lived objects, 100 ms holding the GIL every session needs. It was 43% of the server's CPU under the class
   load test. ``gc.freeze()`` after the imports moves those objects to a generation the collector never scans, so
   the collection after a rerun only looks at what the rerun made (well under 1 ms). The frozen objects are modules,
   classes and functions that live as long as the process anyway.
3. plotly's JSON engine is ``json``, never ``orjson`` (explorer.glue.frame.chart names it; this is the default for any
   other caller of ``plotly.io.to_json``). The default engine ("auto") takes orjson whenever it happens to be
   installed (it is not a requirement; this project's machines have orjson 3.8.3). Our heatmaps' ``customdata`` is an
   object array, which orjson refuses; plotly then cleans the figure and tries again, and orjson 3.8.3's failed first
   try leaks its references: the figure's arrays are never freed. Measured outside Streamlit (8 heads × 64 tokens,
   both sections serialised; bench/engine_leak.py): 0.5 MB of the heap stays allocated per run after ``gc.collect``
   (100 runs: 88.6 → 140.1 MB); with ``json`` it stays flat (87.9 → 88.1 MB), and each figure serialises in 3 ms
   instead of 12 (the failed try costs more than it saves). In a server that leak was most of what idle RSS kept
   after a class.
4. A browser's ``clear_cache`` message is refused (``refuse_browser_cache_clear``), and widget states of the wrong
   kind are dropped before Streamlit parses them, and the others are put inside their widget's choices and range
   by the settings' strict parsers, with a notice (``refuse_mistyped_widget_states``, ``widget_guard``); a value
   sent before its widget was drawn (a new tab's first message) once the page declares it (``check_when_declared``).
5. The plotly.js that the charts load, and the deploy guide a notice links, are copied into the app's static folder
   (``chart.serve_plotly_js``, ``chart.serve_doc``).
6. A download made on a click leaves Streamlit's media storage once it is sent (``release_sent_downloads``), and one
   the app refused says why under its button (``say_why_a_download_failed``).

A Streamlit server is one Python process whose sessions are threads, on at most 2 CPUs here and on Community Cloud.
torch's thread pools belong to the process, so no session may change them (a session that did would change them
for everyone running at that moment). They are set here, once: one intra-op thread per op, because concurrent
sessions already keep both CPUs busy (torch releases the GIL inside its ops), and OpenMP threads of different
sessions spinning against each other on 2 CPUs cost far more than they win. Measured on this project's 2-core
machine, a traced forward at 8 heads × 512 tokens is no faster on 2 threads (61 vs 68 ms).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import os
import threading

import plotly.io
import torch
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.backend_operation_handler import DeferredFileHandler
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.runtime.state.session_state import SessionState

from explorer.glue.frame import chart
from explorer.glue.memory import admission, downloads
from explorer.glue.state import url, widget_guard

log = logging.getLogger("mha_explorer")
INTRA_OP_THREADS = 1
INTER_OP_THREADS = 1

_done = threading.Lock()
_configured = False


def configure_process() -> None:
    """Set torch's thread pools and plotly's JSON engine, serve plotly.js, and freeze the start-up heap; later calls
    do nothing."""
    global _configured
    with _done:
        if _configured:
            return
        torch.set_num_threads(INTRA_OP_THREADS)
        # Once inter-op work has run in the process (a test run), the pool can no longer change: it stays.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(INTER_OP_THREADS)
        _import_what_every_page_uses()
        _plotly_json_engine()
        try:
            chart.serve_plotly_js()
        except OSError:  # a read-only app folder: the image or the deploy should have put it there
            log.exception("cannot put plotly.js in the app's static folder: charts will say they cannot draw")
        try:
            chart.serve_doc("deploy.md")  # GPT-2's notice links it (real_models.DEPLOY_DOC)
        except OSError:
            log.warning("cannot put docs/deploy.md in the app's static folder: GPT-2's notice links a missing page")
        refuse_browser_cache_clear()
        refuse_mistyped_widget_states()
        release_sent_downloads()
        gc.collect()
        gc.freeze()
        _configured = True


def refuse_browser_cache_clear() -> None:
    """A browser's ``clear_cache`` message does nothing: any viewer could send it over the websocket (the toolbar
    setting only hides the menu item) and empty every shared cache, the finished trainings included, for the whole
    class. The app clears its caches itself, on the server (``idle.clear_caches``)."""
    if getattr(AppSession._handle_clear_cache_request, "refused", False):
        return

    def refused(self) -> None:
        log.warning("refused a clear_cache message from a browser (session %s)", getattr(self, "id", "?"))

    refused.refused = True
    AppSession._handle_clear_cache_request = refused


MISTYPED_NOTICE = "A control sent a value of the wrong kind ({keys}); it was ignored and your settings are kept."


# What a browser may send for a widget registered with each value type: a number_input registers double_value but
# Chromium sends int_value for an integer one (the seed); Streamlit reads whichever field is set.
_NUMBERS, _NUMBER_ARRAYS = {"int_value", "double_value"}, {"int_array_value", "double_array_value"}
SENT_KINDS = {"int_value": _NUMBERS, "double_value": _NUMBERS}
SENT_KINDS |= {"int_array_value": _NUMBER_ARRAYS, "double_array_value": _NUMBER_ARRAYS}


def well_typed(states, metadata) -> tuple[object, list[str]]:
    """(the widget states whose value is of the kind their widget takes, the user keys of those that were not).

    A browser sends each widget's value in the proto field its widget registered (``value_type``); a hand-made
    message can send any (``w_seed`` as a string), which Streamlit would hand to the widget's deserializer while it
    parses the states, before the page runs, where no page boundary catches what it raises.
    """
    kept, dropped = WidgetStates(), []
    for state in states.widgets:
        registered = metadata.get(state.id)
        kind = state.WhichOneof("value")
        allowed = SENT_KINDS.get(registered.value_type, {registered.value_type}) if registered is not None else set()
        if registered is not None and kind is not None and kind not in allowed:
            dropped.append(state.id.rsplit("-", 1)[-1])
            continue
        kept.widgets.append(state)
    return kept, dropped


def refuse_mistyped_widget_states() -> None:
    """Widget states of the wrong kind are dropped before Streamlit parses them, with a notice on the page."""
    original = SessionState.on_script_will_rerun
    if getattr(original, "refused", False):
        return

    def on_script_will_rerun(self, fresh_widget_states=None, **kwargs):
        url.forget_notice_box()  # a new run: its notices are not drawn yet
        if fresh_widget_states is not None:
            metadata = self._new_widget_state.widget_metadata
            fresh_widget_states, dropped = well_typed(fresh_widget_states, metadata)
            messages = [MISTYPED_NOTICE.format(keys=", ".join(dropped))] if dropped else []
            messages += widget_guard.check_states(fresh_widget_states, metadata)  # choices and ranges, as URLs
            _say(self, messages)
        return original(self, fresh_widget_states, **kwargs)

    on_script_will_rerun.refused = True
    SessionState.on_script_will_rerun = on_script_will_rerun
    check_when_declared()


def _say(session_state, messages: list[str]) -> None:
    """Queue corrections for the page's notices, or draw them there when the page has drawn its notices already."""
    if not messages:
        return
    log.warning("corrected widget states: %s", messages)
    if url.notice_late(messages):
        return
    with contextlib.suppress(Exception):
        notices = list(session_state._new_session_state.get("page_notices", []))
        session_state._new_session_state["page_notices"] = [*notices, *messages]


def check_when_declared() -> None:
    """A value the browser sent before its widget was ever drawn in the session (a new tab's first message) is
    checked when the page's code first declares that widget (its kind, range and choices, as the code states them),
    before Streamlit reads it: a forged first message gets the same corrections and notices as any later one."""
    original = SessionState.register_widget
    if getattr(original, "checks", False):
        return

    def register_widget(self, metadata, user_key):
        if metadata.id not in self._new_widget_state.widget_metadata:  # first declared in this session: unchecked
            _check_declared(self, metadata)
        return original(self, metadata, user_key)

    register_widget.checks = True
    SessionState.register_widget = register_widget


def _check_declared(session_state, metadata) -> None:
    stored = session_state._new_widget_state.states.get(metadata.id)
    state = getattr(stored, "value", None)
    if not isinstance(state, WidgetState):  # already read (deserialized) or gone: nothing from the browser
        return
    _, dropped = well_typed(type("One", (), {"widgets": [state]})(), {metadata.id: metadata})
    if dropped:
        del session_state._new_widget_state.states[metadata.id]
        _say(session_state, [MISTYPED_NOTICE.format(keys=", ".join(dropped))])
        return
    _say(session_state, widget_guard.check_one(state, metadata))


_IN_GET_URL = threading.local()


def release_sent_downloads() -> None:
    """A made download (``downloads``) leaves Streamlit's media storage as soon as its request is answered, and stops
    counting in the caches' bytes then, or when Streamlit drops it unfetched (its tab closed)."""
    if getattr(MemoryMediaFileStorage.get_file, "releases", False):
        return
    get_file, get_url, delete_file = (
        MemoryMediaFileStorage.get_file,
        MemoryMediaFileStorage.get_url,
        MemoryMediaFileStorage.delete_file,
    )

    def url_of(self, file_id: str) -> str:  # reads the file to name its extension: that is not a request
        _IN_GET_URL.active = True
        try:
            return get_url(self, file_id)
        finally:
            _IN_GET_URL.active = False

    def served(self, filename: str):
        file = get_file(self, filename)
        if not getattr(_IN_GET_URL, "active", False) and downloads.sent(file.content):
            delete_file(self, os.path.splitext(filename)[0])  # the response being sent holds the bytes until done
        return file

    def dropped(self, file_id: str) -> None:
        file = self._files_by_id.get(file_id)
        delete_file(self, file_id)
        if file is not None:
            downloads.HELD.release(file.content)

    served.releases = True
    MemoryMediaFileStorage.get_file, MemoryMediaFileStorage.get_url = served, url_of
    MemoryMediaFileStorage.delete_file = dropped
    say_why_a_download_failed()


def say_why_a_download_failed() -> None:
    """A download the app refused (too many bytes of downloads held, the queue full, over the budget) says why under
    its button, in the app's words. Streamlit answers any failed file with its own "Failed to generate file for
    download" (the button shows that text); the reason was only in the server log."""
    execute, handle = MediaFileManager.execute_deferred, DeferredFileHandler.handle
    if getattr(handle, "says_why", False):
        return

    def execute_deferred(self, file_id: str) -> str:
        try:
            return execute(self, file_id)
        except Exception as error:
            cause = error.__cause__ or error  # Streamlit wraps what the callable raised
            if isinstance(cause, (admission.ServerBusyError, admission.OverBudgetError)):
                downloads.refused(file_id, str(cause))
            raise

    async def handle_request(self, request, session_id: str):
        response = await handle(self, request, session_id)
        reason = downloads.refusal(request.deferred_file.file_id)
        if reason is not None and response.error_msg:
            response.error_msg = reason
        return response

    handle_request.says_why = True
    MediaFileManager.execute_deferred, DeferredFileHandler.handle = execute_deferred, handle_request


PLOTLY_JSON_ENGINE = "json"


def _plotly_json_engine() -> None:
    """Every figure a session sends is serialised with the standard library's json (see 3. above)."""
    plotly.io.json.config.default_engine = PLOTLY_JSON_ENGINE


EVERY_PAGE_USES = ("plotly.graph_objects", "explorer.views.attention_explorer", "explorer.views.figures")


def _import_what_every_page_uses() -> None:
    """The long-lived modules every page needs, imported before the freeze so that their objects are frozen too.

    Not pandas: only two pages use it, and it adds 64 MB to the server (measured), which the 690 MB budget needs.
    """
    for name in EVERY_PAGE_USES:
        importlib.import_module(name)


configure_torch = configure_process  # the name the tests and benches know
