"""How much memory the server needs for a class, and what holds it.

Each scenario starts a fresh server (``python -m streamlit run app.py`` on 127.0.0.1, this repository's
.streamlit/config.toml), opens its sessions at once as websocket clients (bench/load_test.py), and records
the server's RSS (children included): before, peak (VmHWM reset at the start, plus a 20 Hz sampler), with
the sessions still open, after they close, and after a short settle. Scenarios:

* idle: no session yet (the app's modules, torch included, are imported on the first session);
* largest: one session at ``?num_heads=16&d_out=1024&num_tokens=1024&input=random&batch_size=1&d_in=64``;
* 30 default: thirty sessions on the bare link (the book's example: every session hits one cache entry);
* 30 medium: thirty sessions at ``?num_heads=8&d_out=64&num_tokens=64&input=random``, each with its own seed
  (students who moved the seed: every session misses the cache, which fills to its max_entries);
* 3 largest at once: three students at the largest setting, each with their own seed;
* 30 default + largest: the goal, all in 690 MB (Community Cloud's smallest memory).

First, on a server of its own, every page at its largest link in float32 and in float64 with train mode and dropout
(``--pages-only``: that table alone), each row's estimate beside what the page added, its peak and what stayed.

Then, in a fresh interpreter, a breakdown of the largest setting step by step (imports, module, trace by
step, figure building, the cached view, the .npz download, and what gc and malloc_trim give back), and
the pickled size of one cache entry per scenario.

    python bench/memory_report.py [--sessions 30 --settle-seconds 10 --skip-breakdown]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.rss import RssSampler  # noqa: E402
from harness.server import StreamlitServer, metrics  # noqa: E402
from harness.session import RunResult, Session  # noqa: E402
from harness.visits import LARGEST as LARGEST_QUERY  # noqa: E402
from harness.visits import PAGES, WORST, visit, warm_up  # noqa: E402

LARGEST = "num_heads=16&d_out=1024&num_tokens=1024&input=random&batch_size=1&d_in=64"
MEDIUM = "num_heads=8&d_out=64&num_tokens=64&input=random"
BUDGET_MB = 690  # Streamlit Community Cloud's smallest memory limit


@dataclass
class Scenario:
    name: str
    sessions: int
    before_mb: float
    peak_mb: float
    open_mb: float
    closed_mb: float
    settled_mb: float
    seconds: float
    errors: list[str]
    cache_bytes: dict[str, int]


def open_together(port: int, queries: list[str], timeout: float = 300) -> tuple[list[RunResult], list[Session]]:
    """Open one session per query at the same moment; each loads its page once; all close at the end."""
    results: list[RunResult | None] = [None] * len(queries)
    sessions = [Session(port, query, timeout=timeout) for query in queries]
    start = threading.Barrier(len(queries))

    def load(k: int) -> None:
        try:
            start.wait(timeout=60)
            results[k] = sessions[k].connect().run(keep_charts=())
        except Exception as error:  # noqa: BLE001 - counted below
            results[k] = RunResult(status=f"client {type(error).__name__}: {error}")

    threads = [threading.Thread(target=load, args=(k,), daemon=True) for k in range(len(queries))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout + 60)
    opened = [r if r is not None else RunResult(status="client timeout") for r in results]
    return opened, sessions


def cache_bytes(url: str) -> dict[str, int]:
    """cache_memory_bytes per cache from the server's /_stcore/metrics (entry counts for cache_resource)."""
    found = {}
    for labels, value in metrics(url).items():
        if labels.startswith("cache_memory_bytes{"):
            name = labels.split('cache="', 1)[1].split('"', 1)[0] or labels.split('cache_type="')[1].split('"')[0]
            found[name] = int(value)
    return found


def run_scenario(
    name: str, queries: list[str], settle_seconds: float, root: Path = ROOT, env: dict[str, str] | None = None
) -> Scenario:
    with StreamlitServer(log_path=ROOT / "artifacts" / "streamlit-memory-report.log", root=root, env=env) as server:
        time.sleep(2)
        before = server.rss_mb()
        with RssSampler(server.pid) as sampler:
            began = time.monotonic()
            results, sessions = open_together(server.port, queries) if queries else ([], [])
            seconds = time.monotonic() - began
            time.sleep(1)
            open_mb = server.rss_mb()
            caches = cache_bytes(server.url)
            for session in sessions:
                session.close()
            time.sleep(1)
            peak = sampler.peak_mb
        closed = server.rss_mb()
        time.sleep(settle_seconds)
        settled = server.rss_mb()
        errors = [e for r in results for e in (r.errors or ([] if r.ok else [r.status]))]
    return Scenario(name, len(queries), before, peak, open_mb, closed, settled, seconds, errors, caches)


