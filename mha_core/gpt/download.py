"""OpenAI's GPT-2 (124M): fetched once from Hugging Face into a disk cache, then loaded in bfloat16.

The download streams to a temporary file in the cache folder and is renamed into place only when whole and
readable, so a cached file is always a good one; a visitor who leaves stops it (``should_stop``) without a trace.
Loading reads the safetensors file tensor by tensor (the 50257 × 768 embedding in row chunks) and casts each to
bfloat16 at once: the 498 MB float32 file is never wholly in memory, and the model keeps 249 MB.

torch, safetensors, tokenizers and the standard library only (no streamlit).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch
from safetensors import safe_open
from tokenizers import Tokenizer

from mha_core.gpt.model import GPT2_CONFIG, HEAD_ROWS, GPTModel, check_config
from mha_core.gpt.pretrained import build_gpt2, check_gpt2_shapes, normalise_keys
from mha_core.gpt.text_tokenizer import TextTokenizer

BASE_URL = "https://huggingface.co/openai-community/gpt2/resolve/main"
FILES = ("tokenizer.json", "model.safetensors")  # the small one first: the other response waits a second, not minutes
DIR_ENV = "MHA_GPT2_DIR"
CHUNK_BYTES = 1 << 20  # read and write 1 MiB at a time
ROW_CHUNK_ELEMENTS = 1 << 22  # cast at most 4M floats (16 MB in float32) at a time
STORAGE_DTYPE = torch.bfloat16
ALLOCATOR_SLACK = 24 << 20  # freed memory glibc keeps in its heap between steps (13-20 MB measured)
TOKENIZER_BYTES = 16 << 20  # a GPT-2-sized BPE (50257 tokens, 50000 merges): 15 MB kept, measured
TOKENIZER_PARSE_BYTES = 32 << 20  # and 27 MB more while its JSON is parsed

Progress = Callable[[int, int | None], None]  # (bytes done, total bytes or None when the server does not say)
ShouldStop = Callable[[], bool]

_download_lock = threading.Lock()  # one download per process: a second visitor waits, then finds it cached


class GPT2Unavailable(RuntimeError):  # noqa: N818 (the name the app and the brief use)
    """GPT-2 cannot be fetched from this machine; the message says why, in plain words."""


class DownloadStoppedError(RuntimeError):
    """``should_stop()`` said stop (the visitor left): nothing was written."""


def gpt2_dir(directory: str | Path | None = None) -> Path:
    """The cache folder: ``directory``, else $MHA_GPT2_DIR, else ~/.cache/mha-explorer/gpt2."""
    if directory is not None:
        return Path(directory)
    env = os.environ.get(DIR_ENV)
    return Path(env) if env else Path.home() / ".cache" / "mha-explorer" / "gpt2"


def gpt2_cached(directory: str | Path | None = None) -> bool:
    """Whether both files are on disk (only whole, checked files are ever renamed into place)."""
    folder = gpt2_dir(directory)
    return all((folder / name).is_file() for name in FILES)


def download_gpt2(
    directory: str | Path | None = None,
    *,
    base_url: str = BASE_URL,
    progress: Progress | None = None,
    should_stop: ShouldStop | None = None,
    timeout: float = 10.0,
) -> Path:
    """Fetch the files not yet cached; the cache folder. Raises GPT2Unavailable or DownloadStoppedError.

    ``progress(done, total)`` counts both files together (total None when a size is unknown); ``timeout`` bounds
    the connection and every read, so an offline machine answers in seconds.
    """
    folder = gpt2_dir(directory)
    stop = should_stop or (lambda: False)
    while not _download_lock.acquire(timeout=0.2):  # another session is downloading: wait, unless told to stop
        if stop():
            raise DownloadStoppedError("stopped while another download ran")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        wanted = [name for name in FILES if not (folder / name).is_file()]
        responses = [_open(f"{base_url.rstrip('/')}/{name}", timeout) for name in wanted]
        try:
            sizes = [_length(response) for response in responses]
            total = None if None in sizes else sum(sizes)
            done = 0
            for name, response in zip(wanted, responses, strict=True):
                done = _stream(response, folder / name, done, total, progress, stop)
        finally:
            for response in responses:
                response.close()
    finally:
        _download_lock.release()
    return folder


def _open(url: str, timeout: float):
    try:
        return urllib.request.urlopen(url, timeout=timeout)
    except urllib.error.HTTPError as error:  # reached the server, which refused (gone, rate limited, ...)
        raise GPT2Unavailable(
            f"GPT-2 cannot be fetched from this machine: {url} answered HTTP {error.code} ({error.reason})."
        ) from error
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise GPT2Unavailable(
            f"GPT-2 cannot be fetched from this machine: {url} did not answer ({reason}). The machine is probably "
            "offline or cannot reach huggingface.co; the app's own small GPT still works."
        ) from error


def _length(response) -> int | None:
    value = response.headers.get("Content-Length")
    return int(value) if value and re.fullmatch(r"[0-9]{1,20}", value) else None  # ASCII: isdigit takes "²"


def _stream(response, target: Path, done: int, total: int | None, progress, stop) -> int:
    """Copy ``response`` into a temporary file beside ``target``, check it, rename it; the new byte count."""
    expected = _length(response)
    descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            written = 0
            while chunk := _read(response):
                if stop():
                    raise DownloadStoppedError(f"stopped after {written} bytes of {target.name}")
                handle.write(chunk)
                written += len(chunk)
                if progress is not None:
                    progress(done + written, total)
            handle.flush()
            os.fsync(handle.fileno())
        if expected is not None and written != expected:
            raise GPT2Unavailable(f"GPT-2's {target.name} arrived cut short: {written} of {expected} bytes")
        _check_file(target.name, temporary)
        os.replace(temporary, target)  # atomic: the cache holds the whole file or none of it
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    return done + written


def _read(response) -> bytes:
    try:
        return response.read(CHUNK_BYTES)
    except (OSError, urllib.error.URLError) as error:
        raise GPT2Unavailable(f"GPT-2's download broke off ({error}): the connection was lost or timed out") from error


def _check_file(name: str, path: Path) -> None:
    """Refuse a file that is not what it claims (an error page saved as JSON, a truncated header)."""
    try:
        if name.endswith(".safetensors"):
            with safe_open(str(path), framework="pt") as handle:
                handle.keys()
        else:
            Tokenizer.from_file(str(path))
    except Exception as error:  # any parse error means the same: not a usable file
        raise GPT2Unavailable(f"the downloaded {name} is not a readable file ({error})") from error


def load_gpt2(directory: str | Path | None = None, cfg: dict = GPT2_CONFIG) -> tuple[GPTModel, TextTokenizer]:
    """The cached GPT-2 in the book's GPTModel (weights in bfloat16, frozen, eval) and its tokenizer."""
    folder = gpt2_dir(directory)
    if not gpt2_cached(folder):
        raise FileNotFoundError(f"GPT-2 is not cached in {folder}: call download_gpt2 first")
    cfg = check_config(cfg)
    tokenizer = TextTokenizer.from_file(folder / "tokenizer.json")
    if tokenizer.vocab_size > cfg["vocab_size"]:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} tokens, the model only {cfg['vocab_size']}")
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        names = normalise_keys(handle.keys())
        check_gpt2_shapes({name: tuple(handle.get_slice(key).get_shape()) for name, key in names.items()}, cfg)
    model = build_gpt2(_file_getter(folder / "model.safetensors", names), cfg, STORAGE_DTYPE)
    return model, tokenizer


