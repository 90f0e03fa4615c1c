"""Real GPTs for every session: one instance of each per process, and their readings cached by (model, text).

* The shipped model (``mha_core.gpt.training.load_shipped``) and GPT-2 are each loaded once per process
  (``st.cache_resource``), switched to eval mode, and never mutated: every session reads the same tensors, and
  every computation runs under ``torch.no_grad`` and stores nothing on them.
* What a page draws is cached on (model name, text), never on tensors: ``text_reading``, ``head_probe``,
  ``explorer_input`` (a layer's ``att`` and its real input, for the explorer and Follow a token).
* GPT-2 (548 MB to fetch, 249 MB in memory as bfloat16) comes only from a Download button into a disk cache, one
  fetch at a time, without holding the heavy-job slot while the network answers; a link never starts a download.
  Offline, it says so, says when it tries again, and the shipped model serves.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import torch

from explorer.glue.memory import admission, budget
from explorer.glue.memory.byte_caches import byte_cached
from explorer.views import real_heads
from mha_core.gpt import model as gpt
from mha_core.gpt import model_heads

LABELS = {"own": "the shipped model", "gpt2": "GPT-2 (124M)"}
TOKEN_CAP = {"own": 128, "gpt2": 256}  # tokens of the sentence the explorer and Follow a token show
CAP_REASON = {
    "own": "all it reads",
    "gpt2": "GPT-2 reads 1,024, but 12 heads × 1,024² weights would not fit this server's memory",
}
DEFAULT_TEXT = "The for statement iterates over the items of a list."  # 51 bytes: its repeat fits in 128
PAGE_TOKEN_CAP = {"own": 128, "gpt2": 128}  # Real heads; 256 for the own model peaked 451 MB on a 450 MB morning
GPT2_FETCH_MB = 548
DOWNLOAD_BYTES = 16 * 2**20  # streamed to disk: a read buffer and a file handle
MB = 2**20


class ModelUnavailableError(Exception):
    """This model cannot serve here (not shipped in this build, not downloaded, or no internet)."""


@dataclass(frozen=True, kw_only=True)
class Facts:
    """A model's shape, enough to fit the settings without loading its weights."""

    label: str
    n_layers: int
    n_heads: int
    emb_dim: int
    context_length: int
    qkv_bias: bool
    vocab_size: int


# --- the shipped model ---------------------------------------------------------------------------------------------


@st.cache_resource(show_spinner="Loading the shipped model…")
def own_model():
    """(GPTModel in eval mode, its tokenizer), one per process; raises ModelUnavailableError when not in this build."""
    from mha_core.gpt import training as gpt_training  # safetensors and the training code (+4 MB): only when asked

    try:
        model, tokenizer = gpt_training.load_shipped()
    except FileNotFoundError as error:
        raise ModelUnavailableError(f"The shipped model's files are missing ({error}).") from None
    return model.eval().requires_grad_(False), tokenizer


def own_absent_reason() -> str:
    try:
        own_model()
    except ModelUnavailableError as error:
        return str(error)
    return ""


def shipped_record() -> dict:
    """The shipped model's record (recipe, losses, head scores), or {} when this build has none."""
    from mha_core.gpt import training as gpt_training  # as in own_model: only when asked

    with contextlib.suppress(FileNotFoundError, ValueError):
        return dict(gpt_training.load_record())
    folder = Path(gpt.__file__).parent / "shipped"
    for path in sorted(folder.glob("*.json")):
        if "tokenizer" not in path.name:
            with contextlib.suppress(OSError, ValueError):
                return json.loads(path.read_text())
    return {}


# --- GPT-2: on this server only after a Download click ------------------------------------------------------------


def _gpt2_api():
    """mha_core.gpt.download, or None in a build without it."""
    try:
        return importlib.import_module("mha_core.gpt.download")
    except ImportError:
        return None


# The fetch, for every session of the process: one at a time, its last failure remembered and retried with back-off.
_GPT2_STATE: dict = {"error": "", "failures": 0, "retry_at": 0.0, "fetching": False}
_FETCH = threading.Condition()
FETCH_TIMEOUT_S = 10.0  # the connection and every read; a network that does not answer fails in seconds
RETRY_FIRST_S, RETRY_MAX_S = 30.0, 1800.0  # after a failure: 30 s, then twice as long each time, at most 30 min


