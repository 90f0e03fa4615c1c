"""explorer.glue.memory.downloads: a file made on a click passes the gate, counts in the caches' bytes until it is sent,
and is let go when its request is answered or Streamlit drops it.

Before, the .npz callable kept its own copy for as long as its tab showed the button, outside every budget: 20 tabs
that each pressed "Download the trace" at 16 heads × 256 tokens held 825 MB.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from dataclasses import replace

import pytest
from streamlit.proto.BackMsg_pb2 import BackendOperationRequest
from streamlit.runtime.backend_operation_handler import DeferredFileHandler
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.media_file_storage import MediaFileKind, MediaFileStorageError
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from explorer.glue.frame import server_setup
from explorer.glue.memory import admission, byte_caches, caches, downloads
from explorer.glue.state.settings import Settings

HEAVY = Settings(num_heads=4, d_out=32, d_in=8, num_tokens=128, batch_size=1, context_length=128, input="random")


@pytest.fixture
def held(monkeypatch):
    fresh = downloads.HeldFiles(max_bytes=4 * downloads.MB)
    monkeypatch.setattr(downloads, "HELD", fresh)
    caches._REGISTRY.caches.append(fresh)
    yield fresh
    caches._REGISTRY.caches.remove(fresh)


def test_the_npz_is_made_through_the_gate_and_counted_until_sent(held, monkeypatch):
    admitted = []
    real_admit = admission.admit

    def watching(label, **kwargs):
        admitted.append((label, kwargs.get("need_bytes")))
        return real_admit(label, **kwargs)

    monkeypatch.setattr(admission, "admit", watching)
    make = caches.npz_download(HEAVY)
    data = make()
    assert data[:2] == b"PK"  # a zip: the .npz
    assert admitted and admitted[0][1] == caches.budget.need_bytes("npz", HEAVY)
    assert held.bytes == len(data) and held.holds(data)
    assert caches.total_bytes() >= len(data)  # in the caches' one total
    assert make() is data and len(admitted) == 1  # asked again before it is fetched: the same file, made once
    assert not [cell for cell in make.__closure__ or () if isinstance(cell.cell_contents, bytes)]  # keeps no copy
    assert downloads.sent(data) and held.bytes == 0 and not held.holds(data)
    assert not downloads.sent(data)  # once
    again = make()  # a click after it was sent: made afresh
    assert again is not data and again == data and len(admitted) == 2 and held.holds(again)


def test_a_new_file_waits_while_the_held_ones_fill_their_budget(held):
    first = downloads.make("first", 0, lambda: b"x" * (3 * downloads.MB))
    with pytest.raises(admission.ServerBusyError, match="not yet fetched"):
        held.wait_for_room(2 * downloads.MB, wait_s=0.3)
    threading.Timer(0.2, downloads.sent, args=(first,)).start()
    second = downloads.make("second", 0, lambda: b"y" * (2 * downloads.MB), expected_bytes=2 * downloads.MB)
    assert held.bytes == len(second) and not held.holds(first)


def test_held_files_push_cached_views_out_not_the_other_way_round(held, monkeypatch):
    monkeypatch.setattr(byte_caches, "TOTAL_BYTES", 3 * downloads.MB)
    cache = caches._REGISTRY.add(caches.ByteCache("test.views", 8 * downloads.MB))
    try:
        cache.put("a", object(), 2 * downloads.MB)
        held.hold(b"z" * (2 * downloads.MB))
        caches._REGISTRY.enforce_total()
        assert len(cache) == 0 and held.bytes == 2 * downloads.MB  # the view went; the file waiting to be sent stays
    finally:
        caches._REGISTRY.caches.remove(cache)


def test_streamlits_storage_lets_a_made_file_go_once_its_request_is_answered(held):
    server_setup.release_sent_downloads()
    storage = MemoryMediaFileStorage("/media")
    data = downloads.make("npz", 0, lambda: b"npz bytes " * 1000)
    file_id = storage.load_and_get_id(data, "application/octet-stream", MediaFileKind.DOWNLOADABLE, "mha_trace.npz")
    url = storage.get_url(file_id)  # what execute_deferred does: not a request
    assert held.holds(data) and url.endswith(".bin")
    served = storage.get_file(url.rsplit("/", 1)[-1])  # the media endpoint answering the browser
    assert served.content is data and not held.holds(data)
    with pytest.raises(MediaFileStorageError):
        storage.get_file(file_id)  # gone from the storage too


def test_a_file_never_fetched_is_let_go_when_streamlit_drops_it(held):
    server_setup.release_sent_downloads()
    storage = MemoryMediaFileStorage("/media")
    data = downloads.make("npz", 0, lambda: b"unfetched " * 1000)
    file_id = storage.load_and_get_id(data, "application/octet-stream", MediaFileKind.DOWNLOADABLE, "x.npz")
    storage.delete_file(file_id)  # the tab closed: Streamlit's clean-up
    assert not held.holds(data) and held.bytes == 0


def test_the_offered_npz_fits_what_the_caches_may_hold_while_it_waits():
    """The memory promise (WARM + CACHE + 1.25 × JOB ≤ 690 MB) holds with a file waiting: it is within CACHE."""
    issue_link = Settings(num_heads=16, d_out=256, num_tokens=256, batch_size=1, d_in=64, input="random")
    assert caches.npz_offered(issue_link)  # the issue's 16 heads × 256 tokens is still offered
    assert downloads.MAX_HELD_BYTES <= caches.TOTAL_BYTES
    bigger = Settings(num_heads=16, d_out=256, num_tokens=512, context_length=512, d_in=64, batch_size=1)
    bigger = replace(bigger, input="random")
    assert caches.budget.fits("npz", bigger)  # making it fits one job, but its 65 MB file would not wait within CACHE
    assert caches.npz_file_bytes(bigger) > downloads.MAX_HELD_BYTES and not caches.npz_offered(bigger)


def _answer(manager: MediaFileManager, file_id: str):
    """What the server answers a download button's click for ``file_id`` (its deferred file request)."""
    server_setup.configure_process()
    request = BackendOperationRequest(request_id="download-0")
    request.deferred_file.file_id = file_id
    handle = DeferredFileHandler(lambda: manager).handle(request, "session")
    # In its own thread: another test in this process may have left an event loop running in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, handle).result()


def test_a_refused_download_says_why_in_the_apps_words(held, monkeypatch):
    """One of 20 tabs got Streamlit's bare "Failed to generate file for download" (shown under the button); the
    reason, the downloads held, was only in the server log."""
    monkeypatch.setattr(downloads, "WAIT_S", 0.1)
    held.hold(b"x" * (4 * downloads.MB))  # another tab's file, not fetched yet
    manager = MediaFileManager(MemoryMediaFileStorage("/media"))
    file_id = manager.add_deferred(lambda: downloads.make("a trace", 0, lambda: b"y" * 1024, 2**20), None, "1")
    response = _answer(manager, file_id)
    assert response.error_msg == "The server holds 4 MB of downloads not yet fetched; try again shortly."
    assert downloads.refusal(file_id) is None  # said once, then forgotten


def test_a_download_that_fails_otherwise_keeps_streamlits_answer(held):
    def broken() -> bytes:
        raise RuntimeError("a bug, logged")

    manager = MediaFileManager(MemoryMediaFileStorage("/media"))
    response = _answer(manager, manager.add_deferred(broken, None, "1"))
    assert response.error_msg == "Failed to generate file for download"  # no exception text reaches the page
