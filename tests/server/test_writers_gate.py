"""Writing ("Continue my sentence") and knock-outs wait their turn at the admission gate like every heavy run.

Before, they counted as light work: 30 tabs writing 80 tokens at temperature 1 all ran at once, each took 11.3 s
(0.5 s alone), and a bystander's default Explorer page took 5.6 s instead of 0.1 s. Here 30 tabs of one server write
at once while a bystander reloads the default page: its median load stays under half a second, and nine loads in ten
under a second (this project's 2-core machines are shared; the slowest load is printed, not asserted).
"""

from __future__ import annotations

import statistics
import threading
import time

from harness.server import StreamlitServer
from harness.session import Session

WRITERS = 30
NEW_TOKENS = 80
BYSTANDER_LIMIT_S = 0.5  # its median load; a tenth of its loads may take up to twice that on a shared machine
TEXT = "The cat sat on the mat. The cat sat on the mat."
WRITE_QUERY = f"model=own&text={TEXT.replace(' ', '+')}"


def _writer_widgets(session: Session, seed: int) -> list:
    return [
        session.widget("w_rh_write", int_value=NEW_TOKENS),
        session.widget("w_rh_temperature", double_value=1.0),
        session.widget("w_rh_sample_seed", int_value=seed),
        session.widget("w_rh_continue", trigger_value=True),
    ]


def _write(port: int, seed: int, go: threading.Event, results: list) -> None:
    with Session(port, WRITE_QUERY, timeout=240, page="Real_heads") as session:
        first = session.run()
        go.wait(60)
        wrote = session.run(_writer_widgets(session, seed))
        results.append((first, wrote))


def _bystander_loads(port: int, until: threading.Event, times: list) -> None:
    """A new tab opening the default Explorer page, again and again, while the writers write."""
    while not until.is_set():
        with Session(port, timeout=60) as tab:
            result = tab.run()
        assert result.ok, result.errors or result.status
        times.append(result.seconds)
        time.sleep(0.2)


def test_a_bystanders_default_page_stays_quick_while_thirty_tabs_write():
    with StreamlitServer() as server:
        with Session(server.port, timeout=60) as warm:  # the default page's caches, as on a used server
            assert warm.run().ok
        with Session(server.port, WRITE_QUERY, timeout=120, page="Real_heads") as warm:
            assert warm.run().ok
        alone = [Session(server.port, timeout=60).connect() for _ in range(3)]
        quiet = [tab.run().seconds for tab in alone]
        for tab in alone:
            tab.close()
        go, done, results, times = threading.Event(), threading.Event(), [], []
        writers = [threading.Thread(target=_write, args=(server.port, k, go, results)) for k in range(WRITERS)]
        for thread in writers:
            thread.start()
        time.sleep(3)  # every writer's page loaded (it waits for go)
        go.set()
        time.sleep(1)  # the writers' runs have begun
        bystander = threading.Thread(target=_bystander_loads, args=(server.port, done, times))
        bystander.start()
        for thread in writers:
            thread.join(300)
        done.set()
        bystander.join(60)
        log = server.log_text()
    wrote = [w for _, w in results]
    p90 = statistics.quantiles(times, n=10)[-1] if len(times) >= 2 else max(times, default=0.0)
    print(
        f"\nbystander alone {statistics.median(quiet):.2f} s; under {WRITERS} writers: {len(times)} loads, median "
        f"{statistics.median(times):.2f} s, 90th percentile {p90:.2f} s, slowest {max(times):.2f} s; writers' runs: "
        f"median {statistics.median(w.seconds for w in wrote):.1f} s, slowest {max(w.seconds for w in wrote):.1f} s"
    )
    assert len(results) == WRITERS and all(w.ok for w in wrote), [w.errors or w.status for w in wrote if not w.ok]
    assert all(any("The model writes" in t for t in w.texts) for w in wrote), "every writer got its continuation"
    assert "Traceback" not in log
    assert len(times) >= 5, times
    # Before: median 1.56 s, slowest 16.2 s here (5.6 s in the run); after: median 0.13–0.20 s.
    assert statistics.median(times) < BYSTANDER_LIMIT_S, sorted(times)
    assert p90 < 2 * BYSTANDER_LIMIT_S, sorted(times)
