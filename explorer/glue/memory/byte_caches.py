"""Caches bounded in bytes, shared by every session: one mechanism for every cache that can hold a run or a view.

``st.cache_resource`` bounds a cache by its number of entries only, so a cache sized for a class's small views held
64 views of the largest run too: Follow a token kept 726 MB after 64 visits. Here each cache has a byte budget (and
an entry cap), and the sum over every cache is bounded by ``budget.cache_bytes()`` (at most ``TOTAL_BYTES``). Apart
from ``caches`` (which imports the cached modules) so that any cached module can use it (issue 43: Real heads'
readings were count-bound and stayed beside full byte caches).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from explorer.glue.memory import admission, budget, downloads

MB = 2**20
TOTAL_BYTES = 64 * MB  # every byte-bounded cache together, at most (less on a smaller server: budget.cache_bytes)


def size_of(value, _seen: set[int] | None = None, _depth: int = 0) -> int:
    """Bytes an object holds: arrays and tensors by their buffers, figures by their data, the rest by sys.getsizeof.

    Walks dataclasses, containers and plotly figures (their ``_data`` and ``_layout``); shared objects count once.
    Cheap: no serialising, no copies.
    """
    seen = _seen if _seen is not None else set()
    if id(value) in seen or _depth > 12:
        return 0
    seen.add(id(value))
    nbytes = getattr(value, "nbytes", None)
    storage = getattr(value, "untyped_storage", None)
    if callable(storage):  # a torch tensor keeps its whole storage alive (a slice of a trace keeps the trace's)
        kept = storage()
        if ("storage", kept.data_ptr()) in seen:
            return 128
        seen.add(("storage", kept.data_ptr()))
        return kept.nbytes() + 128
    if isinstance(nbytes, int) and hasattr(value, "dtype"):  # numpy arrays
        base = getattr(value, "base", None)
        if base is not None and hasattr(base, "nbytes"):  # a numpy view keeps its whole base alive: count that
            return 128 + size_of(base, seen, _depth + 1)
        if getattr(value.dtype, "kind", "") == "O" and value.size:  # object arrays (hover text): sample the objects
            sample = value.reshape(-1)[:64]
            return nbytes + 128 + int(sum(sys.getsizeof(v) for v in sample) * value.size / len(sample))
        return nbytes + 128
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return sys.getsizeof(value)
    if isinstance(value, Mapping):  # dicts, and read-only views of them (a trace's steps)
        items = value.items()
        return sys.getsizeof(value) + sum(size_of(k, seen) + size_of(v, seen, _depth + 1) for k, v in items)
    if isinstance(value, list | tuple | set | frozenset):
        return sys.getsizeof(value) + sum(size_of(v, seen, _depth + 1) for v in value)
    if hasattr(value, "_data") and hasattr(value, "_layout"):  # a plotly figure: its traces' and layout's dicts
        return size_of(value._data, seen, _depth + 1) + size_of(value._layout, seen, _depth + 1)
    if hasattr(value, "state_dict") and callable(value.state_dict):  # a torch module
        return sum(size_of(t, seen) for t in value.state_dict(keep_vars=True).values()) + 1024
    fields = getattr(value, "__dict__", None)
    if fields is None and hasattr(value, "__slots__"):
        fields = {name: getattr(value, name, None) for name in value.__slots__}
    return sys.getsizeof(value) + (size_of(fields, seen, _depth + 1) if fields else 0)


class ByteCache:
    """A thread-safe LRU keyed on hashable arguments, bounded by ``max_bytes`` and ``max_entries``, with a ttl.

    An entry larger than ``max_bytes`` is returned but not kept.
    """

    def __init__(self, name: str, max_bytes: int, max_entries: int = 64, ttl_s: float = 1800.0):
        self.name, self.max_bytes, self.max_entries, self.ttl_s = name, max_bytes, max_entries, ttl_s
        self._lock = threading.Lock()
        self._items: OrderedDict[object, tuple[object, int, float]] = OrderedDict()  # key -> (value, bytes, stored)
        self.bytes = 0

    def get(self, key) -> tuple[bool, object]:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return False, None
            if time.monotonic() - item[2] > self.ttl_s:
                self._drop(key)
                return False, None
            self._items.move_to_end(key)
            return True, item[0]

    def put(self, key, value, nbytes: int) -> None:
        if nbytes > self.max_bytes:
            return
        with self._lock:
            if key in self._items:
                self._drop(key)
            self._items[key] = (value, nbytes, time.monotonic())
            self.bytes += nbytes
            while self.bytes > self.max_bytes or len(self._items) > self.max_entries:
                self._drop(next(iter(self._items)))
        REGISTRY.enforce_total()

    def pop_oldest(self) -> bool:
        with self._lock:
            if not self._items:
                return False
            self._drop(next(iter(self._items)))
            return True

    def _drop(self, key) -> None:
        _, nbytes, _ = self._items.pop(key)
        self.bytes -= nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class Registry:
    """Every ByteCache in the process: their total is held to TOTAL_BYTES by dropping the largest cache's oldest."""

    def __init__(self):
        self.caches: list[ByteCache] = []
        self._lock = threading.Lock()

    def add(self, cache: ByteCache) -> ByteCache:
        with self._lock:
            self.caches.append(cache)
        return cache

    def total(self) -> int:
        return sum(cache.bytes for cache in self.caches)

    def enforce_total(self) -> None:
        """Drop the oldest entry of the largest cache that can drop one (held downloads cannot) until within."""
        with self._lock:
            limit = min(TOTAL_BYTES, budget.cache_bytes())
            while self.total() > limit:
                if not any(cache.pop_oldest() for cache in sorted(self.caches, key=lambda c: -c.bytes)):
                    break


