"""The Attention variants page's decoding section: a ``variant_runs.DecodingRun`` in, Panels and numbers out.

Every call of the module with the cache adds its query rows (the prompt's, then one per token) over the keys cached
at that moment, under the causal mask aligned bottom-right. Stacked, they rebuild the uncached weights; the grey
cells are keys that call did not read: not in the cache (not yet written, or, with a window, dropped) or in it but
masked — both drawn alike, so no masked key shows as a weight of 0.
No streamlit and no model runs here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.variants.page_runs import DecodingRun

from . import figures
from .figures.panel import Panel, head_names, shape_text


@dataclass(frozen=True)
class DecodingView:
    panels: list[Panel]
    calls: int
    step: int  # the call shown in detail
    agreement: float  # largest |stacked − uncached| over the computed cells
    speedup: float  # total time without the cache over total time with it
    ms_cached: float  # mean milliseconds per call with the cache (the prompt's call left out)
    ms_uncached: float
    bytes_last: int
    tokens_last: int  # tokens the cache holds after the last call
    seen_last: int  # tokens fed in all


def call_span(run: DecodingRun, step: int) -> tuple[int, int]:
    """(first, end) positions of the queries call ``step`` added."""
    if step == 0:
        return 0, run.prompt_len
    first = run.prompt_len + step - 1
    return first, first + 1


def build_decoding_view(run: DecodingRun, step: int, presenter: bool) -> DecodingView:
    """The stacked weights, the chosen call's rows and mask, the cache's growth and the time per token."""
    calls = len(run.cached)
    step = min(max(step, 0), calls - 1)
    stacked = run.weights.numpy()  # (h, T, T)
    computed = np.isfinite(stacked)
    agreement = float(np.abs(stacked[computed] - run.full_weights.numpy()[computed]).max())
    labels = list(run.labels)
    panels = [
        _stacked_panel(run, stacked, labels, step, presenter),
        *_step_panels(run, stacked, labels, step, presenter),
    ]
    panels += [_growth_panel(run, presenter), _bytes_panel(run, presenter), _time_panel(run, presenter)]
    later = slice(1, None) if calls > 1 else slice(None)
    return DecodingView(
        panels=panels,
        calls=calls,
        step=step,
        agreement=agreement,
        speedup=sum(run.seconds_uncached) / max(sum(run.seconds_cached), 1e-12),
        ms_cached=1e3 * float(np.mean(run.seconds_cached[later])),
        ms_uncached=1e3 * float(np.mean(run.seconds_uncached[later])),
        bytes_last=run.cache_bytes[-1],
        tokens_last=run.cached[-1],
        seen_last=run.seen[-1],
    )


NOT_READ = "not read at this call"  # the grey cells' legend: not in the cache, or masked


def _relabel_grey(figure):
    """The heatmap's grey cells are named "masked (−∞)"; here they are also keys not (or no longer) cached."""
    for trace in figure.data:
        if trace.name and "masked (−∞)" in trace.name:
            trace.name = trace.name.replace("masked (−∞)", NOT_READ)
        if getattr(trace, "hovertemplate", None) and "masked (−∞)" in trace.hovertemplate:
            trace.hovertemplate = trace.hovertemplate.replace("masked (−∞)", NOT_READ)
    return figure


def _stacked_panel(run: DecodingRun, stacked: np.ndarray, labels: list[str], step: int, presenter: bool) -> Panel:
    first, end = call_span(run, step)
    return Panel(
        "decode_stacked",
        "Every call's query rows over the cached keys, stacked",
        f"shape (h, T, T) = {shape_text(stacked.shape)} · rows 0–{run.prompt_len - 1}: the prompt's call; each row "
        f"after: one new token's call · grey: keys that call did not read (not in the cache, or masked) · call "
        f"{step} added rows {first}–{end - 1}.",
        _relabel_grey(
            figures.heads_heatmap(
                stacked,
                labels,
                labels,
                title=f"Decoding with the cache · {run.source}",
                kind="weights",
                head_names=head_names(stacked.shape[0]),
                presenter=presenter,
            )
        ),
    )


