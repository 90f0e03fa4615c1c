"""Server time of a rerun on every page, as a ratio to the floor for the same work, measured side by side.

For each page, at the defaults and at 8 heads × 64 tokens, the page runs under Streamlit's AppTest, and the time of
the page's body is taken inside the script thread (``boundary.run_page``: every st call, the figures' JSON included,
as the server runs it; AppTest's own polling and parsing are left out):

* miss: a rerun after the page's caches are cleared (the module is built and run, every figure is drawn);
* hit: the same rerun again, every cache warm (what thirty students on one link mostly get).

The floor is what no implementation can avoid: one traced forward pass of the settings' module, plus turning the
numbers the page shows (every array in its figures, decoded from what was sent) into JSON text. Miss and hit are the
medians of ``--repeats`` rounds, interleaved, so a busy machine slows both alike; the floor's two parts are timed by
the Cost page's own loop (``mha_core.runs.profiling.median_seconds``: a warm-up, then the median of ``--repeats``
calls).

    python bench/rerun_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from explorer.glue.cached import training_runs  # noqa: E402, F401
from explorer.glue.frame import boundary  # noqa: E402, F401  (boundary sets torch's threads, as the server does)
from explorer.glue.frame.chart import ELEMENT, figure_of, is_chart  # noqa: E402
from explorer.glue.memory import caches  # noqa: E402
from explorer.glue.state.settings import parse_query  # noqa: E402
from explorer.views.figures import decode_array  # noqa: E402
from mha_core.runs import forward as runs  # noqa: E402
from mha_core.runs.profiling import median_seconds  # noqa: E402

PAGES = {
    "Explorer": "app.py",
    "Step through (step 7)": "pages/1_Step_through.py",
    "Heads and references": "pages/2_Heads_and_references.py",
    "Masks and cross-attention": "pages/3_Masks_and_cross_attention.py",
    "Knobs that teach": "pages/4_Knobs_that_teach.py",
    "Trained heads (after training)": "pages/5_Trained_heads.py",
    "Cost (after Measure)": "pages/6_Cost.py",
}
PAGE_QUERY = {"pages/1_Step_through.py": {"step": "7"}, "pages/6_Cost.py": {"max_tokens": "128"}}
CPU = torch.device("cpu")
SETTINGS = {
    "defaults": {},
    "8 heads × 64 tokens": {"num_heads": "8", "d_out": "64", "num_tokens": "64", "input": "random"},
}


_BODY_SECONDS: list[float] = []
_run_page = boundary.run_page


def charts_of(at) -> list:
    """The page's chart elements (the sidebar's history guard is a component too, and no chart)."""
    return [element for element in at.get(ELEMENT) if is_chart(element.proto)]


def _timed_run_page(main, **options) -> None:
    """boundary.run_page, timed (``options`` as run_page takes them): the server's work for one rerun of the page."""
    start = time.perf_counter()
    try:
        _run_page(main, **options)
    finally:
        _BODY_SECONDS.append(time.perf_counter() - start)


boundary.run_page = _timed_run_page  # the pages look it up at run time


def rerun_seconds(at: AppTest) -> float:
    _BODY_SECONDS.clear()
    at.run()
    if len(_BODY_SECONDS) != 1:
        raise RuntimeError(f"expected one page run, timed {len(_BODY_SECONDS)}")
    return _BODY_SECONDS[0]


def _shown_arrays(at: AppTest) -> list[np.ndarray]:
    """Every numeric array in the figures the page sent: the numbers a student sees."""
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if "bdata" in node:
                found.append(decode_array(node))
                return
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            if node and all(isinstance(v, int | float) for v in node):
                found.append(np.asarray(node, dtype=float))
            else:
                for value in node:
                    walk(value)

    for chart in charts_of(at):
        figure = figure_of(chart.proto)
        for trace in figure["data"]:
            for key in ("z", "x", "y"):
                if key in trace:
                    walk(trace[key])
    return [a for a in found if a.dtype.kind in "fiu"]


