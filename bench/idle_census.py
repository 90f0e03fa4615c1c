"""What holds an idle server's memory after a class? A soak with a memory census before, during and after.

One server with bench/census on its PYTHONPATH (its ``sitecustomize`` answers census requests from inside the
server; the app knows nothing of it). A census after the first visit; then ``--seconds`` of visits of ``--kinds``
(bench/soak.py's visits) by 2 clients; a census when they have closed, another after ``--settle-seconds`` (the
idle clear runs after ``--idle-clear-seconds``), and a last one after a full collection and ``malloc_trim`` in the
server. Prints one JSON line per census: RSS, RSS by mapping, glibc's heap in use and free, arenas, Python's blocks,
gc-tracked objects by type, torch tensors, sessions. glibc's heap in use returning to its start value is the sign
that nothing leaks; RSS above it with the heap at its start is free memory glibc keeps.

    python bench/idle_census.py [--kinds medium --seconds 60 --settle-seconds 110 --idle-clear-seconds 70]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.soak import visit  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402
from harness.session import Session  # noqa: E402


def ask(request: Path, folder: Path, name: str, collect: bool = False) -> dict:
    """One census from the server (waits for its answer)."""
    answer = folder / f"{name}.json"
    request.write_text(str(answer) + ("+collect" if collect else ""))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if answer.exists() and answer.stat().st_size:
            time.sleep(0.2)
            return json.loads(answer.read_text())
        time.sleep(0.2)
    raise TimeoutError(f"no census {name} within 120 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", nargs="+", default=["medium"])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--settle-seconds", type=float, default=110)
    parser.add_argument("--idle-clear-seconds", type=float, default=70)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="mha-census-"))
    request = folder / "request"
    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "bench" / "census"), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": pythonpath, "MHA_CENSUS_REQUEST": str(request)}
    env["MHA_IDLE_CLEAR_S"] = str(args.idle_clear_seconds)
    visits, errors = [0], []
    with StreamlitServer(env=env, log_path=folder / "server.log") as server:
        with Session(server.port, "") as first:
            assert first.run(keep_charts=()).ok
        time.sleep(5)

        def report(name: str, collect: bool = False) -> None:
            result = {"at": name, "rss_mb": round(server.rss_mb()), "visits": visits[0], "errors": len(errors)}
            print(json.dumps(result | ask(request, folder, name, collect)), flush=True)

        report("after the first visit")
        deadline = time.monotonic() + args.seconds

        def client() -> None:
            while time.monotonic() < deadline:
                error = visit(server.port, random.choice(args.kinds))
                visits[0] += 1
                if error:
                    errors.append(error)

        threads = [threading.Thread(target=client, daemon=True) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(args.seconds + 400)
        report("every client closed")
        time.sleep(args.settle_seconds)
        report(f"{args.settle_seconds:.0f} s later")
        report("after gc.collect and malloc_trim in the server", collect=True)
    return 0 if not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
