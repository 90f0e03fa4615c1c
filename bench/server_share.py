"""The server's share of one explorer rerun on a cache miss, by part, at 8 heads × 512 tokens or at the defaults.

The page runs under AppTest; every cache is emptied before each rerun (a new student's settings). The parts are
timed in place, around the functions that do them, in the script thread:

* forward: ``runs.run_explorer`` (the traced module run);
* figures: ``attention_explorer.build_view`` (every panel built), of which downsampling (``block_reduce``)
  and plotly's figure objects (``style.to_figure``) are shown on their own;
* serialising: ``chart.draw`` (plotly's ``to_json``, Streamlit's identity hash of the bytes, the protobuf);
* the whole page body (``boundary.run_page``).

    python bench/server_share.py [--repeats 5] [--defaults]
"""

from __future__ import annotations

import argparse
import collections
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rerun_cost  # noqa: E402  (sets up the path and times boundary.run_page)
import streamlit as st  # noqa: E402

from explorer.glue.frame import chart  # noqa: E402
from explorer.glue.memory import caches
from explorer.views import attention_explorer  # noqa: E402
from explorer.views.figures import heatmap_traces, style  # noqa: E402
from mha_core.runs import forward as runs  # noqa: E402

CASES = {
    "8 heads × 512 tokens": {"num_heads": "8", "num_tokens": "512", "context_length": "1024", "input": "random"},
    "the defaults (the book, 2 heads × 6 tokens)": {},
}
SECONDS: dict[str, float] = collections.defaultdict(float)


def timed(owner, name: str, part: str) -> None:
    """Wrap ``owner.name`` so that its time adds to ``SECONDS[part]`` (outermost calls only)."""
    inner = getattr(owner, name)
    depth = [0]

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        depth[0] += 1
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                SECONDS[part] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--defaults", action="store_true", help="the book's defaults instead of 8 × 512")
    args = parser.parse_args(argv)
    rerun_cost.quiet_logs()
    timed(runs, "run_explorer", "forward")
    timed(attention_explorer, "build_view", "figures")
    timed(heatmap_traces, "block_reduce", "of which downsampling")
    timed(style, "to_figure", "of which plotly figure objects")
    timed(chart, "draw", "serialising (the chart element)")
    name, query = list(CASES.items())[1 if args.defaults else 0]
    at = rerun_cost.open_page("app.py", query)
    rows: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(args.repeats):
        st.cache_data.clear()
        st.cache_resource.clear()
        caches.clear_all()
        SECONDS.clear()
        rows["page body (boundary.run_page)"].append(rerun_cost.rerun_seconds(at))
        for part in ("forward", "figures", "of which downsampling", "of which plotly figure objects"):
            rows[part].append(SECONDS[part])
        rows["serialising (the chart element)"].append(SECONDS["serialising (the chart element)"])
    print(f"| {name}, cache miss, median of {args.repeats} | ms |")
    print("|---|---:|")
    for part, values in rows.items():
        print(f"| {part} | {statistics.median(values) * 1e3:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
