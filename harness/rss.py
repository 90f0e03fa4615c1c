"""A server's resident memory, its children included (psutil), and a sampler that catches its peak.

psutil reads RSS and the process tree; the kernel's high-water mark (VmHWM, and its reset through clear_refs) has
no psutil call, so those two read and write /proc/<pid> directly (Linux only; elsewhere the sampler alone counts).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable

import psutil

MB = 2**20


def tree(pid: int) -> list[psutil.Process]:
    """pid and every process below it (a server's children count too); [] when pid is gone."""
    try:
        process = psutil.Process(pid)
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return []


def rss_mb(processes: Iterable[psutil.Process]) -> float:
    """Resident memory of these processes together, in MB (2**20 bytes); one that has gone counts 0."""
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total / MB


def tree_rss_mb(pid: int) -> float:
    """Resident memory of pid and its descendants, in MB."""
    return rss_mb(tree(pid))


def hwm_mb(pid: int) -> float:
    """The kernel's high-water mark of pid's resident memory since start or the last ``reset_hwm`` (0 if gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return 0.0


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
        self._children: list[psutil.Process] = []
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
        processes: list[psutil.Process] = []
        last_scan = 0.0
        while not self._stop.is_set():
            if time.monotonic() - last_scan > 1.0:  # the tree again once a second: children come and go
                processes, last_scan = tree(self.pid), time.monotonic()
                self._children = processes[1:]
            rss = rss_mb(processes)
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
            peak = max(peak, hwm_mb(self.pid) + rss_mb(self._children))
        return peak