def scenarios(
    count: int, settle_seconds: float, progress, root: Path = ROOT, env: dict[str, str] | None = None
) -> list[Scenario]:
    plan = [
        ("idle (no session)", []),
        ("largest, one session", [LARGEST]),
        (f"{count} default", [""] * count),
        (f"{count} medium (own seeds)", [f"{MEDIUM}&seed={k}" for k in range(count)]),
        ("3 largest at once (own seeds)", [f"{LARGEST}&seed={k}" for k in range(3)]),
        (f"{count} default + largest", [""] * count + [LARGEST]),
    ]
    done = []
    for name, queries in plan:
        progress(f"scenario: {name}")
        done.append(run_scenario(name, queries, settle_seconds, root, env))
    return done


# --- the breakdown, run in a fresh interpreter --------------------------------------------------------------------

BREAKDOWN = r"""
import ctypes, gc, inspect, json, os, pickle, sys

def status_mb(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0

def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass

def trim():
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)

rows = []
def step(label, fn):
    reset_hwm()
    before = status_mb("VmRSS")
    value = fn()
    rss, peak = status_mb("VmRSS"), max(status_mb("VmHWM"), status_mb("VmRSS"))
    rows.append({"step": label, "rss_mb": round(rss, 1), "peak_mb": round(peak, 1),
                 "peak_above_start_mb": round(peak - before, 1)})
    return value

rows.append({"step": "python", "rss_mb": round(status_mb("VmRSS"), 1)})
torch = step("import torch", lambda: __import__("torch"))
step("import streamlit, plotly", lambda: (__import__("streamlit"), __import__("plotly.graph_objects")))
sys.path.insert(0, sys.argv[1])
step(
    "import explorer, mha_core",
    lambda: (__import__("explorer.views.attention_explorer"), __import__("mha_core.runs.forward")),
)
import numpy as np
from explorer.glue.state import settings as cfg
from explorer.views import attention_explorer
from explorer.views.figures import downsample, style
from mha_core.runs import forward as runs

def view_of(module, settings):
    # one run, then both sections' figures, as the explorer's caches build them
    x, labels = runs.build_input(settings.input_spec())
    run = runs.run_explorer(module, x, labels, train=settings.train, seed=settings.seed, dropout=settings.dropout)
    return [attention_explorer.build_view(run, section=name, batch_index=0, enlarge=None, presenter=False)
            for name in ("attention", "reshapes")]

settings, _ = cfg.parse_query({"num_heads": "16", "d_out": "1024", "num_tokens": "1024", "input": "random",
                               "batch_size": "1", "d_in": "64"})
module = step("build_module (largest)", lambda: runs.build_module(settings.module_spec()))
x, labels = step("build_input", lambda: runs.build_input(settings.input_spec()))
trace = step("run_trace: every step kept", lambda: runs.run_trace(module, x))
seen, steps = set(), {}
for name, tensor in trace.steps.items():
    ptr = tensor.untyped_storage().data_ptr()
    if ptr not in seen:
        seen.add(ptr)
        steps[name] = tensor.untyped_storage().nbytes()
big = {k: v for k, v in steps.items() if v >= 2**20}
attention = step("attention figures from the trace",
                 lambda: attention_explorer.attention_panels(trace, labels, batch_index=0, presenter=False,
                                                 mask_allowed=~module.mask.bool().numpy(), dropout_shown=False))
del attention, trace
step("del trace and figures, gc.collect()", gc.collect)
step("malloc_trim(0)", lambda: ctypes.CDLL("libc.so.6").malloc_trim(0))
view = step("build_view, as cached_view runs it (trace + every figure)",
            lambda: view_of(module, settings))
pickled = len(pickle.dumps(view))
del view
step("after build_view returns: gc.collect()", gc.collect)
step("malloc_trim(0)", lambda: ctypes.CDLL("libc.so.6").malloc_trim(0))

# the figures' colour range and block reduction over the whole (16, 1024, 1024) stack (one head at a time)
trace = runs.run_trace(module, x)
z = trace.numpy("masked_scores")[0]  # (16, 1024, 1024), upper triangle -inf
step("figures: colour range + block mean of (16, 1024, 1024)",
     lambda: (downsample.color_range(z, style.COLOR_KINDS["scores"], "scores", None, None),
              downsample.block_reduce(z, 11, 11, "mean")))
del trace, z
trim()

npz = step("the .npz download (largest): trace + savez_compressed",
           lambda: runs.trace_npz(runs.run_trace(module, x), labels))
npz_mb = len(npz) / 2**20
del npz
trim()

def entry(query):
    s, _ = cfg.parse_query(query)
    v = view_of(runs.build_module(s.module_spec()), s)
    panels_ = [panel for section in v for panel in section.panels]
    return len(pickle.dumps(v)), sum(len(p.figure.to_json()) for p in panels_)
default_entry = entry({})
medium_entry = entry({"num_heads": "8", "d_out": "64", "num_tokens": "64", "input": "random"})
worst_module = runs.build_module(runs.ModuleSpec(d_in=1024, d_out=1024, context_length=2048, num_heads=16))
module_bytes = sum(t.nbytes for t in [*worst_module.parameters(), *worst_module.buffers()])
print(json.dumps({"rows": rows, "trace_steps_over_1MiB": big, "trace_total": sum(steps.values()),
                  "view_pickled": pickled, "npz_mb": npz_mb, "default_entry": default_entry,
                  "medium_entry": medium_entry, "worst_module_bytes": module_bytes,
                  "worst_mask_bytes": worst_module.mask.nbytes, "torch_threads": torch.get_num_threads()}),
      flush=True)
"""


