"""N Streamlit processes of the app behind Debian's HAProxy, on 127.0.0.1, with deploy/haproxy.cfg.

The single-server form of the deployment (several cores, one address), and what the tests and the scaling
benchmark run. HAProxy reads deploy/haproxy.cfg itself: only its ``server-template`` line, which finds compose
replicas through Docker's DNS, is replaced by one ``server`` line per local process, so the sticky cookie, the
health checks and the redispatch rules are the ones a compose or cluster deployment runs.

    python deploy/local_cluster.py serve --processes 4 --port 8080 [--address 0.0.0.0]     # until Ctrl-C
    python deploy/local_cluster.py load --processes 2 --sessions 10 --seconds 30 [--kill-after 10]

``load`` runs bench/load_test.py's sessions (Streamlit's websocket protocol, every run checked for errors and
cross-talk) through the proxy; ``--kill-after`` SIGKILLs the process holding the most sessions mid-run, and the
sessions it held must come back after one reconnect each. Needs ``haproxy`` on PATH (``apt-get install haproxy``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.checks import session_query  # noqa: E402
from harness.drive import SessionLog, drive_session, percentile  # noqa: E402
from harness.server import HOST, StreamlitServer, free_port, healthy, metrics, server_errors, stop_process  # noqa: E402

CONFIG = ROOT / "deploy" / "haproxy.cfg"
ARTIFACTS = ROOT / "artifacts"
_TEMPLATE_LINE = re.compile(r"^(\s*)server-template\s+\S+\s+\S+\s+\S+.*$", re.MULTILINE)


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.path.exists(p)), None)
    if found is None:
        raise FileNotFoundError("haproxy is not installed (apt-get install -y haproxy; .ci/run does this in CI)")
    return found


def local_config(ports: list[int], config_text: str | None = None) -> str:
    """deploy/haproxy.cfg with its one ``server-template`` line replaced by ``server appK 127.0.0.1:PORT``."""
    text = CONFIG.read_text() if config_text is None else config_text
    found = _TEMPLATE_LINE.findall(text)
    if len(found) != 1:
        raise ValueError(f"expected one server-template line in {CONFIG}, found {len(found)}")
    servers = "\n".join(f"{found[0]}server app{k + 1} {HOST}:{port}" for k, port in enumerate(ports))
    return _TEMPLATE_LINE.sub(lambda _: servers, text)


def check_config(path: Path) -> str:
    """``haproxy -c -f path``: its output; raises with that output when the config is invalid."""
    done = subprocess.run([haproxy_binary(), "-c", "-f", str(path)], capture_output=True, text=True, timeout=30)
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        raise ValueError(f"haproxy -c -f {path} failed:\n{output}")
    return output


@dataclass
class LocalCluster:
    """``processes`` app servers and one HAProxy in front; all stopped on exit (a context manager)."""

    processes: int = 2
    port: int = 0  # HAProxy's port; 0 takes a free one
    address: str = HOST  # HAProxy's address; the app processes always listen on 127.0.0.1 only
    name: str = "cluster"  # log files: artifacts/<name>-app<k>.log, artifacts/<name>-haproxy.log
    servers: list[StreamlitServer] = field(default_factory=list)
    haproxy: subprocess.Popen | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> LocalCluster:
        if not 1 <= self.processes <= 16:
            raise ValueError(f"processes={self.processes}: 1 to 16")
        self.port = self.port or free_port()
        # One cookie secret for every process, as a deployment must set it (XSRF and auth cookies stay valid
        # when a browser is sent to another process).
        env = {"STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(32)}
        try:
            for k in range(self.processes):
                log = ARTIFACTS / f"{self.name}-app{k + 1}.log"
                self.servers.append(self._stack.enter_context(StreamlitServer(log_path=log, env=env)))
            self._start_haproxy()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start_haproxy(self) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        config = ARTIFACTS / f"{self.name}-haproxy.cfg"
        config.write_text(local_config([server.port for server in self.servers]))
        env = dict(os.environ, HAPROXY_BIND=f"{self.address}:{self.port}")
        log = self._stack.enter_context(open(ARTIFACTS / f"{self.name}-haproxy.log", "w"))  # noqa: SIM115
        self.haproxy = subprocess.Popen(
            [haproxy_binary(), "-db", "-f", str(config)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self._stack.callback(stop_process, self.haproxy, 10)
        deadline = time.monotonic() + 30
        while not (healthy(self.url) and all(self.backend_up(k) for k in range(self.processes))):
            if self.haproxy.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not come up on {self.url}; see {log.name}")
            time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def backend_up(self, k: int) -> bool:
        """Process k answers its health check (what HAProxy asks it every second)."""
        return self.servers[k].alive() and healthy(self.servers[k].url)

    def active_sessions(self) -> list[int]:
        """Each process's open Streamlit sessions (its /_stcore/metrics); -1 for a process that is gone."""
        counts = []
        for k, server in enumerate(self.servers):
            try:
                counts.append(int(metrics(server.url).get("active_sessions", 0)) if self.backend_up(k) else -1)
            except OSError:
                counts.append(-1)
        return counts

    def kill(self, k: int) -> None:
        """SIGKILL process k: no goodbye to its websockets, as when a machine or a container dies."""
        process = self.servers[k].process
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def server_errors(self) -> list[str]:
        return [f"app{k + 1}: {line}" for k, s in enumerate(self.servers) for line in server_errors(s.log_text())]