def forget_gpt2_failures() -> None:
    """No failure remembered (tests; a server whose network came back is retried by the back-off anyway)."""
    with _FETCH:
        _GPT2_STATE.update(error="", failures=0, retry_at=0.0)


def gpt2_retry_in() -> float:
    """Seconds until this server tries to fetch GPT-2 again after a failure; 0 when it may try now."""
    with _FETCH:
        return max(0.0, _GPT2_STATE["retry_at"] - time.monotonic()) if _GPT2_STATE["error"] else 0.0


DEPLOY_DOC = "app/static/deploy.md"  # docs/deploy.md, served beside plotly.js (chart.serve_doc)
# Where the server's memory was read (budget.server_memory's source), in a teacher's words.
_MEMORY_SOURCE = {"MHA_SERVER_MB": "set by MHA_SERVER_MB", "cgroup": "its container's memory limit"}


def _memory_source(source: str) -> str:
    said = next((words for key, words in _MEMORY_SOURCE.items() if key in source), "")
    return said or "assumed: Community Cloud's smallest app, as no memory limit was found"


def gpt2_no_room() -> str:
    """Why GPT-2 cannot stay in this server's memory beside a class's pages, or "" when it can, in plain words:
    what it needs, what the server has, and what to do (a link to the deploy guide).

    Loaded, GPT-2 stays (bfloat16, once per process), so it must fit beside a warm server, full caches and one
    heavy job: budget.resident_room(). On Community Cloud's smallest app (690 MB) it does not."""
    api = _gpt2_api()
    if api is None:
        return ""
    kept, room = api.gpt2_bytes(TOKEN_CAP["gpt2"]).kept, budget.resident_room()
    if kept <= room:
        return ""
    server, source = budget.server_memory()
    least = math.ceil((server - room + kept) / (10 * MB)) * 10  # MB, rounded up to tens: "about 900 MB"
    return (
        f"GPT-2 needs about {least} MB; this server has {server / MB:.0f} MB ({_memory_source(source)}). "
        f"To use GPT-2, run the app on a server with at least {least} MB: a larger Community Cloud app, or "
        f"`MHA_SERVER_MB` where the machine has the memory ([the deploy guide]({DEPLOY_DOC}), "
        "“The server's memory”)."
    )


def gpt2_ready() -> bool:
    """True when GPT-2 can serve without a download (both files in the disk cache) and fits in memory here."""
    api = _gpt2_api()
    return api is not None and not gpt2_no_room() and api.gpt2_cached()


def gpt2_offline() -> bool:
    """True when this server cannot have GPT-2 now: its last fetch failed and the retry is not due, it would not fit,
    or this build lacks it."""
    return _gpt2_api() is None or gpt2_retry_in() > 0 or bool(gpt2_no_room())


def gpt2_absent_reason() -> str:
    if gpt2_no_room():
        return gpt2_no_room()
    wait = gpt2_retry_in()
    if _gpt2_api() is None:
        return "GPT-2 cannot be fetched from this server: this build lacks its loader."
    if wait > 0:
        return (
            "GPT-2 cannot be fetched from this server: it cannot reach huggingface.co. It tries again in "
            f"{_duration(wait)} (failed {_GPT2_STATE['failures']} time{'s' if _GPT2_STATE['failures'] > 1 else ''})."
        )
    return f"GPT-2 is not on this server yet: the Real heads page downloads it ({GPT2_FETCH_MB} MB, once)."


def _duration(seconds: float) -> str:
    return f"{math.ceil(seconds)} s" if seconds < 90 else f"{math.ceil(seconds / 60)} min"