def breakdown() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", BREAKDOWN, str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode:
        raise RuntimeError(f"the breakdown failed:\n{done.stderr[-3000:]}")
    merged: dict = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            merged.update(json.loads(line))
    return merged


# --- every page at its largest link, float32 and float64 (one server, warmed on every page) -------------------------


def page_table(progress, root: Path = ROOT) -> tuple[float, list[dict]]:
    """(warm RSS, one row per page and dtype: fitted tokens, estimate, added, peak and kept MB)."""
    from explorer.glue.memory import budget
    from explorer.glue.state.settings import parse_query

    rows = []
    with StreamlitServer(log_path=ROOT / "artifacts" / "streamlit-memory-report.log", root=root) as server:
        warm = warm_up(server)
        for label, query in (("float32", LARGEST_QUERY), ("float64, train, dropout 0.5", WORST)):
            for k, (page, name) in enumerate(PAGES.items()):
                progress(f"page {page or 'explorer'}, {label}")
                seen = visit(server, page, query | {"seed": str(1000 + k)}, settle_s=2)
                fitted = budget.fitted(name, parse_query(query)[0])
                rows.append(
                    dict(page=budget.PAGE_NAMES[name], dtype=label, tokens=fitted.num_tokens, ok=seen.result.ok)
                    | dict(estimate=budget.need_bytes(name, fitted) / 2**20, added=seen.added_mb)
                    | dict(peak=seen.peak_mb, kept=seen.kept_mb)
                )
            progress(f"page Cost, {label}")
            rows.append(cost_row(server, label, query | {"seed": "1100", "max_tokens": "1024"}))
    return warm, rows


def cost_row(server, label: str, query: dict) -> dict:
    """The Cost page measures on a click: the visit presses Measure."""
    from explorer.glue.memory import budget, measuring
    from explorer.glue.state.settings import parse_query

    seen = visit(server, "Cost", query, settle_s=2, press="cost_measure")
    spec = measuring.cost_spec(parse_query(query)[0], int(query["max_tokens"]))
    return (
        dict(page=budget.PAGE_NAMES["cost"], dtype=label, tokens=spec.max_tokens, ok=seen.result.ok)
        | dict(estimate=budget.cost_need_bytes(spec) / 2**20, added=seen.added_mb)
        | dict(peak=seen.peak_mb, kept=seen.kept_mb)
    )