@dataclass
class ProxyLoad:
    """What bench/load_test.py's sessions did through the proxy."""

    logs: list[SessionLog]
    seconds: float
    sessions_per_process: list[int]
    killed: int | None = None

    @property
    def errors(self) -> list[str]:
        return [e for log in self.logs for e in log.errors]

    @property
    def runs(self) -> int:
        return sum(len(log.checks) for log in self.logs)

    @property
    def reruns(self) -> list[float]:
        return [s for log in self.logs for s in log.reruns]

    @property
    def cross_talk(self) -> int:
        return sum(check.cross_talk for log in self.logs for check in log.checks)

    @property
    def reconnects(self) -> int:
        return sum(log.reconnects for log in self.logs)


def load_through(
    cluster: LocalCluster,
    sessions: int,
    seconds: float,
    max_reruns: int = 1000,
    think: tuple[float, float] = (1.0, 3.0),
    kill_after: float | None = None,
    first_index: int = 0,
) -> ProxyLoad:
    """bench/load_test.py's sessions through the proxy, concurrently; optionally kill the busiest process mid-run."""
    logs = [SessionLog(k, urlencode(session_query(k))) for k in range(first_index, first_index + sessions)]
    start = threading.Barrier(sessions)
    began = time.monotonic()
    deadline = began + seconds
    threads = [
        threading.Thread(
            target=drive_session,
            args=(log.index, cluster.port, deadline, max_reruns, think, start, log, True),
            daemon=True,
        )
        for log in logs
    ]
    for thread in threads:
        thread.start()
    spread, killed = [], None
    if kill_after is not None:
        time.sleep(kill_after)
        spread = cluster.active_sessions()
        killed = max(range(len(spread)), key=spread.__getitem__)
        cluster.kill(killed)
    else:
        time.sleep(min(3.0, seconds / 2))
        spread = cluster.active_sessions()
    for thread in threads:
        thread.join(timeout=max(1.0, deadline - time.monotonic()) + 240)
    return ProxyLoad(logs, time.monotonic() - began, spread, killed)


def report(load: ProxyLoad) -> str:
    rows = [
        ("sessions, per process (when measured)", f"{len(load.logs)}: {load.sessions_per_process}"),
        ("script runs (first loads + widget changes)", f"{load.runs}"),
        ("runs per second", f"{load.runs / load.seconds:.2f}"),
        ("rerun latency p50 / p95", f"{percentile(load.reruns, 50):.2f} s / {percentile(load.reruns, 95):.2f} s"),
        ("errors", f"{len(load.errors)}"),
        ("cross-talk", f"{load.cross_talk}"),
        ("reconnects", f"{load.reconnects}" + (f" (app{load.killed + 1} killed)" if load.killed is not None else "")),
    ]
    lines = ["| measure | value |", "| --- | --- |"] + [f"| {name} | {value} |" for name, value in rows]
    if load.errors:
        lines += ["", "Errors (first 10):", ""] + [f"- {e}" for e in load.errors[:10]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the processes and HAProxy, and wait (Ctrl-C stops them)")
    load = sub.add_parser("load", help="run the load test through the proxy")
    for command in (serve, load):
        command.add_argument("--processes", type=int, default=2)
        command.add_argument("--port", type=int, default=0, help="HAProxy's port on 127.0.0.1 (0: a free one)")
    serve.add_argument("--address", default=HOST, help="HAProxy's address (0.0.0.0: every interface)")
    load.add_argument("--sessions", type=int, default=10)
    load.add_argument("--seconds", type=float, default=30)
    load.add_argument("--think", type=float, nargs=2, default=(1.0, 3.0), metavar=("MIN", "MAX"))
    load.add_argument("--kill-after", type=float, default=None, help="SIGKILL the busiest process after S seconds")
    args = parser.parse_args(argv)
    progress = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    address = getattr(args, "address", HOST)
    with LocalCluster(args.processes, args.port, address) as cluster:
        progress(
            f"{args.processes} processes on {[s.port for s in cluster.servers]}, HAProxy on {address}:{cluster.port}"
        )
        if args.command == "serve":
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the processes on SIGTERM too
            with contextlib.suppress(KeyboardInterrupt):
                while cluster.haproxy.poll() is None:
                    time.sleep(1)
            return 0
        if args.kill_after is not None and args.processes < 2:
            parser.error("--kill-after needs at least 2 processes")
        load_result = load_through(
            cluster, args.sessions, args.seconds, think=tuple(args.think), kill_after=args.kill_after
        )
        errors = load_result.errors + cluster.server_errors()
        print(report(load_result))
        return 0 if not errors and not load_result.cross_talk else 1


if __name__ == "__main__":
    sys.exit(main())