def _json_of(arrays: list[np.ndarray]) -> None:
    json.dumps([np.where(np.isfinite(a), a, 0).tolist() for a in arrays])


def _forward(query: dict[str, str]):
    settings = parse_query(query)[0]
    module = runs.build_module(settings.module_spec())
    x, _ = runs.build_input(settings.input_spec())
    return lambda: runs.run_trace(module, x, train=settings.train, seed=settings.seed)


def _clear_page_caches(page: str) -> None:
    if page.endswith("5_Trained_heads.py"):  # the trained model stays (training is not a rerun): its views go
        training_runs.clear_views()
        return
    st.cache_data.clear()
    st.cache_resource.clear()
    caches.clear_all()  # the byte-bounded caches (the Explorer's runs and views) are not Streamlit's


SIDEBAR_ONLY = """
from explorer.glue.frame import boundary, sidebar
from explorer.glue.state import url

def main():
    sidebar.presenter_toggle()
    settings = sidebar.settings_sidebar()
    url.show_notices()
    url.sync_url(settings)

boundary.run_page(main)
"""


def fixed_cost(query: dict[str, str], repeats: int) -> float:
    """A rerun of a page that draws only the shared sidebar (15 widgets, navigation, URL): Streamlit's fixed cost."""
    at = AppTest.from_string(SIDEBAR_ONLY, default_timeout=600)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    return statistics.median(rerun_seconds(at) for _ in range(repeats))


def open_page(page: str, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=600)
    for key, value in {**query, **PAGE_QUERY.get(page, {})}.items():
        at.query_params[key] = value
    at.run()
    if page.endswith("5_Trained_heads.py") and not at.button(key="tr_train").disabled:  # disabled: already trained
        at.button(key="tr_train").click().run()
        for _ in range(200):  # the job trains in its own thread; the page follows it
            if charts_of(at) and not training_runs.current_job():
                break
            time.sleep(0.1)
            at.run()
    if page.endswith("6_Cost.py"):
        at.button(key="cost_measure").click().run()
    at.run()
    errors = [e.value for e in at.error]
    if errors or not charts_of(at):
        raise RuntimeError(f"{page} with {query}: errors {errors}, {len(charts_of(at))} charts")
    return at


def measure(page: str, query: dict[str, str], repeats: int) -> dict[str, float]:
    at = open_page(page, query)
    forward = _forward(query)
    misses, hits = [], []
    for _ in range(repeats):
        _clear_page_caches(page)
        misses.append(rerun_seconds(at))
        hits.append(rerun_seconds(at))
    if at.error:
        raise RuntimeError(f"{page}: {[e.value for e in at.error]}")
    arrays = _shown_arrays(at)
    floor = median_seconds(forward, CPU, repeats) + median_seconds(lambda: _json_of(arrays), CPU, repeats)
    miss, hit = statistics.median(misses), statistics.median(hits)
    return {"miss": miss, "hit": hit, "floor": floor, "charts": len(charts_of(at))}


def quiet_logs() -> None:
    import logging

    for name in ("streamlit", "mha_explorer"):
        logging.getLogger(name).setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    quiet_logs()
    print("| page | settings | charts | floor (ms) | miss (ms) | miss / floor | hit (ms) | hit / floor |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, query in SETTINGS.items():
        print(
            f"| sidebar only: Streamlit's fixed cost of a rerun | {label} | 0 | | | | "
            f"{fixed_cost(query, args.repeats) * 1e3:.0f} | |",
            flush=True,
        )
    for name, page in PAGES.items():
        for label, query in SETTINGS.items():
            m = measure(page, query, args.repeats)
            print(
                f"| {name} | {label} | {m['charts']} | {m['floor'] * 1e3:.1f} | {m['miss'] * 1e3:.0f} | "
                f"{m['miss'] / m['floor']:.1f}× | {m['hit'] * 1e3:.0f} | {m['hit'] / m['floor']:.1f}× |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
