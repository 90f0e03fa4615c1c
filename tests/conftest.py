"""Fixtures for every test, and two memos that make each AppTest cheaper (``speed_up_apptest``)."""

import functools
import os
import threading

import pytest
import streamlit as st
import torch
from streamlit import config as st_config
from streamlit.components.v2 import manifest_scanner
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import app_test, local_script_runner

from .markers import markers_of


class _SharedScriptCache(ScriptCache):
    """One bytecode cache for every AppTest run in the process, keyed by the file's path, size and mtime (a script
    edited during a test is compiled afresh) and the magic setting: Streamlit makes a new cache per run."""

    def __init__(self) -> None:
        super().__init__()
        self._memo: dict[tuple, object] = {}
        self._memo_lock = threading.Lock()

    def get_bytecode(self, script_path: str):
        path = os.path.abspath(script_path)
        stat = os.stat(path)
        key = (path, stat.st_size, stat.st_mtime_ns, st_config.get_option("runner.magicEnabled"))
        with self._memo_lock:
            if key not in self._memo:
                self._memo[key] = ScriptCache().get_bytecode(path)
            return self._memo[key]

    def clear(self) -> None:
        with self._memo_lock:
            self._memo.clear()


def speed_up_apptest() -> None:
    """Each AppTest scans every installed distribution's metadata for Streamlit component manifests (0.45 s of CPU,
    most of a page's first run here) and compiles its page afresh on every run. The installed packages do not change
    while the tests run and the app's chart component is declared in code, not by a manifest, so the scan is made
    once per process and the bytecode is shared. Both are Streamlit internals (1.67): the asserts fail loudly when
    an upgrade moves them, rather than the tests silently going slow again."""
    if getattr(manifest_scanner.scan_component_manifests, "cache_info", None):
        return  # done in this process already
    assert callable(getattr(manifest_scanner, "scan_component_manifests", None)), "Streamlit moved its manifest scan"
    assert getattr(app_test, "ScriptCache", None) is ScriptCache, "AppTest no longer makes its own ScriptCache"
    assert getattr(local_script_runner, "ScriptCache", None) is ScriptCache, "the runner no longer makes one either"
    scan = manifest_scanner.scan_component_manifests
    memo = functools.cache(lambda: tuple(scan()))

    def scan_once(max_workers: int | None = None) -> list:
        return list(memo())

    scan_once.cache_info = memo.cache_info  # type: ignore[attr-defined]
    scan_once.__wrapped__ = scan  # type: ignore[attr-defined]
    manifest_scanner.scan_component_manifests = scan_once
    shared = _SharedScriptCache()
    app_test.ScriptCache = local_script_runner.ScriptCache = lambda: shared


speed_up_apptest()


@pytest.fixture(autouse=True)
def _seed_torch():
    """Every test starts from the same RNG state, as continuiti's tests do."""
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _unmeasured_rest(monkeypatch):
    """Every test starts with the gate's baseline unmeasured (budget.WARM_BYTES): the test process's own RSS, which an
    earlier page run may have noted as the server's rest (admission.page_finished), says nothing of a server's."""
    from explorer.glue.memory import budget

    monkeypatch.setattr(budget, "_REST", {"bytes": 0})


@pytest.fixture
def one_thread():
    """One torch thread for the test (as a page's run on a shared 2-CPU server); the count is restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def fresh_caches():
    """Cached views and modules would answer without calling what a test patches: empty them, before and after."""
    from explorer.glue.memory import caches

    st.cache_data.clear()
    st.cache_resource.clear()
    caches.clear_all()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()
    caches.clear_all()


def pytest_collection_modifyitems(items):
    """Each test gets its file's part of the tree as a marker (tests/markers.py), and `fast` where that applies."""
    for item in items:
        for name in markers_of(item.path):
            item.add_marker(name)