def _step_panels(run: DecodingRun, stacked: np.ndarray, labels: list[str], step: int, presenter: bool) -> list[Panel]:
    """The chosen call's rows over exactly the keys it read, and its mask."""
    first, end = call_span(run, step)
    mask = run.masks[step].numpy()  # (t, s)
    keys = labels[end - mask.shape[1] : end]
    rows = stacked[:, first:end, end - mask.shape[1] : end]  # (h, t, s)
    return [
        Panel(
            "decode_rows",
            f"Call {step}: {end - first} new quer{'ies' if end - first > 1 else 'y'} over {mask.shape[1]} cached keys",
            f"`attn_weights` of this call · shape (h, t, s) = {shape_text(rows.shape)} · the cache holds "
            f"{run.cached[step]} tokens after the call · grey: masked keys, not read.",
            _relabel_grey(
                figures.heads_heatmap(
                    rows,
                    labels[first:end],
                    keys,
                    title=f"call {step}",
                    kind="weights",
                    head_names=head_names(rows.shape[0]),
                    presenter=presenter,
                )
            ),
        ),
        Panel(
            "decode_mask",
            "Its mask: causal, aligned bottom-right",
            f"`mask` · shape (t, s) = {shape_text(mask.shape)} · key j visible to query i when j ≤ i + s − t (the "
            "Masks page's note on KV-cache decoding); with a window, also j > i + s − t − window.",
            figures.matrix_heatmap(
                mask,
                labels[first:end],
                keys,
                title="mask (True = may attend)",
                kind="mask",
                presenter=presenter,
                row_title="query",
                col_title="key",
            ),
        ),
    ]


def _growth_panel(run: DecodingRun, presenter: bool) -> Panel:
    calls = list(range(len(run.cached)))
    capped = run.cached[-1] < run.seen[-1]
    caption = "Tokens the cache holds after each call, counted on its tensors."
    if capped:
        caption += (
            f" A window cache stops growing at its window: {max(run.cached)} tokens held, while {run.seen[-1]} "
            "were fed (the positions go on; the oldest keys are dropped)."
        )
    return Panel(
        "decode_growth",
        "The cache grows by one token per call" + (", up to its window" if capped else ""),
        caption,
        figures.line_chart(
            calls,
            {"tokens cached": list(map(float, run.cached)), "tokens fed": list(map(float, run.seen))},
            title="Tokens after each call",
            x_title="call (0: the prompt)",
            y_title="tokens",
            presenter=presenter,
        ),
    )


def _bytes_panel(run: DecodingRun, presenter: bool) -> Panel:
    calls = list(range(len(run.cached)))
    return Panel(
        "decode_bytes",
        "The cache's bytes after each call",
        "Measured on the cache's tensors (every layer's, for a GPT), on their own axis: kB = 1000 bytes.",
        figures.line_chart(
            calls,
            {"kB cached": [b / 1000 for b in run.cache_bytes]},
            title="Cache size after each call",
            x_title="call (0: the prompt)",
            y_title="kB",
            presenter=presenter,
        ),
    )


def _time_panel(run: DecodingRun, presenter: bool) -> Panel:
    calls = list(range(len(run.cached)))
    return Panel(
        "decode_time",
        "Time per token, with and without the cache",
        "With the cache a call reads one new token; without it, the whole sequence so far goes through again. "
        "Wall time on a shared server: it varies with what other visitors run; bench/kv_cache.py measures it "
        "side by side.",
        figures.line_chart(
            calls,
            {
                "with the cache": [1e3 * s for s in run.seconds_cached],
                "without": [1e3 * s for s in run.seconds_uncached],
            },
            title="Milliseconds per call",
            x_title="call (0: the prompt)",
            y_title="ms",
            presenter=presenter,
        ),
    )


def decoding_summary(view: DecodingView) -> str:
    """The numbers under the figures, in one paragraph of markdown."""
    return (
        f"{view.calls} calls: the prompt, then one token each. After the last the cache holds "
        f"**{view.tokens_last} tokens in {view.bytes_last:,} bytes**"
        + (
            f" (of {view.seen_last} fed: a window keeps only the last ones)"
            if view.tokens_last < view.seen_last
            else ""
        )
        + f". Each call's rows equal the uncached "
        f"forward's within {view.agreement:.1e}. Per new token: **{view.ms_cached:.2f} ms with the cache, "
        f"{view.ms_uncached:.2f} ms without** (the whole sequence again); over the whole run the cache was "
        f"**{view.speedup:.1f}×** as fast. Times from this run on a shared server; bench/kv_cache.py measures "
        "them side by side."
    )