def page_markdown(warm: float, rows: list[dict]) -> str:
    lines = [
        f"### Every page at its largest link (RSS, MB; warm server {warm:.0f} MB after every page once)",
        "",
        "| page | dtype | tokens (fitted) | estimate | added (measured) | peak | kept after |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['page']} | {r['dtype']} | {r['tokens']} | {r['estimate']:.0f} | {r['added']:.0f} | "
            f"**{r['peak']:.0f}** | {r['kept']:.0f} |" + ("" if r["ok"] else " (errors)")
        )
    return "\n".join(lines)


# --- the report -----------------------------------------------------------------------------------------------------


def markdown(found: list[Scenario], parts: dict | None, title: str = "this checkout") -> str:
    lines = [
        f"### Server memory, {title} (RSS, MB; Community Cloud's smallest limit is {BUDGET_MB} MB)",
        "",
        "| scenario | sessions | before | peak | sessions open | closed | settled | load time | errors |"
        " cache_data bytes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in found:
        data = s.cache_bytes.get("explorer.glue.memory.caches.cached_view", 0)
        lines.append(
            f"| {s.name} | {s.sessions} | {s.before_mb:.0f} | **{s.peak_mb:.0f}** | {s.open_mb:.0f} | "
            f"{s.closed_mb:.0f} | {s.settled_mb:.0f} | {s.seconds:.1f} s | {len(s.errors)} | "
            f"{data / 2**20:.1f} MiB |"
        )
    goal = found[-1]
    verdict = "fits" if goal.peak_mb <= BUDGET_MB else "does NOT fit"
    lines += ["", f"Goal ({goal.name}) peaks at {goal.peak_mb:.0f} MB: {verdict} in {BUDGET_MB} MB."]
    errors = [e for s in found for e in s.errors]
    if errors:
        lines += ["", "Errors:"] + [f"- {e}" for e in errors[:10]]
    if parts:
        lines += [
            "",
            "### What holds memory: the largest setting, step by step (fresh interpreter)",
            "",
            "| step | RSS after | peak during | peak above its start |",
            "| --- | --- | --- | --- |",
        ]
        for row in parts["rows"]:
            lines.append(
                f"| {row['step']} | {row['rss_mb']:.0f} | {row.get('peak_mb', row['rss_mb']):.0f} | "
                f"{row.get('peak_above_start_mb', 0):+.0f} |"
            )
        big = ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in parts["trace_steps_over_1MiB"].items())
        lines += [
            "",
            f"- Trace tensors (distinct storages ≥ 1 MiB): {big}; all storages together "
            f"{parts['trace_total'] / 2**20:.0f} MiB.",
            f"- One cache_data entry (pickled ExplorerView): largest {parts['view_pickled'] / 2**20:.2f} MiB, "
            f"default {parts['default_entry'][0] / 2**20:.2f} MiB, medium {parts['medium_entry'][0] / 2**20:.2f} MiB.",
            f"- The .npz download of the largest trace is {parts['npz_mb']:.0f} MiB (held in memory by Streamlit "
            "while it is served).",
            f"- Worst cache_resource entry (d_in = d_out = 1024, context_length 2048): "
            f"{parts['worst_module_bytes'] / 2**20:.0f} MiB, of which the mask buffer is "
            f"{parts['worst_mask_bytes'] / 2**20:.0f} MiB; cached_module keeps at most 4 (max_entries=4, ttl=600).",
            f"- torch intra-op threads in a fresh process: {parts.get('torch_threads')}.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--settle-seconds", type=float, default=10)
    parser.add_argument("--skip-breakdown", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    parser.add_argument("--pages-only", action="store_true", help="only every page at its largest link")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 100 or not 0 <= args.settle_seconds <= 600:
        parser.error("sessions 1–100, settle-seconds 0–600")
    progress = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    warm, rows = page_table(progress)
    print(page_markdown(warm, rows), flush=True)
    if args.pages_only:
        return 0
    found = scenarios(args.sessions, args.settle_seconds, progress)
    parts = None
    if not args.skip_breakdown:
        progress("breakdown of the largest setting")
        try:
            parts = breakdown()
        except (RuntimeError, subprocess.TimeoutExpired) as error:  # the scenarios above still count
            progress(f"the breakdown failed: {error}")
    print(markdown(found, parts), flush=True)
    raw = {"scenarios": [s.__dict__ for s in found], "breakdown": parts}
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
