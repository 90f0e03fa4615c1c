"""Does a second app process double the class a machine can serve? 1 process vs 2 behind HAProxy, in one run.

Each configuration is deploy/local_cluster.py's cluster (N ``streamlit run app.py`` processes on 127.0.0.1 behind
Debian's HAProxy with deploy/haproxy.cfg), warmed up (each process has imported torch and drawn one page), then
driven at saturation by bench/load_test.py's sessions through the proxy: each session reruns the page with a new
widget value as soon as its last run finished (no think time), and every run is checked for errors and cross-talk.
Measured: script runs per second (throughput), rerun latency p50 / p95, and the CPU the app processes used. The
configurations run back to back in one invocation (``--rounds 2``: 1, 2, 2, 1), so both see the same machine.

    python bench/cluster_scaling.py [--sessions 8 --seconds 40 --rounds 1 --processes 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from deploy.local_cluster import LocalCluster, load_through  # noqa: E402
from harness.checks import session_query  # noqa: E402
from harness.drive import percentile  # noqa: E402
from harness.session import Session  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 when it is gone)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def machine_busy_seconds() -> float:
    """CPU seconds every process on the machine has used (all CPUs): to see who else was busy."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)  # all but idle and iowait


@dataclass
class Measure:
    processes: int
    runs: int
    seconds: float
    rerun_p50: float
    rerun_p95: float
    app_cores: float  # CPU seconds of the app processes per wall second
    client_cores: float  # the same for this process: the sessions' clients and their checks
    machine_cores: float  # the same for the whole machine: the difference is other work on the shared CPUs
    spread: list[int]  # sessions per process
    errors: int
    cross_talk: int

    @property
    def throughput(self) -> float:
        return self.runs / self.seconds

    @property
    def runs_per_cpu_second(self) -> float:
        """Runs per CPU second the app processes got: equal for 1 and N processes when only the CPU limits them."""
        return self.runs / (self.app_cores * self.seconds)


def measure(processes: int, sessions: int, seconds: float, progress=print) -> Measure:
    """One configuration: start, warm every process directly, run the sessions through the proxy, stop."""
    with LocalCluster(processes, name=f"scaling-{processes}") as cluster:
        for k, server in enumerate(cluster.servers):  # torch imported, the page drawn once, in every process
            with Session(server.port, urlencode(session_query(100 + k))) as warm:
                warm.run()
        pids = [server.pid for server in cluster.servers]
        cpu_before, client_before = sum(cpu_seconds(pid) for pid in pids), cpu_seconds(os.getpid())
        machine_before = machine_busy_seconds()
        load = load_through(cluster, sessions, seconds, think=(0.0, 0.0))
        cores = (sum(cpu_seconds(pid) for pid in pids) - cpu_before) / load.seconds
        client = (cpu_seconds(os.getpid()) - client_before) / load.seconds
        machine = (machine_busy_seconds() - machine_before) / load.seconds
        errors = len(load.errors) + len(cluster.server_errors())
    found = Measure(
        processes,
        load.runs,
        load.seconds,
        percentile(load.reruns, 50),
        percentile(load.reruns, 95),
        cores,
        client,
        machine,
        load.sessions_per_process,
        errors,
        load.cross_talk,
    )
    progress(
        f"{processes} process(es): {found.throughput:.2f} runs/s, rerun p95 {found.rerun_p95:.2f} s, "
        f"app CPU {cores:.2f} cores, client {client:.2f}, sessions per process {found.spread}, errors {errors}, "
        f"cross-talk {found.cross_talk}"
    )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8, help="concurrent sessions, rerunning without pause")
    parser.add_argument("--seconds", type=float, default=40, help="how long each configuration is driven")
    parser.add_argument("--rounds", type=int, default=1, help="1: order 1, N; 2: order 1, N, N, 1")
    parser.add_argument("--processes", type=int, default=2, help="N, compared with 1")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 100 or not 5 <= args.seconds <= 600 or args.rounds not in (1, 2):
        parser.error("sessions 1–100, seconds 5–600, rounds 1 or 2")
    progress = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    load_before = os.getloadavg()[0]
    order = [1, args.processes] if args.rounds == 1 else [1, args.processes, args.processes, 1]
    found = {1: [], args.processes: []}
    began = time.monotonic()
    runs = []
    for processes in order:
        runs.append(measure(processes, args.sessions, args.seconds, progress))
        found[processes].append(runs[-1])
    one, many = found[1], found[args.processes]

    def mean(values) -> float:
        return statistics.fmean(values)

    t1, tn = mean(m.throughput for m in one), mean(m.throughput for m in many)
    p1, pn = mean(m.rerun_p95 for m in one), mean(m.rerun_p95 for m in many)
    print(
        f"### 1 vs {args.processes} app processes behind HAProxy: {args.sessions} sessions rerunning without pause, "
        f"{args.seconds:.0f} s each, order {order}, {os.cpu_count()} CPUs (load average {load_before:.1f} before "
        f"the run; the load client shares the CPUs)\n"
    )
    print(
        "| processes | runs/s | rerun p50 | rerun p95 | app cores | runs per app CPU-s | client CPU | machine CPU "
        "| sessions per process | errors | cross-talk |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"
    )
    for m in runs:
        print(
            f"| {m.processes} | {m.throughput:.2f} | {m.rerun_p50:.2f} s | {m.rerun_p95:.2f} s | {m.app_cores:.2f} | "
            f"{m.runs_per_cpu_second:.2f} | {m.client_cores:.2f} | {m.machine_cores:.2f} | {m.spread} | {m.errors} | "
            f"{m.cross_talk} |"
        )
    c1, cn = mean(m.app_cores for m in one), mean(m.app_cores for m in many)
    print(
        f"\nthroughput ratio {args.processes}/1: **{tn / t1:.2f}×**; rerun p95 {p1:.2f} s → {pn:.2f} s "
        f"({p1 / pn:.2f}× shorter); CPU the app processes got: {c1:.2f} → {cn:.2f} cores ({cn / c1:.2f}×); "
        f"{time.monotonic() - began:.0f} s in all"
    )
    failed = sum(m.errors + m.cross_talk for ms in found.values() for m in ms)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