def download_gpt2(progress) -> bool:
    """Fetch GPT-2 into the disk cache; ``progress(done_bytes, total_bytes or None)``. True once it is there.

    The network is waited on outside the heavy-job slot (it streams to disk: a light job for the gate), one fetch
    at a time per process: a press while another visitor's fetch runs waits for that one and takes its result. A
    failure is remembered for every session and retried with back-off (``gpt2_retry_in``): a press before then tries
    nothing and returns False. SessionEndedError when the tab closes."""
    api = _gpt2_api()
    if api is None:
        return False
    ended = admission.session_ended()
    with _FETCH:
        while _GPT2_STATE["fetching"]:  # another visitor's fetch: its result is ours
            if ended():
                raise admission.SessionEndedError("waiting for GPT-2's download")
            _FETCH.wait(0.2)
            if not _GPT2_STATE["fetching"]:
                return api.gpt2_cached()
        if gpt2_retry_in() > 0:
            return False
        _GPT2_STATE["fetching"] = True
    try:
        with admission.admit("downloading GPT-2", need_bytes=DOWNLOAD_BYTES, should_stop=ended):  # light: no slot
            api.download_gpt2(progress=progress, should_stop=ended, timeout=FETCH_TIMEOUT_S)
    except api.GPT2Unavailable as error:
        _failed(str(error))
        return False
    except api.DownloadStoppedError:
        raise admission.SessionEndedError("downloading GPT-2") from None
    finally:
        with _FETCH:
            _GPT2_STATE["fetching"] = False
            _FETCH.notify_all()
    forget_gpt2_failures()
    return True


def _failed(error: str) -> None:
    """Remember a failed fetch: the next try waits RETRY_FIRST_S, twice as long after each further failure."""
    with _FETCH:
        failures = _GPT2_STATE["failures"] + 1
        wait = min(RETRY_FIRST_S * 2 ** (failures - 1), RETRY_MAX_S)
        _GPT2_STATE.update(error=error, failures=failures, retry_at=time.monotonic() + wait)


@st.cache_resource(show_spinner="Loading GPT-2 (249 MB)…")
def gpt2_model():
    """(GPT-2 with bfloat16 storage, eval mode, its tokenizer), loaded once per process from the disk cache."""
    if not gpt2_ready():
        raise ModelUnavailableError(gpt2_absent_reason())
    loading = _gpt2_api().gpt2_bytes().loading  # above what stays: gpt2_no_room() made room for that
    with admission.admit("loading GPT-2", need_bytes=loading):
        model, tokenizer = _gpt2_api().load_gpt2()
    return model.eval().requires_grad_(False), tokenizer


# --- any model --------------------------------------------------------------------------------------------------------


def model_and_tokenizer(name: str):
    return gpt2_model() if name == "gpt2" else own_model()


def facts(name: str) -> Facts | None:
    """The model's shape, or None when it cannot serve here (GPT-2 not on this server, no shipped model)."""
    if name == "gpt2" and not gpt2_ready():
        return None
    try:
        cfg = model_and_tokenizer(name)[0].cfg
    except ModelUnavailableError:
        return None
    return Facts(
        label=LABELS[name],
        n_layers=cfg["n_layers"],
        n_heads=cfg["n_heads"],
        emb_dim=cfg["emb_dim"],
        context_length=cfg["context_length"],
        qkv_bias=bool(cfg["qkv_bias"]),
        vocab_size=cfg["vocab_size"],
    )


def token_cap(name: str) -> int:
    """Tokens of the sentence the Explorer and Follow a token show: TOKEN_CAP, or fewer where the model reads
    fewer."""
    return min(TOKEN_CAP[name], model_and_tokenizer(name)[0].cfg["context_length"])


def page_cap(name: str) -> int:
    """Tokens of the sentence the Real heads page reads: PAGE_TOKEN_CAP, or fewer where the model reads fewer."""
    return min(PAGE_TOKEN_CAP[name], model_and_tokenizer(name)[0].cfg["context_length"])


def token_ids(name: str, text: str) -> list[int]:
    """The sentence's token ids for the model, all of them (callers cap)."""
    return model_and_tokenizer(name)[1].encode(text)


def gate(name: str):
    """GPT-2's runs take the admission gate with their bytes (float32 copies of its blocks, the logits, every layer's
    weights at the longest sentence it reads); the shipped model's runs are light (a few MB)."""
    if name != "gpt2":
        return contextlib.nullcontext()
    return admission.admit(f"{LABELS[name]} reading a sentence", need_bytes=gpt2_need())


def gpt2_need() -> int:
    """What one GPT-2 forward adds at its peak at the longest sentence it reads (float32 block copies included)."""
    sizes = _gpt2_api().gpt2_bytes(TOKEN_CAP["gpt2"])
    return max(sizes.forward, sizes.attention_weights)


# --- what pages draw, cached on (model, text) ------------------------------------------------------------------------


