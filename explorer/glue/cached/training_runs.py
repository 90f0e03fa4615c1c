"""Streamlit glue for training: finished runs shared by every session, one running job per session.

* Finished runs live in a small LRU keyed by ``TrainConfig`` (hashable, so no arrays are hashed),
  held by ``st.cache_resource`` and shared by every session. A run stopped early is never stored
  there: a revisit of its config would get a half-trained model. It stays in this session only.
* A run started from the page trains in a background thread (``TrainingJob``). Streamlit reruns the
  script on every click, which interrupts whatever the script is doing; the thread is not
  interrupted, so the next run attaches to the same job. The Stop button's callback sets the job's
  stop flag, which ``mha_core.toy.tiny_training.run`` polls before every step.
* ``trained_explorer_input(spec)`` is what the explorer needs for ``?trained=<spec>``: the trained
  layer's real module and its input. It is shared by every session: never mutate the module.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

import streamlit as st
import torch

from explorer.glue.memory import admission
from explorer.glue.state import settings as cfg
from explorer.glue.state import trained_link, url
from mha_core.toy import tiny_training as training
from mha_core.toy.tiny_training import ExplorerInput, TrainConfig, TrainResult, make_config

MAX_RESULTS = 16  # finished runs kept for all sessions together; a default run's state dict is ~20 KB
_JOB_KEY = "_trained_job"  # session_state: the running (or just finished) TrainingJob
_LAST_KEY = "_trained_last"  # session_state: this session's latest finished result (survives LRU eviction)
_PARTIAL_KEY = "_trained_partial"  # session_state: this session's latest stopped result
_ERROR_KEY = "_trained_error"  # session_state: (config, message) of a run that raised


class ResultStore:
    """A thread-safe LRU of finished results keyed by config. Results are shared: never mutate one."""

    def __init__(self, max_entries: int = MAX_RESULTS):
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._items: OrderedDict[TrainConfig, TrainResult] = OrderedDict()

    def get(self, config: TrainConfig) -> TrainResult | None:
        with self._lock:
            result = self._items.get(config)
            if result is not None:
                self._items.move_to_end(config)
            return result

    def put(self, result: TrainResult) -> None:
        if result.stopped_early:
            raise ValueError("a run stopped early is not a finished result for its config")
        with self._lock:
            self._items[result.config] = result
            self._items.move_to_end(result.config)
            while len(self._items) > self._max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


@st.cache_resource(show_spinner=False)
def result_store() -> ResultStore:
    """The one store of finished results, shared by every session."""
    return ResultStore()


def train_config(task: str, shape: dict[str, int], device: str) -> TrainConfig:
    """The Trained heads page's run request on ``device``; on cpu, with a notice, where that device cannot train it."""
    try:
        return make_config(task, **shape, device=device)
    except ValueError as error:
        url.notice(f"Training on cpu instead of {device}: {error}")
        return make_config(task, **shape, device="cpu")


def finished_result(config: TrainConfig) -> TrainResult | None:
    """A finished run of this config if one is stored; never trains."""
    return result_store().get(config)


def train_and_store(config: TrainConfig, *, progress=None, should_stop=None, store: ResultStore | None = None):
    """Train now, within the time budget; store the result for every session only if it ran to the end."""
    result = training.run(
        config, progress=progress, should_stop=should_stop, time_budget_s=admission.TRAIN_TIME_BUDGET_S
    )
    if not result.stopped_early:
        (store if store is not None else result_store()).put(result)
    return result


def cached_result(config: TrainConfig) -> TrainResult:
    """The finished run of this config: from the store, or trained now (blocking) and stored."""
    return finished_result(config) or train_and_store(config)


@st.cache_resource(max_entries=8, show_spinner="Training the model for this link…")
def _explorer_input(config: TrainConfig, layer: int) -> ExplorerInput:
    return training.explorer_module(cached_result(config), layer)


def trained_explorer_input(spec: str) -> ExplorerInput:
    """The trained layer a ``?trained=<spec>`` link names: its module, input (1, T, d_model) and labels.

    Raises ValueError (from ``parse_trained_spec``) when the spec is bad. The config is clamped to what the
    Trained heads page offers (``settings.clamp_trained``), so a link costs no more than the page. If no
    finished run is stored, it trains through the admission gate, within the time budget, and stops when
    the session ends (``admission.SessionEndedError``). Shared by every session: never mutate the result.
    """
    config, layer = trained_link.parse_trained_spec(spec)
    config, layer, _ = cfg.clamp_trained(config, layer)
    if finished_result(config) is None:
        ended = admission.session_ended()
        with admission.admit(f"training {config.task} for a link", should_stop=ended):
            if finished_result(config) is None:  # another session may have trained it while this one waited
                result = train_and_store(config, should_stop=ended)
                if result.stopped_early and ended():
                    raise admission.SessionEndedError(f"training {config.task} for a link")
                if result.stopped_early:
                    raise admission.ServerBusyError(
                        f"Training this link's model stopped at step {result.steps_run} of {config.steps}: "
                        f"over the {admission.TRAIN_TIME_BUDGET_S:.0f} s budget on a busy server."
                    )
    return _explorer_input(config, layer)


# --- a training run in the background of one session ------------------------------------------------------------------


