"""A real ``python -m streamlit run`` server on 127.0.0.1 and a free port, stopped on exit; its health and metrics."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.rss import tree_rss_mb

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"  # every socket the harness opens goes here, and only here
# glibc: two malloc arenas, and blocks of 1 MiB or more mmapped, from the process's start. The app's mallopt at
# import (explorer.glue.memory.admission) comes after Streamlit's threads made their arenas, so tests that watch RSS
# closely set it from the environment (``StreamlitServer(env=MALLOC_ENV)``).
MALLOC_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": str(1 << 20)}


# Under pytest-xdist each worker is a process of its own ("gw0", "gw1", ...; "" otherwise): its servers take ports
# from a range of their own and write logs of their own, so two workers never race for a port or share a log.
# MHA_TEST_PORT_BASE moves every worker's range, so that two checkouts' suites on one machine do not collide.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
PORT_BASE_ENV, DEFAULT_PORT_BASE = "MHA_TEST_PORT_BASE", 20000
WORKER_PORTS = 500  # ports per worker, from the base + 500 × its number
_ports_taken = itertools.count()


def worker_suffix() -> str:
    """ "-gw0" in xdist worker gw0, "" outside xdist: for file names that must not be shared between workers."""
    return f"-{WORKER}" if WORKER else ""


def port_base() -> int:
    """The first port of worker gw0's range: ``MHA_TEST_PORT_BASE``, or 20000."""
    raw = os.environ.get(PORT_BASE_ENV, "").strip()
    if not raw:
        return DEFAULT_PORT_BASE
    if not (raw.isascii() and raw.isdigit() and 1024 <= int(raw) <= 65535 - 8 * WORKER_PORTS):
        raise ValueError(f"{PORT_BASE_ENV}={raw!r} must be a port from 1024 to {65535 - 8 * WORKER_PORTS}")
    return int(raw)


def free_port() -> int:
    """A port free now: the OS's choice, or under xdist the next free one of this worker's own range."""
    if not WORKER:
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            return sock.getsockname()[1]
    base = port_base() + WORKER_PORTS * int(WORKER.removeprefix("gw"))
    for _ in range(WORKER_PORTS):
        port = base + next(_ports_taken) % WORKER_PORTS
        with socket.socket() as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {base}–{base + WORKER_PORTS - 1} for xdist worker {WORKER}")


def healthy(url: str) -> bool:
    """The server at url answers its health check (what a load balancer asks it)."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def stop_process(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM, then SIGKILL if it has not gone within timeout seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def metrics(url: str) -> dict[str, float]:
    """The server's /_stcore/metrics as {"name{labels}": value} (active_sessions, session_events_total, ...)."""
    found = {}
    with urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                found[name] = float(value)
    return found


def server_errors(log_text: str) -> list[str]:
    """Lines of the server log that say a page failed or a traceback escaped."""
    return [line for line in log_text.splitlines() if "page failed" in line or line.startswith("Traceback")]


class StreamlitServer:
    """``python -m streamlit run app.py`` on 127.0.0.1 and a free port, stopped on exit."""

    def __init__(
        self,
        script: str = "app.py",
        extra_args: Iterable[str] = (),
        log_path: Path | None = None,
        start_timeout: float = 120,
        root: Path = ROOT,
        env: Mapping[str, str] | None = None,
    ):
        self.script, self.extra_args, self.start_timeout = script, list(extra_args), start_timeout
        self.root, self.env = Path(root), dict(env or {})
        self.port = free_port()
        self.log_path = log_path or ROOT / "artifacts" / f"streamlit-load-test{worker_suffix()}.log"  # the last one's
        self.process: subprocess.Popen | None = None
        self.started_s = 0.0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> StreamlitServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in __exit__)
        env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", **self.env)
        command = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            self.script,
            "--server.headless=true",
            f"--server.port={self.port}",
            f"--server.address={HOST}",
            *self.extra_args,
        ]
        begin = time.monotonic()
        self.process = subprocess.Popen(command, cwd=self.root, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = begin + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}; see {self.log_path}")
            if healthy(self.url):
                self.started_s = time.monotonic() - begin
                return self
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"the server was not healthy within {self.start_timeout} s; see {self.log_path}")

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            stop_process(self.process)
        self._log.close()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def rss_mb(self) -> float:
        return tree_rss_mb(self.pid)
