"""Does idle RSS come back after mixed use? A compressed soak: minutes of what an hour of a class does.

One server (production settings, this repository's config). First one visit, so torch and the app are
imported, and its idle RSS is the start. Then, for ``--seconds``, a few clients at once, each repeating a
random visit: the explorer at its defaults or a medium setting with a fresh seed, a large run (16 heads ×
512 tokens), a hostile ``?trained=`` link with a fresh seed (clamped to the page's offer, trained through the
admission gate), or a tab closed in the middle of a large run. Then every client closes, and RSS is read
after ``--settle-seconds``. Prints one JSON line: start, peak and settled RSS in MB, visits, errors; with
``--warm``, RSS also after one visit of each kind (the first use of a page imports what it needs once); with
``--report-every``, a line on stderr that often (elapsed s, RSS now, peak so far, visits, errors), so that an
hour-long run shows whether RSS creeps while the class goes on.

    python bench/soak.py [--seconds 240 --clients 4 --settle-seconds 30]
    python bench/soak.py --seconds 3600 --clients 2 --settle-seconds 420 --report-every 300   (an hour)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.checks import big_query  # noqa: E402
from harness.rss import RssSampler  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402
from harness.session import Session, hang_up_mid_run  # noqa: E402

TRAINED = "previous_token.heads16.layers2.d16.vocab2.len64.steps1.batch1.lr1e-2.seed{seed}.cpu.layer0"


def visit(port: int, kind: str) -> str | None:
    """One visit of this kind; an error message, or None."""
    seed = str(random.randrange(10**6, 10**7))
    if kind == "hang_up":
        hang_up_mid_run(port, big_query())
        return None
    query = {
        "default": {},
        "medium": {"num_heads": "8", "d_out": "64", "num_tokens": "64", "input": "random", "seed": seed},
        "large": big_query(),
        "trained": {"trained": TRAINED.format(seed=seed)},
    }[kind]
    with Session(port, urlencode(query), timeout=300) as session:
        result = session.run(keep_charts=())
    return None if result.ok else f"{kind}: {result.status} {result.errors[:2]}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=240)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--settle-seconds", type=float, default=30)
    parser.add_argument(
        "--idle-clear-seconds",
        type=float,
        default=None,
        help="the server clears its caches after this long without a visitor (explorer.glue.memory.idle; "
        "production: 300); shorten it to see a compressed soak's idle RSS",
    )
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=["default", "medium", "large", "trained", "hang_up"],
        help="only these kinds of visit (to find which one leaves memory behind)",
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="after the first visit, one visit of each kind before the soak, and RSS then (warm_start_mb): what "
        "the first use of each page imports and keeps (pandas, the training code) apart from what use leaves behind",
    )
    parser.add_argument("--server-log", type=Path, default=None, help="the server's log (default: load_test's)")
    parser.add_argument("--report-every", type=float, default=None, help="seconds between progress lines on stderr")
    parser.add_argument(
        "--system-malloc",
        action="store_true",
        help="run the server with PYTHONMALLOC=malloc: Python objects in glibc's heap, which "
        "malloc_trim can hand back, instead of Python's own arenas",
    )
    return parser.parse_args(argv)


def warm_up(port: int, kinds: list[str]) -> None:
    """One visit of each kind, so that what a page imports on its first use is loaded before the soak starts."""
    for kind in dict.fromkeys(kinds):
        error = visit(port, kind)
        assert error is None, error


def report_progress(threads, began: float, deadline: float, every: float, server, sampler, counts, errors) -> None:
    """A JSON line on stderr every ``every`` seconds while the clients run."""
    while any(thread.is_alive() for thread in threads):
        time.sleep(min(every, max(1.0, deadline - time.monotonic())))
        progress = {"elapsed_s": round(time.monotonic() - began), "rss_mb": round(server.rss_mb())}
        progress |= {"peak_mb": round(sampler.peak_mb), "visits": sum(counts.values()), "errors": len(errors)}
        print(json.dumps(progress), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    parser_env = {} if args.idle_clear_seconds is None else {"MHA_IDLE_CLEAR_S": str(args.idle_clear_seconds)}
    env = parser_env | ({"PYTHONMALLOC": "malloc"} if args.system_malloc else {})
    kinds = args.kinds or ["default", "medium", "medium", "large", "trained", "hang_up"]
    counts: dict[str, int] = {k: 0 for k in kinds}
    errors: list[str] = []
    with StreamlitServer(env=env, log_path=args.server_log) as server:
        with Session(server.port, "") as first:
            assert first.run(keep_charts=()).ok
        time.sleep(5)
        start_mb = server.rss_mb()
        warm_mb = None
        if args.warm:
            warm_up(server.port, kinds)
            time.sleep(5)
            warm_mb = server.rss_mb()
        sampler = RssSampler(server.pid).__enter__()
        deadline = time.monotonic() + args.seconds

        def client() -> None:
            while time.monotonic() < deadline:
                kind = random.choice(kinds)
                try:
                    error = visit(server.port, kind)
                except Exception as exc:  # noqa: BLE001 - counted, the soak goes on
                    error = f"{kind}: client {type(exc).__name__}: {exc}"
                counts[kind] += 1
                if error:
                    errors.append(error)

        threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        if args.report_every:
            report_progress(threads, time.monotonic(), deadline, args.report_every, server, sampler, counts, errors)
        for thread in threads:
            thread.join(args.seconds + 400)
        closed_mb = server.rss_mb()
        time.sleep(args.settle_seconds)
        settled_mb = server.rss_mb()
        peak_mb = sampler.peak_mb
        sampler.__exit__()
    print(
        json.dumps(
            {
                "seconds": args.seconds,
                "clients": args.clients,
                "settle_seconds": args.settle_seconds,
                "idle_clear_seconds": args.idle_clear_seconds or "production (explorer.glue.memory.idle)",
                "kinds": kinds,
                "start_mb": round(start_mb),
                "warm_start_mb": None if warm_mb is None else round(warm_mb),
                "peak_mb": round(peak_mb),
                "closed_mb": round(closed_mb),
                "settled_mb": round(settled_mb),
                "visits": counts,
                "errors": errors[:10],
                "error_count": len(errors),
            }
        )
    )
    return 0 if not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
