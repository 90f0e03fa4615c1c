"""A class's morning on one server (issue 43): phases back to back, each tab with a seed or sentence of its own.

Used by ``tests/server/test_morning.py`` (a shorter morning that fits CI) and ``bench/class_morning.py`` (the whole one,
its last result in docs/memory.md). Each phase returns the runs it made; ``run_morning`` measures the server's peak
RSS (children included) during each phase and its settled RSS after it.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlencode

from harness.rss import RssSampler
from harness.session import RunResult, Session
from harness.visits import LARGEST, WORST

TEXT = "The quick brown fox jumps over the lazy dog number {k}, and the dog sees the fox again at {k}."
NOT_OFFERED = "the .npz download is offered while"  # the Explorer's words where the file does not fit the budget
DOWNLOAD = dict(num_heads="16", d_out="256", num_tokens="256", input="random", batch_size="1", section="downloads")


@dataclass
class Size:
    """How big a morning is: tabs per phase and the idle pause (the issue's morning is ``FULL``)."""

    real_heads: int = 10
    variants: int = 20
    cost: int = 2
    downloads: int = 20
    idle_s: float = 120.0
    heavy_at_once: int = 6


FULL = Size()
SHORT = Size(real_heads=4, variants=6, cost=2, downloads=8, idle_s=10.0, heavy_at_once=6)


@dataclass
class Phase:
    name: str
    peak_mb: float
    kept_mb: float
    results: list[RunResult] = field(default_factory=list)

    def errors(self) -> list[str]:
        return [e for r in self.results for e in (r.errors or ([] if r.ok else [f"run status {r.status}"]))]


def at_once(tabs: list) -> list[RunResult]:
    """Run each ``tab()`` in a thread of its own, started together; their results in order (a lost tab: timeout)."""
    results: list[RunResult | None] = [None] * len(tabs)
    start = threading.Barrier(len(tabs))

    def one(k: int) -> None:
        start.wait(60)
        try:
            results[k] = tabs[k]()
        except Exception as error:  # noqa: BLE001 - a morning counts every failure as the tab's error
            results[k] = RunResult(status=f"client {type(error).__name__}: {error}")

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(tabs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(900)
    return [r if r is not None else RunResult(status="timeout") for r in results]


def open_tab(server, page: str, query: dict, press: str | None = None) -> RunResult:
    """One tab: open ``page?query``, run it (then press ``press``), close."""
    with Session(server.port, urlencode(query), page=page, timeout=600) as session:
        result = session.run()
        if press is not None and result.ok:
            result = session.run([session.widget(press, trigger_value=True)])
    return result


def heavy(server, seed: int = 300) -> list[RunResult]:
    """4 × the largest Explorer link, 2 × the worst Follow a token link, one after another."""
    plan = [("", LARGEST | {"seed": str(seed + k)}) for k in range(4)]
    plan += [("Follow_a_token", WORST | {"seed": str(seed + 10 + k)}) for k in range(2)]
    return [open_tab(server, page, query) for page, query in plan]


def real_heads_tab(server, k: int) -> RunResult:
    """Real heads on the shipped model, its own sentence, 4 heads knocked out; repeat the sentence, write 80 tokens."""
    query = {"model": "own", "text": TEXT.format(k=k), "ablate": "0.0,0.1,1.0,1.1"}
    with Session(server.port, urlencode(query), page="Real_heads", timeout=600) as session:
        result = session.run()
        if not result.ok:
            return result
        result = session.run([session.widget("w_rh_repeat", trigger_value=True)])
        if not result.ok:
            return result
        write = session.widget("w_rh_write", double_value=80.0)
        return session.run([write, session.widget("w_rh_continue", trigger_value=True)])


def real_heads(server, size: Size) -> list[RunResult]:
    return at_once([lambda k=k: real_heads_tab(server, k) for k in range(size.real_heads)])


def variants(server, size: Size) -> list[RunResult]:
    """Attention variants at its largest link, every tab its own seed, at once."""
    return at_once(
        [
            lambda k=k: open_tab(server, "Attention_variants", WORST | {"seed": str(400 + k)})
            for k in range(size.variants)
        ]
    )


def cost(server, size: Size) -> list[RunResult]:
    """The Cost measurement at its worst link, at once."""
    query = WORST | {"max_tokens": "1024"}
    return at_once(
        [
            lambda k=k: open_tab(server, "Cost", query | {"seed": str(500 + k)}, press="cost_measure")
            for k in range(size.cost)
        ]
    )


def download_tab(server, k: int) -> RunResult:
    """Press "Download the trace" and fetch the file, as a browser does; a refused or lost file is an error."""
    with Session(server.port, urlencode(DOWNLOAD | {"seed": str(600 + k)}), timeout=600) as session:
        result = session.run()
        if result.ok and not result.downloads and any(NOT_OFFERED in t for t in result.texts):
            return result  # a smaller server: the page says the file does not fit its budget
        if not result.ok or not result.downloads:
            result.errors = (result.errors or []) + ["no download button"]
            return result
        (file_id,) = result.downloads.values()
        (url,) = session.download(file_id)
        if not url.startswith("/media/"):
            result.errors = (result.errors or []) + [f"download refused: {url}"]
            return result
        with urllib.request.urlopen(f"{server.url}{url}", timeout=120) as response:
            if not response.read():
                result.errors = (result.errors or []) + ["an empty file"]
    return result


def downloads(server, size: Size) -> list[RunResult]:
    return at_once([lambda k=k: download_tab(server, k) for k in range(size.downloads)])


def heaviest_at_once(server, size: Size, seed: int = 700) -> list[RunResult]:
    """The heaviest links, at once: the Explorer's largest, Follow a token's, Knobs' and Attention variants' worst."""
    plan = [
        ("", LARGEST),
        ("", WORST),
        ("Follow_a_token", WORST),
        ("Knobs_that_teach", WORST),
        ("Step_through", WORST),
        ("Attention_variants", WORST),
    ]
    tabs = [plan[k % len(plan)] for k in range(size.heavy_at_once)]
    return at_once(
        [lambda k=k, p=p, q=q: open_tab(server, p, q | {"seed": str(seed + k)}) for k, (p, q) in enumerate(tabs)]
    )


def settled_mb(server, within_mb: float = 2.0, limit_s: float = 8.0) -> float:
    """The server's RSS once it stops falling (two readings 0.5 s apart within ``within_mb``), at most ``limit_s``."""
    last, deadline = server.rss_mb(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = server.rss_mb()
        if abs(now - last) <= within_mb:
            return now
        last = now
    return last


def phases(size: Size) -> list[tuple[str, object]]:
    """The morning, in order: (name, a function of the server that returns its runs)."""
    return [
        ("heavy", heavy),
        ("Real heads", lambda server: real_heads(server, size)),
        ("Attention variants", lambda server: variants(server, size)),
        ("Cost", lambda server: cost(server, size)),
        ("downloads", lambda server: downloads(server, size)),
        ("idle", lambda server: time.sleep(size.idle_s) or []),
        ("heaviest at once", lambda server: heaviest_at_once(server, size)),
    ]


def run_morning(server, size: Size, report=print) -> list[Phase]:
    """Every phase on ``server`` back to back; each one's peak (RssSampler) and settled RSS."""
    done = []
    for name, phase in phases(size):
        with RssSampler(server.pid) as sampler:
            results = phase(server)
            peak = sampler.peak_mb
        done.append(Phase(name, peak, settled_mb(server), results))
        report(f"{name}: peak {peak:.0f} MB, kept {done[-1].kept_mb:.0f} MB, errors {done[-1].errors()[:2]}")
    return done