def _file_getter(path: Path, names: dict[str, str]):
    """Read one tensor from the file, cast in row chunks of at most ROW_CHUNK_ELEMENTS floats."""

    def get(name: str, dtype: torch.dtype) -> torch.Tensor:
        key = names[name]
        shape = _rows(path, key, None, None)
        if len(shape) == 1:
            return _rows(path, key, 0, shape[0]).to(dtype)
        out = torch.empty(shape, dtype=dtype)  # (rows, cols)
        step = max(1, ROW_CHUNK_ELEMENTS // max(1, shape[1]))
        for start in range(0, shape[0], step):
            out[start : start + step] = _rows(path, key, start, start + step)  # float32 rows -> dtype
        return out

    return get


def _rows(path: Path, key: str, start: int | None, stop: int | None):
    """Rows start:stop of ``key`` (its shape when start is None), the file opened for this read only.

    safe_open maps the file, and the pages read stay resident until the handle is dropped: one handle per chunk
    keeps that to one chunk (16 MB) instead of the whole 154 MB embedding.
    """
    with safe_open(str(path), framework="pt") as handle:
        piece = handle.get_slice(key)
        return tuple(piece.get_shape()) if start is None else piece[start:stop]


class GPT2Bytes(NamedTuple):
    """Bytes for the admission gate: kept once loaded, and the extra each job needs on top while it runs."""

    kept: int  # the bfloat16 weights (out_head tied), the one shared float32 mask, the tokenizer
    loading: int  # extra while loading: the tokenizer's parse, one float32 row chunk, a matrix and its transpose
    forward: int  # extra for forward over num_tokens: a float32 block, the attention steps, then the logits
    attention_weights: int  # extra for attention_weights over num_tokens: every layer's weights kept, one trace


def gpt2_bytes(num_tokens: int = 1024, cfg: dict = GPT2_CONFIG, batch: int = 1) -> GPT2Bytes:
    """An estimate from the shapes, set against bench/gpt2_memory.py's measurements (README); it errs high.

    forward adds the attention steps and the logits although they never live together: glibc keeps the first's
    freed memory in its heap while the second is made (measured: +370 MB at 1024 tokens, 190 MB of it kept).
    """
    cfg = check_config(cfg)
    if not 1 <= num_tokens <= cfg["context_length"] or batch < 1:
        raise ValueError(f"num_tokens must lie in 1..{cfg['context_length']} and batch ≥ 1: {num_tokens}, {batch}")
    E, V, C, L, h = (cfg[k] for k in ("emb_dim", "vocab_size", "context_length", "n_layers", "n_heads"))
    per_block = 12 * E * E + 13 * E  # one block's parameters
    kept = 2 * (V * E + C * E + L * per_block + 2 * E) + 4 * C * C + TOKENIZER_BYTES
    loading = TOKENIZER_PARSE_BYTES + 4 * ROW_CHUNK_ELEMENTS + 2 * 2 * 4 * E * E + ALLOCATOR_SLACK
    tokens = batch * num_tokens
    scores = 4 * batch * h * num_tokens * num_tokens  # one (b, h, T, T) float32 tensor
    block = 4 * per_block + 4 * tokens * 4 * E * 3  # the float32 copy, the feed-forward's activations
    attention = 4 * scores  # scores, masked, scaled, softmax alive at once
    head = 4 * tokens * V + 4 * HEAD_ROWS * E + 4 * tokens * HEAD_ROWS  # logits, one weight slice, its product
    forward = block + attention + head + ALLOCATOR_SLACK
    weights = block + scores * (L + 4) + ALLOCATOR_SLACK  # L kept, plus one traced layer's steps
    return GPT2Bytes(kept, loading, forward, weights)