REGISTRY = Registry()
REGISTRY.add(downloads.HELD)  # made files waiting to be sent count in TOTAL_BYTES: cached views make room for them
admission.PAGES.cached = REGISTRY.total  # the server's measured rest leaves out what its caches hold


def clear_all() -> None:
    for cache in list(REGISTRY.caches):
        cache.clear()


def total_bytes() -> int:
    return REGISTRY.total()


def byte_cached(max_bytes: int, max_entries: int = 64, ttl_s: float = 1800.0, spinner: str | None = None):
    """Decorate a function of hashable arguments: its results shared in a ByteCache of its own.

    Arguments whose name starts with ``_`` are left out of the key (as with st.cache_resource). ``spinner``: text
    shown while a miss computes, in a running page.
    """

    def decorate(function: Callable):
        cache = REGISTRY.add(ByteCache(f"{function.__module__}.{function.__qualname__}", max_bytes, max_entries, ttl_s))
        names = function.__code__.co_varnames[: function.__code__.co_argcount]

        def key_of(args, kwargs) -> tuple:
            return tuple(a for n, a in zip(names, args, strict=False) if not n.startswith("_")) + tuple(
                sorted((n, a) for n, a in kwargs.items() if not n.startswith("_"))
            )

        @functools.wraps(function)
        def cached(*args, **kwargs):
            key = key_of(args, kwargs)
            hit, value = cache.get(key)
            if hit:
                return value
            with _spinner(spinner):
                value = function(*args, **kwargs)
            cache.put(key, value, size_of(value))
            return value

        cached.cache = cache
        cached.clear = cache.clear
        cached.peek = lambda *args, **kwargs: cache.get(key_of(args, kwargs))  # (hit, value), computes nothing
        return cached

    return decorate


def _spinner(text: str | None):
    if text is None:
        return contextlib.nullcontext()
    try:
        if get_script_run_ctx(suppress_warning=True) is None:
            return contextlib.nullcontext()
        return st.spinner(text)
    except Exception:  # noqa: BLE001 - no page to draw on
        return contextlib.nullcontext()
