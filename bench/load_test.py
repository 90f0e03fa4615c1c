"""A class opens the teacher's link at once: N concurrent sessions, each from its own URL, moving widgets.

Each session is a websocket client that speaks Streamlit's own protocol, as the browser does (harness/session.py),
against a real ``streamlit run`` server (harness/server.py). Every rerun is checked (harness/checks.py):

* errors: exception elements, ``st.error`` alerts (the page boundary's message), runs that did not finish
  successfully, timeouts, and "page failed" lines in the server log;
* cross-talk: the URL the server wrote back parses to this session's own settings, the captions carry this
  session's attention shape (b, h, T, T), and the numbers of the "Final output" figure equal an independent
  ``mha_core`` computation (module built from the settings, plain forward) for this session's settings.

It reports rerun latency (p50, p95), the server's peak RSS (VmHWM and a 20 Hz sampler, children included,
harness/rss.py) and its RSS ``--settle-seconds`` after every session closed. Traffic goes to 127.0.0.1 only; every
loop is bounded in count and time, and the server is stopped at the end.

The sessions open their links all at the same instant (a barrier), the worst case; ``--arrive-over SECONDS`` spreads
their arrivals evenly over that time instead (session k opens at k × SECONDS / sessions), as a class arrives.
The server is cold when the first arrives (it imports torch and plotly for its first session); ``--warm`` has one
visitor open the page first, as a teacher who tried the link before the class would.

    python bench/load_test.py [--sessions 30 --seconds 60 --settle-seconds 60 --think 1 3 --arrive-over 0]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import chromium  # noqa: E402
from harness.checks import big_query, check_run, session_query, settings_from_query  # noqa: E402
from harness.drive import SessionLog, drive_session, percentile  # noqa: E402
from harness.rss import RssSampler  # noqa: E402
from harness.server import StreamlitServer, metrics, server_errors  # noqa: E402
from harness.session import Session, hang_up_mid_run  # noqa: E402


@dataclass
class LoadReport:
    sessions: int
    seconds: float
    logs: list[SessionLog]
    server_start_s: float
    idle_mb: float
    peak_mb: float
    closed_mb: float
    settled_mb: float
    settle_seconds: float
    server_errors: list[str]
    disconnect: dict | None = None
    arrive_over: float = 0

    @property
    def errors(self) -> list[str]:
        return [e for log in self.logs for e in log.errors] + self.server_errors

    @property
    def runs(self) -> int:
        return sum(len(log.checks) for log in self.logs)

    @property
    def cross_talk(self) -> int:
        return sum(check.cross_talk for log in self.logs for check in log.checks)

    @property
    def numbers_verified(self) -> int:
        return sum(check.numbers == "equal" for log in self.logs for check in log.checks)


def run_load(
    sessions: int = 30,
    seconds: float = 60,
    settle_seconds: float = 60,
    max_reruns: int = 40,
    think: tuple[float, float] = (1.0, 3.0),
    disconnect_check: bool = True,
    progress=print,
    root: Path = ROOT,
    env: Mapping[str, str] | None = None,
    arrive_over: float = 0,
    warm: bool = False,
) -> LoadReport:
    """Start a server, run the sessions concurrently, close them, watch memory settle; stop the server.

    ``root`` and ``env`` run another checkout or another allocator setting. ``arrive_over``: seconds over which the
    sessions arrive, evenly spaced (0: all at one instant). ``warm``: one visitor's first page before them.
    """
    with StreamlitServer(root=root, env=env) as server, RssSampler(server.pid) as sampler:
        progress(f"server up in {server.started_s:.1f} s on port {server.port}")
        if warm:
            with Session(server.port, urlencode(session_query(sessions))) as teacher:
                teacher.run()
        time.sleep(2)
        idle = server.rss_mb()
        sampler.reset()
        logs = [SessionLog(k, urlencode(session_query(k))) for k in range(sessions)]
        began = time.monotonic()
        drive_all(server.port, logs, began + seconds, max_reruns, think, arrive_over)
        elapsed = time.monotonic() - began
        peak = sampler.peak_mb
        closed = server.rss_mb()
        progress(f"{sessions} sessions done in {elapsed:.0f} s; peak {peak:.0f} MB; settling {settle_seconds:.0f} s")
        settle_end = time.monotonic() + settle_seconds
        while time.monotonic() < settle_end:
            time.sleep(min(1.0, max(0.0, settle_end - time.monotonic())))
        settled = server.rss_mb()
        disconnect = disconnect_mid_run(server) if disconnect_check else None
        return LoadReport(
            sessions=sessions,
            seconds=elapsed,
            logs=logs,
            server_start_s=server.started_s,
            idle_mb=idle,
            peak_mb=peak,
            closed_mb=closed,
            settled_mb=settled,
            settle_seconds=settle_seconds,
            server_errors=server_errors(server.log_text()),
            disconnect=disconnect,
            arrive_over=arrive_over,
        )


def drive_all(
    port: int, logs: list[SessionLog], deadline: float, max_reruns: int, think: tuple[float, float], arrive_over: float
) -> None:
    """One thread per session, all started at one instant (a barrier) or one every ``arrive_over / sessions``
    seconds; until every one has finished (or hung past the deadline by 240 s)."""
    sessions, began = len(logs), time.monotonic()
    start = threading.Barrier(sessions) if not arrive_over else None
    threads = [
        threading.Thread(target=drive_session, args=(k, port, deadline, max_reruns, think, start, log), daemon=True)
        for k, log in enumerate(logs)
    ]
    for k, thread in enumerate(threads):
        time.sleep(max(0.0, began + k * arrive_over / sessions - time.monotonic()))
        thread.start()
    for thread in threads:
        thread.join(timeout=max(1.0, deadline - time.monotonic()) + 240)


def disconnect_mid_run(server: StreamlitServer, repeats: int = 1, settle_seconds: float = 5) -> dict:
    """Hang up mid-run `repeats` times, then check memory, the session count, and that others are still served.

    A leak grows with every hang-up; memory the allocator keeps for reuse does not. So RSS is read after each one.
    """
    before = server.rss_mb()
    after_each = []
    with RssSampler(server.pid, interval=0.02) as sampler:
        for _ in range(repeats):
            hang_up_mid_run(server.port, big_query())
            time.sleep(settle_seconds)
            after_each.append(server.rss_mb())
        peak = sampler.peak_mb
    counts = metrics(server.url)
    query = urlencode(session_query(0))
    with Session(server.port, query) as other:
        result = other.run()
    check = check_run(result, settings_from_query(query))
    return {
        "rss_before_mb": before,
        "peak_mb": peak,
        "rss_after_mb": after_each[-1],
        "rss_after_each_mb": after_each,
        "active_sessions_after": counts.get("active_sessions", float("nan")),
        "other_session_ok": result.ok,
        "other_session_errors": result.errors,
        "other_session_cross_talk": check.cross_talk,
        "server_alive": server.alive(),
    }


def cold_start(query: str = "", timeout: float = 180) -> dict[str, float]:
    """Seconds from the server process's start to the first page fully rendered in headless Chromium.

    The browser is started first (a student's browser is already open). "Fully rendered": the script has
    finished (``data-test-script-state="notRunning"``) and every plotly chart on the page has drawn its SVG.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = chromium.launch(playwright)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        begin = time.monotonic()
        with StreamlitServer(start_timeout=timeout) as server:
            healthy = time.monotonic() - begin
            page.goto(f"{server.url}/?{query}", timeout=timeout * 1000)
            chromium.wait_for_charts(page, timeout)
            rendered = time.monotonic() - begin
            charts = page.locator(".mha-chart").count()
            page.goto(f"{server.url}/?{query}", timeout=timeout * 1000)  # a second student: modules imported
            second_begin = time.monotonic()
            chromium.wait_for_charts(page, timeout)
            second = time.monotonic() - second_begin
        browser.close()
    return {"healthy_s": healthy, "first_page_s": rendered, "charts": charts, "warm_page_s": second}


def markdown_report(report: LoadReport) -> str:
    firsts = [log.first for log in report.logs if log.first is not None]
    reruns = [s for log in report.logs for s in log.reruns]
    arrival = f"arriving evenly over {report.arrive_over:.0f} s" if report.arrive_over else "arriving at one instant"
    rows = [
        (f"sessions (concurrent, each its own URL, {arrival})", f"{report.sessions}"),
        ("duration", f"{report.seconds:.0f} s"),
        ("script runs (first loads + widget changes)", f"{report.runs} ({len(firsts)} + {len(reruns)})"),
        ("errors (exceptions, st.error, failed runs, server log)", f"{len(report.errors)}"),
        ("cross-talk (runs showing another session's URL, shape or numbers)", f"{report.cross_talk}"),
        ("runs whose output numbers were checked against mha_core", f"{report.numbers_verified}"),
        ("first-load latency p50 / p95", f"{percentile(firsts, 50):.2f} s / {percentile(firsts, 95):.2f} s"),
        ("rerun latency p50 / p95", f"{percentile(reruns, 50):.2f} s / {percentile(reruns, 95):.2f} s"),
        ("server start (process → healthy)", f"{report.server_start_s:.1f} s"),
        ("server RSS idle", f"{report.idle_mb:.0f} MB"),
        ("server peak RSS (VmHWM, children included)", f"{report.peak_mb:.0f} MB"),
        ("server RSS when all sessions had closed", f"{report.closed_mb:.0f} MB"),
        (f"server RSS {report.settle_seconds:.0f} s later", f"{report.settled_mb:.0f} MB"),
    ]
    if report.disconnect:
        d = report.disconnect
        rows.append(
            (
                "hang-up mid-run (16 heads × 512 tokens): RSS before / peak / after",
                f"{d['rss_before_mb']:.0f} / {d['peak_mb']:.0f} / {d['rss_after_mb']:.0f} MB",
            )
        )
        rows.append(("sessions still active after the hang-up", f"{d['active_sessions_after']:.0f}"))
        rows.append(
            (
                "after the hang-up, another session is served correctly",
                "yes" if d["other_session_ok"] and not d["other_session_cross_talk"] else "NO",
            )
        )
    lines = ["| measure | value |", "| --- | --- |"] + [f"| {name} | {value} |" for name, value in rows]
    if report.errors:
        lines += ["", "Errors (first 10):", ""] + [f"- {e}" for e in report.errors[:10]]
    details = [d for log in report.logs for d in log.cross_talk]
    if details:
        lines += ["", "Cross-talk (first 10):", ""] + [f"- {d}" for d in details[:10]]
    return "\n".join(lines)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60, help="how long the sessions keep moving widgets")
    parser.add_argument("--settle-seconds", type=float, default=60, help="wait after closing before the last RSS")
    parser.add_argument("--max-reruns", type=int, default=40, help="widget changes per session, at most")
    parser.add_argument(
        "--think",
        type=float,
        nargs=2,
        default=(1.0, 3.0),
        metavar=("MIN", "MAX"),
        help="seconds a student waits between two widget changes",
    )
    parser.add_argument(
        "--arrive-over",
        type=float,
        default=0,
        metavar="SECONDS",
        help="spread the sessions' arrivals evenly over this many seconds (0: all at one instant)",
    )
    parser.add_argument("--warm", action="store_true", help="one visitor opens the page before the sessions arrive")
    parser.add_argument("--server-mb", type=int, default=None, help="MHA_SERVER_MB for the server (the gate's budget)")
    parser.add_argument("--no-disconnect-check", action="store_true")
    parser.add_argument(
        "--cold-start",
        action="store_true",
        help="only measure the cold start (server process → first page rendered in Chromium)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 200 or not 0 < args.seconds <= 1800 or not 0 <= args.settle_seconds <= 600:
        parser.error("sessions 1–200, seconds 0–1800, settle-seconds 0–600")
    if not 0 <= args.arrive_over <= args.seconds:
        parser.error("arrive-over 0 to --seconds: every session arrives before the run ends")
    progress = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    if args.cold_start:
        found = cold_start()
        print(
            "| cold start | seconds |\n| --- | --- |\n"
            f"| server process → healthy | {found['healthy_s']:.1f} |\n"
            f"| server process → first page fully rendered ({found['charts']} charts) | "
            f"{found['first_page_s']:.1f} |\n"
            f"| the next visitor's page, fully rendered | {found['warm_page_s']:.1f} |"
        )
        return 0
    report = run_load(
        sessions=args.sessions,
        seconds=args.seconds,
        settle_seconds=args.settle_seconds,
        max_reruns=args.max_reruns,
        think=tuple(args.think),
        disconnect_check=not args.no_disconnect_check,
        progress=progress,
        arrive_over=args.arrive_over,
        warm=args.warm,
        env={"MHA_SERVER_MB": str(args.server_mb)} if args.server_mb else None,
    )
    arrival = f"arriving over {args.arrive_over:.0f} s" if args.arrive_over else "arriving at one instant"
    arrival += " at a warm server" if args.warm else " at a cold server"
    print(
        f"### Load test: {args.sessions} sessions {arrival}, {args.seconds:.0f} s, 2 CPU cores shared with the "
        "server and the clients\n"
    )
    print(markdown_report(report))
    return 0 if not report.errors and not report.cross_talk else 1


if __name__ == "__main__":
    sys.exit(main())