@byte_cached(16 * MB, max_entries=32, spinner="Reading the sentence…")  # counted in the caches' bytes (issue 43)
def _text_reading(name: str, text: str) -> model_heads.TextReading:
    model, tok = model_and_tokenizer(name)
    return model_heads.read_text(model, tok, token_ids(name, text)[: page_cap(name)])


def text_reading(name: str, text: str) -> model_heads.TextReading:
    """Every layer's weights on the sentence's first ``page_cap`` tokens, and the top 5 next tokens."""
    with gate(name):
        return _text_reading(name, text)


@st.cache_resource(max_entries=2, show_spinner="Probing every head on a repeated random sequence…")
def head_probe_in_gate(name: str) -> model_heads.HeadProbe:
    """The probe for a caller already inside ``gate(name)`` (the gate is not re-entrant); others use head_probe."""
    model, tok = model_and_tokenizer(name)
    return model_heads.probe_heads(model, tok, _probe(name))


PROBE_MIN_COUNT = 100  # a byte the shipped model read at least this often in its training text may be drawn


@st.cache_resource(show_spinner=False)
def trained_bytes() -> tuple[int, ...]:
    """The byte values of the shipped model's training text, each read at least PROBE_MIN_COUNT times: random
    tokens drawn from these are ones it knows (bytes it never read as text would measure something else)."""
    from mha_core.gpt import data  # the corpus (Python's documentation): only when asked

    return model_heads.corpus_bytes(data.corpus()[0], PROBE_MIN_COUNT)


def _probe(name: str) -> model_heads.Probe:
    """The shipped model's probe (its record's period, batch and seed), drawn from the bytes of its training text;
    else the default one."""
    recorded = shipped_record().get("probe") if name == "own" else None
    if not isinstance(recorded, dict):
        return model_heads.Probe()
    try:
        numbers = {key: int(recorded[key]) for key in ("period", "batch_size", "seed")}
    except (KeyError, TypeError, ValueError):
        return model_heads.Probe()
    return model_heads.Probe(**numbers, allowed=trained_bytes())


def probe_source(name: str) -> str:
    """Where the probe's random tokens come from, in words for the page."""
    if _probe(name).allowed:
        return f"the bytes of its training text, each read there at least {PROBE_MIN_COUNT} times"
    return "every id" if _probe(name).whole_vocabulary else "the ids past the single bytes"


def head_probe(name: str) -> model_heads.HeadProbe:
    """Each head's scores and the loss per position on the repeated random probe (one per model)."""
    with gate(name):
        return head_probe_in_gate(name)


@st.cache_resource(max_entries=2, ttl=1800, show_spinner=False)
def _layer_module(name: str, layer: int):
    """Block ``layer``'s att as it computes: the shipped model's own module, GPT-2's a float32 copy (9 MB, so few)."""
    return model_and_tokenizer(name)[0].attention_module(layer)


@byte_cached(16 * MB, max_entries=16, spinner="Running the model up to this layer…")
def _layer_input(name: str, text: str, layer: int, num_tokens: int):
    model, tok = model_and_tokenizer(name)
    ids = token_ids(name, text)[:num_tokens]
    batch = torch.tensor([ids], dtype=torch.int64)  # (1, T)
    return model.attention_input(batch, layer), tuple(tok.labels(ids))  # (1, T, emb), T labels


def explorer_input(name: str, text: str, layer: int, num_tokens: int):
    """(layer ``layer``'s att in float32 and eval mode, its real input (1, T, emb), token labels) for the explorer.

    The module is the model's own (a float32 copy for bfloat16 storage): shared by every session, never mutated."""
    with gate(name):
        x, labels = _layer_input(name, text, layer, num_tokens)
        return _layer_module(name, layer), x, list(labels)


@byte_cached(16 * MB, max_entries=16, spinner="Drawing every head…")
def _page_view(name: str, text: str, presenter: bool):
    vocab = facts(name).vocab_size
    reading = _text_reading(name, text)
    scores = model_heads.text_scores(reading.weights, reading.ids)
    return real_heads.build_view(
        reading, head_probe_in_gate(name), scores, label=LABELS[name], vocab_size=vocab, presenter=presenter
    )


def page_view(name: str, text: str, presenter: bool):
    """The Real heads page's panels for (model, text), built once per presentation and shared (never mutate it)."""
    with gate(name):
        return _page_view(name, text, presenter)
