"""Bytes of figure data the explorer sends per rerun, at default, medium and maximum settings.

Each figure is measured as the JSON plotly hands to the browser (``figures.figure_nbytes``). A rerun sends the open
section only (attention, or reshapes and output). The build time is printed too, measured in the same run: the
module's forward pass once, then each section's figures drawn from it (the server's cost of a cache miss).

    python bench/figure_bytes.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.glue.state.settings import parse_query  # noqa: E402
from explorer.views import attention_explorer, figures  # noqa: E402
from mha_core.runs import forward as runs  # noqa: E402

CASES = {
    "default: the book, 2 heads × 6 tokens": {},
    "medium: 8 heads × 64 tokens, d_out 64": dict(num_heads="8", d_out="64", num_tokens="64", input="random"),
    "maximum: 16 heads × 1024 tokens, d_out 1024": dict(
        num_heads="16", d_out="1024", num_tokens="1024", input="random", batch_size="1", d_in="64"
    ),
}


def main() -> None:
    warm = parse_query({})[0]  # imports and first calls, outside the timings
    warm_run = runs.run_explorer(
        runs.build_module(warm.module_spec()),
        *runs.build_input(warm.input_spec()),
        train=warm.train,
        seed=warm.seed,
        dropout=warm.dropout,
    )
    attention_explorer.build_view(warm_run, section="attention", batch_index=0, enlarge=None, presenter=False)
    print("| settings | section | figures | figure JSON per rerun | forward (ms) | figures (ms) |")
    print("|---|---|---:|---:|---:|---:|")
    for name, query in CASES.items():
        settings = parse_query(query)[0]
        module = runs.build_module(settings.module_spec())
        x, labels = runs.build_input(settings.input_spec())
        start = time.perf_counter()
        run = runs.run_explorer(module, x, labels, train=settings.train, seed=settings.seed, dropout=settings.dropout)
        forward = time.perf_counter() - start
        for section in ("attention", "reshapes"):
            start = time.perf_counter()
            view = attention_explorer.build_view(run, section=section, batch_index=0, enlarge=None, presenter=False)
            seconds = time.perf_counter() - start
            nbytes = sum(figures.figure_nbytes(panel.figure) for panel in view.panels)
            print(
                f"| {name} | {section} | {len(view.panels)} | {nbytes / 1e6:.2f} MB | {forward * 1e3:.0f} | "
                f"{seconds * 1e3:.0f} |"
            )


if __name__ == "__main__":
    main()