class TrainingJob:
    """One training run in a daemon thread: progress is recorded for the page to poll, stop is a flag."""

    def __init__(self, config: TrainConfig, store: ResultStore, session_ended=None, visitor=None):
        self.config = config
        self._visitor = visitor  # (session, client) for the gate's fair turns, read in the script thread
        self._store = store  # resolved in the script thread: no Streamlit calls from the worker
        self._stop = threading.Event()
        self._should_stop = admission.either(self._stop.is_set, session_ended)  # Stop pressed, or the tab closed
        self._lock = threading.Lock()
        self._steps: list[int] = []
        self._loss: list[float] = []
        self._accuracy: list[float] = []
        self.result: TrainResult | None = None
        self.error: str | None = None
        self._thread = threading.Thread(target=self._work, name=f"train-{config.task}", daemon=True)

    def start(self) -> TrainingJob:
        _LIVE_JOBS.add(self)
        self._thread.start()
        return self

    def _progress(self, step: int, total: int, loss: float, accuracy: float) -> None:
        with self._lock:
            self._steps.append(step)
            self._loss.append(loss)
            self._accuracy.append(accuracy)

    def _work(self) -> None:
        try:
            label = f"training {self.config.task}"
            with admission.admit(label, heavy=True, should_stop=self._should_stop, visitor=self._visitor):
                self.result = train_and_store(
                    self.config, progress=self._progress, should_stop=self._should_stop, store=self._store
                )
        except admission.SessionEndedError:
            self.error = "the session ended"
        except torch.OutOfMemoryError:
            self.error = "the device ran out of memory; choose fewer heads or steps, or the cpu device"
        except Exception as error:  # shown on the page, not lost in a thread
            self.error = f"{type(error).__name__}: {error}"

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to timeout seconds; True when the run has ended."""
        self._thread.join(timeout)
        return not self.running

    def history(self) -> tuple[list[int], list[float], list[float]]:
        """Copies of (steps, loss, accuracy) logged so far."""
        with self._lock:
            return list(self._steps), list(self._loss), list(self._accuracy)


_LIVE_JOBS: weakref.WeakSet[TrainingJob] = weakref.WeakSet()


@atexit.register
def _stop_live_jobs() -> None:
    """At interpreter exit, end running jobs cleanly: torch dies badly when a daemon thread is cut off mid-step."""
    for job in list(_LIVE_JOBS):
        job.stop()
        job.wait(10)


def current_job() -> TrainingJob | None:
    return st.session_state.get(_JOB_KEY)


def start_job(config: TrainConfig) -> TrainingJob:
    """Start training this config in the background, unless this session is already training."""
    job = current_job()
    if job is None:
        visitor = admission.current_visitor()
        if visitor is not None:  # its own place: a page's run asked for meanwhile in this tab does not replace it
            visitor = (f"{visitor[0]}/training", visitor[1])
        job = TrainingJob(config, result_store(), admission.session_ended(), visitor)
        st.session_state[_JOB_KEY] = job.start()
    return job


def request_stop() -> None:
    """The Stop button's on_click: it runs at the start of the rerun the click causes."""
    job = current_job()
    if job is not None:
        job.stop()


def follow(job: TrainingJob, show: Callable[[TrainingJob], None], *, interval: float = 0.25) -> None:
    """Call show(job) every interval seconds until the job ends, then once more.

    show draws with Streamlit; a click on the page interrupts it there, and the rerun follows the
    same job again, so nothing is lost.
    """
    while not job.wait(interval):
        show(job)
    show(job)


def collect(job: TrainingJob) -> None:
    """File an ended job's outcome in this session and forget the job."""
    state = st.session_state
    if job.error is not None:
        state[_ERROR_KEY] = (job.config, job.error)
    elif job.result is not None and job.result.stopped_early:
        state[_PARTIAL_KEY] = job.result
    elif job.result is not None:
        state[_LAST_KEY] = job.result
        state.pop(_ERROR_KEY, None)
    if state.get(_JOB_KEY) is job:
        del state[_JOB_KEY]


def result_for(config: TrainConfig) -> TrainResult | None:
    """What this session can show for a config: a finished run (its own or any session's), else its stopped run."""
    state = st.session_state
    last = state.get(_LAST_KEY)
    if last is not None and last.config == config:
        return last
    finished = finished_result(config)
    if finished is not None:
        return finished
    partial = state.get(_PARTIAL_KEY)
    if partial is not None and partial.config == config:
        return partial
    return None


def trained_here(result: TrainResult) -> bool:
    """True when this session's own last finished training made ``result`` (not another session's, kept)."""
    return st.session_state.get(_LAST_KEY) is result


def error_for(config: TrainConfig) -> str | None:
    """The message of this session's last failed run of this config, if that is the latest news for it."""
    entry = st.session_state.get(_ERROR_KEY)
    return entry[1] if entry is not None and entry[0] == config else None


# --- the trained view: its inspection is computed once, its figures once per presentation ---------------------------


def _result_key(result: TrainResult) -> tuple:
    """What tells two results apart (a stopped run shares its config with the full one)."""
    return result.config, result.steps_run, result.stopped_early, result.seconds


@st.cache_resource(max_entries=16, ttl=1800, show_spinner=False)
def _inspection(key: tuple, _result: TrainResult):
    return _result.inspect()


@st.cache_resource(max_entries=32, ttl=1800, show_spinner=False)
def _trained_view(key: tuple, presenter: bool, _result: TrainResult):
    from explorer.views.trained_heads import build_trained_view  # pandas: +66 MB, 1.5 s (measured), this page only

    return build_trained_view(_result, _inspection(key, _result), presenter=presenter)


def clear_views() -> None:
    """Forget every cached inspection and view (a benchmark's cold run)."""
    _trained_view.clear()
    _inspection.clear()


def trained_view(result: TrainResult, presenter: bool):
    """The trained heads page's view of a result, built once per presentation and shared (never mutate it)."""
    return _trained_view(_result_key(result), presenter, result)
