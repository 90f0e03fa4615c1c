"""Does serialising the explorer's figures leave memory behind? plotly's JSON engines side by side.

``st.plotly_chart`` turns every figure into JSON with ``plotly.io.to_json``. plotly's default engine ("auto")
takes orjson when it is installed; explorer.glue.frame.server_setup pins ``json``. For each engine, in one process:
build the explorer's figures for ``--runs`` runs at 8 heads × 64 tokens, each with a fresh seed (what a class that moves
the seed does), serialise them as Streamlit does, drop everything, collect, hand freed memory back, and read
glibc's heap in use (mallinfo2), Python's allocated blocks and RSS. Then the time to serialise one figure (median
of 5 passes over one run's figures; run it on a quiet machine).

    python bench/engine_leak.py [--runs 100]

Prints one JSON line per engine: heap in use after 1 run and after all of them, the growth per run, ms/figure.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import plotly.io  # noqa: E402
import plotly.tools  # noqa: E402

from explorer.glue.state.settings import Settings  # noqa: E402
from explorer.views import attention_explorer  # noqa: E402
from mha_core.runs import forward as runs  # noqa: E402


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallinfo2.restype = _Mallinfo2


def heap() -> dict[str, float]:
    """After a full collection and malloc_trim: glibc's heap in use, Python's blocks, RSS (MB)."""
    gc.collect()
    _LIBC.malloc_trim(0)
    status = Path("/proc/self/status").read_text().splitlines()
    rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    return {
        "in_use_mb": _LIBC.mallinfo2().uordblks / 2**20,
        "blocks": sys.getallocatedblocks(),
        "rss_mb": rss_kb / 1024,
    }


def figures(seed: int) -> list:
    settings = Settings(num_heads=8, d_out=64, num_tokens=64, context_length=64, input="random", seed=seed)
    module = runs.build_module(settings.module_spec())
    x, labels = runs.build_input(settings.input_spec())
    run = runs.run_explorer(module, x, labels, train=settings.train, seed=settings.seed, dropout=settings.dropout)
    views = [
        attention_explorer.build_view(run, section=s, batch_index=0, enlarge=None, presenter=False)
        for s in attention_explorer.SECTIONS
    ]
    return [panel.figure for view in views for panel in view.figures()]


def send(figure, engine: str) -> str:
    """What st.plotly_chart does with a figure (streamlit/elements/plotly_chart.py)."""
    plotly.io.json.config.default_engine = engine
    as_dict = plotly.tools.return_figure_from_figure_or_data(figure, validate_figure=True)
    return plotly.io.to_json(as_dict, validate=False)


def measure(engine: str, n_runs: int) -> dict:
    for figure in figures(1):
        send(figure, engine)
    first = heap()
    for _ in range(n_runs):
        for figure in figures(random.randrange(10**6, 10**7)):
            send(figure, engine)
    last = heap()
    sample = figures(2)
    passes = []
    for _ in range(5):
        begin = time.perf_counter()
        for figure in sample:
            send(figure, engine)
        passes.append((time.perf_counter() - begin) / len(sample) * 1000)
    ms = statistics.median(passes)
    return {
        "engine": engine,
        "runs": n_runs,
        "in_use_mb_after_1": round(first["in_use_mb"], 1),
        f"in_use_mb_after_{n_runs}": round(last["in_use_mb"], 1),
        "in_use_kb_per_run": round((last["in_use_mb"] - first["in_use_mb"]) * 1024 / n_runs, 1),
        "python_blocks_per_run": round((last["blocks"] - first["blocks"]) / n_runs),
        "rss_mb_growth": round(last["rss_mb"] - first["rss_mb"], 1),
        "ms_per_figure": round(ms, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args(argv)
    engines = ["json"]
    try:
        import orjson

        engines.append("orjson")
        print(json.dumps({"orjson": orjson.__version__}))
    except ImportError:
        print(json.dumps({"orjson": "not installed: only the json engine is measured"}))
    for engine in engines:
        print(json.dumps(measure(engine, args.runs)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
