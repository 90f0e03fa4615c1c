"""Files made on a click (the Explorer's .npz trace): made through the admission gate, held within the caches' bytes
until they are sent, then let go.

Streamlit keeps a made file in its media storage until two script runs after no session refers to it, and the
download callable kept its own copy for as long as the tab showed the button: 20 tabs that each pressed "Download the
trace" at 16 heads × 256 tokens held 825 MB. Here a file is made behind the gate (its page's byte estimate, one heavy
job at a time), counted in ``HELD`` while it waits to be fetched, and dropped from Streamlit's storage as soon as
its one request is answered (``server_setup`` hooks the storage: ``sent``); a tab closed before fetching it leaves it
to Streamlit's own clean-up, which lets it go here too (``dropped``). ``HELD`` is one of the caches' byte budgets
(``caches.TOTAL_BYTES``): files waiting to be sent push cached views out, never the other way round, and a new file
waits (at most ``WAIT_S``) while ``MAX_HELD_BYTES`` are held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from explorer.glue.memory import admission, budget

MB = 2**20
MAX_HELD_BYTES = 40 * MB  # made files waiting to be fetched, every session together (within caches.TOTAL_BYTES)
HELD_SHARE = 40 / 64  # on a smaller server, the same share of the caches' bytes (budget.cache_bytes)
WAIT_S = 30.0  # how long a new file waits for room before the server says it is busy
TTL_S = 600.0  # a file nobody fetched or dropped (an idle server runs no clean-up) stops counting after this


def held_bytes() -> int:
    """What files waiting to be fetched may hold: MAX_HELD_BYTES, or HELD_SHARE of the caches' bytes on a smaller
    server (budget.cache_bytes follows the server's memory)."""
    return min(MAX_HELD_BYTES, int(HELD_SHARE * budget.cache_bytes()))


class HeldFiles:
    """The made files not yet sent, by the identity of their bytes (Streamlit stores the same object)."""

    def __init__(self, max_bytes: int | None = None):
        self.name, self.max_bytes = "downloads.held", max_bytes  # None: held_bytes(), read when a file waits
        self._cond = threading.Condition()
        self._files: dict[int, tuple[bytes, float]] = {}
        self.bytes = 0

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, (_, made) in self._files.items() if now - made > TTL_S]:
            self._drop(key)

    def _drop(self, key: int) -> None:
        data, _ = self._files.pop(key)
        self.bytes -= len(data)
        self._cond.notify_all()

    def wait_for_room(self, nbytes: int, wait_s: float = WAIT_S) -> None:
        """Return once ``nbytes`` more fit (or nothing is held: one file may be larger); else ServerBusyError."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            while self._files and self.bytes + nbytes > (self.max_bytes or held_bytes()):
                self._expire()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise admission.ServerBusyError(
                        f"The server holds {self.bytes / MB:.0f} MB of downloads not yet fetched; try again shortly."
                    )
                self._cond.wait(min(left, 1.0))

    def hold(self, data: bytes) -> bytes:
        with self._cond:
            if id(data) not in self._files:
                self._files[id(data)] = (data, time.monotonic())
                self.bytes += len(data)
        return data

    def release(self, data: object) -> bool:
        """Forget ``data`` (sent, or dropped by Streamlit); True when it was held."""
        with self._cond:
            entry = self._files.get(id(data))
            if entry is None or entry[0] is not data:
                return False
            self._drop(id(data))
            return True

    def get(self, key: int | None) -> bytes | None:
        """The held file whose identity is ``key`` (``id(data)``), or None once it is sent or dropped."""
        with self._cond:
            entry = self._files.get(key) if key is not None else None
            return entry[0] if entry is not None else None

    def holds(self, data: object) -> bool:
        with self._cond:
            entry = self._files.get(id(data))
            return entry is not None and entry[0] is data

    def pop_oldest(self) -> bool:
        return False  # a file waiting for its request cannot be dropped: Streamlit holds it too

    def clear(self) -> None:
        with self._cond:
            self._expire()  # the idle clear: only what nobody fetched for TTL_S

    def __len__(self) -> int:
        with self._cond:
            return len(self._files)


HELD = HeldFiles()


def make(label: str, need_bytes: int, build: Callable[[], bytes], expected_bytes: int = 0) -> bytes:
    """``build()`` through the admission gate (``need_bytes``: its peak), then held until it is sent.

    Waits first for room among the held files (``expected_bytes``: the file's size, if known).
    """
    HELD.wait_for_room(expected_bytes)
    with admission.admit(label, need_bytes=need_bytes):
        data = build()
    return HELD.hold(data)


def sent(data: object) -> bool:
    """Streamlit answered the request for ``data``: stop holding it. True when it was a made download."""
    return HELD.release(data)


_REFUSED: dict[str, str] = {}  # a deferred file's id -> why the app refused to make it, until its answer is sent
_REFUSED_LOCK = threading.Lock()


def refused(file_id: str, reason: str) -> None:
    """The app refused to make ``file_id`` (its request is answered with ``reason``, by ``server_setup``)."""
    with _REFUSED_LOCK:
        _REFUSED[file_id] = reason


def refusal(file_id: str) -> str | None:
    """Why the app refused ``file_id``, once (None when it did not)."""
    with _REFUSED_LOCK:
        return _REFUSED.pop(file_id, None)
