"""Streamlit glue for the teaching pages: caches keyed on settings and page parameters, and page-parameter state.

Every cache here is keyed on the frozen ``Settings`` and small ints, strings or frozen dataclasses, never on arrays.
The views hold built figures, so they live in byte-bounded shared caches (``caches.byte_cached``, never mutated):
``st.cache_data`` would pickle them, and plotly validates every figure again when it is unpickled.
Modules come from ``caches.module_for`` (shared read-only); anything that changes weights works on a copy
(see ``mha_core.runs.teaching``). The cached values are runs (``mha_core.runs.forward``) and the
views drawn from them (``explorer.views``): figures and numbers.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import streamlit as st

from explorer.glue.memory import caches
from explorer.glue.memory.caches import MB, byte_cached
from explorer.glue.state import url
from explorer.glue.state.settings import Settings
from explorer.views import (
    head_circuits,
    heads_and_references,
    knobs_that_teach,
    masks_and_cross_attention,
    step_through,
)
from explorer.views.follow_a_token import build_token_view
from explorer.views.head_view import build_head_view
from mha_core import devices
from mha_core.attention import circuits
from mha_core.attention.reference import ReferenceReport
from mha_core.runs import forward as runs
from mha_core.runs import teaching

# --- a page's own parameters: read once from the URL into the widget's state, kept in range after that --------------


def seed_int(key: str, url_name: str, default: int, low: int, high: int) -> int:
    """Seed widget ``key`` from URL parameter ``url_name`` once per session; clamp it to [low, high] on every run.

    Call it before the widget is drawn (and draw the widget with ``key=key`` and no ``value=``).
    """
    state = st.session_state
    if key not in state:
        state[key] = url.url_int(url_name, min(max(default, low), high), low, high)
    else:
        state[key] = min(max(int(state[key]), low), high)
    return state[key]


def seed_choice(key: str, url_name: str, default: str, choices: tuple[str, ...] | list[str]) -> str:
    """As ``seed_int``, for a choice; a value no longer offered falls back to the default."""
    state = st.session_state
    if key not in state:
        state[key] = url.url_choice(url_name, default, choices)
    elif state[key] not in choices:
        state[key] = default
    return state[key]


# --- caches ----------------------------------------------------------------------------------------------------------

_SPIN = "Running the module…"
RUN_BYTES = 24 * MB  # a page's computed run is kept only below this
VIEW_BYTES = 24 * MB  # each view cache's share of caches.TOTAL_BYTES


@functools.cache
def _scale_demo() -> teaching.ScaleDemo:
    """The √head_dim chart's numbers: four tiny traced passes, the same for every session and setting."""
    return teaching.scale_demo()


def _build_step_view(settings: Settings, number: int, batch_index: int, presenter: bool) -> step_through.StepView:
    run = caches.explorer_run(settings)
    softmax = step_through.STEPS[number - 1].key == "softmax" if 1 <= number <= step_through.STEP_COUNT else False
    return step_through.build_step_view(
        run.trace,
        run.labels,
        number,
        batch_index=batch_index,
        presenter=presenter,
        dropout_active=run.dropout_shown,
        train=settings.train,
        scale_demo=_scale_demo() if softmax else None,
    )


@caches.gated("step")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def step_view(settings: Settings, number: int, batch_index: int, presenter: bool) -> step_through.StepView:
    """One step's view, drawn from the explorer's computed run: other steps, batch elements and presenter mode
    reuse that run (and so does the explorer page)."""
    return _build_step_view(settings, number, batch_index, presenter)


# Each page's computation is cached apart from the figures drawn from it (keyed on everything but the batch element
# shown and presenter mode), so those presentation choices redraw without running anything. Every cache is bounded in
# bytes (``caches.byte_cached``): a heavy run is larger than RUN_BYTES and is never kept, only its views.


@byte_cached(max_bytes=RUN_BYTES, max_entries=8, ttl_s=900)
def _heads_run(settings: Settings) -> tuple[runs.HeadsRun, list[str]]:
    module, x, labels = caches.module_and_input(settings)
    return runs.run_heads(module, x), labels


@caches.gated("heads")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def heads_view(settings: Settings, batch_index: int, presenter: bool) -> heads_and_references.HeadsView:
    run, labels = _heads_run(settings)
    return heads_and_references.build_heads_view(run, labels, batch_index=batch_index, presenter=presenter)


@caches.gated("heads")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def circuits_view(
    settings: Settings, head: int, batch_index: int, token: int, presenter: bool
) -> head_circuits.CircuitsView:
    """One head's W_QK and W_OV and one token's sum over heads, from the module's weights and an eval-mode trace."""
    module, x, labels = caches.module_and_input(settings)  # the module is shared: read only
    trace = runs.run_trace(module, x)
    report = circuits.head_report(module, trace, head=head, batch=batch_index, token=token)
    traced = trace.numpy("attn_scores")[batch_index, head]  # (i, j)
    return head_circuits.build_circuits_view(
        report, traced, labels, batch_index=batch_index, token=token, presenter=presenter
    )


def reference_dtypes(settings: Settings) -> list[tuple[str, str, str]]:
    """(column name, device, dtype) for each comparison: the chosen dtype, float32 and float64.

    Where the device has no float64 (mps), the float64 column runs on the CPU, and says so.
    """
    wanted = [settings.dtype] + [d for d in ("float32", "float64") if d != settings.dtype]
    offered = devices.available_dtypes(settings.device)
    columns = []
    for dtype in wanted:
        if dtype in offered:
            columns.append((dtype, settings.device, dtype))
        else:
            columns.append((f"{dtype} (cpu)", "cpu", dtype))
    return columns


@caches.gated("references")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=3600, spinner="Running torch's references…")
def references(settings: Settings) -> dict[str, ReferenceReport]:
    """compare_with_torch for the settings' module in each dtype of ``reference_dtypes``, on the chosen device."""
    x, _ = runs.build_input(settings.input_spec())
    spec = settings.module_spec()
    return {
        name: runs.compare_on_device(replace(spec, device=device, dtype=dtype), x)
        for name, device, dtype in reference_dtypes(settings)
    }


@byte_cached(max_bytes=RUN_BYTES, max_entries=8, ttl_s=900)
def _cross_run(settings: Settings, tgt_len: int, src_len: int, params: teaching.MaskParams):
    """Cross-attention with QKVMultiHeadAttention (hidden_dim = d_out, the settings' heads) under one mask."""
    query, source, q_labels, k_labels = teaching.cross_inputs(
        settings.batch_size, tgt_len, src_len, settings.d_out, settings.seed
    )
    mask = teaching.make_mask(params, settings.batch_size, tgt_len, src_len)
    run = teaching.run_cross(
        settings.d_out,
        settings.num_heads,
        bias=settings.qkv_bias,
        seed=settings.seed,
        device=settings.device,
        dtype=settings.dtype,
        query=query,
        source=source,
        mask=mask,
    )
    return run, mask, q_labels, k_labels


@caches.gated("masks")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def masks_view(
    settings: Settings,
    tgt_len: int,
    src_len: int,
    params: teaching.MaskParams,
    batch_index: int,
    implementation: str,
    presenter: bool,
) -> masks_and_cross_attention.MasksView:
    """The mask, weights and output of one batch element; the run behind them is shared by every presentation."""
    run, mask, q_labels, k_labels = _cross_run(settings, tgt_len, src_len, params)
    return masks_and_cross_attention.build_masks_view(
        run, mask, q_labels, k_labels, batch_index=batch_index, implementation=implementation, presenter=presenter
    )


@byte_cached(max_bytes=RUN_BYTES, max_entries=8, ttl_s=900)
def _temperature_run(settings: Settings, multiplier: str):
    module, x, labels = caches.module_and_input(settings)
    return runs.run_temperature(module, x, float(multiplier)), labels


@caches.gated("knobs")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def temperature_view(settings: Settings, multiplier: str, presenter: bool) -> knobs_that_teach.TemperatureView:
    run, labels = _temperature_run(settings, multiplier)
    return knobs_that_teach.build_temperature_view(run, labels, presenter=presenter)


@byte_cached(max_bytes=RUN_BYTES, max_entries=8, ttl_s=900)
def _dropout_run(settings: Settings, percent: int, draw: int):
    """Dropout p = percent/100 on the settings' module (same weights: dropout has no parameters), in train mode."""
    p = percent / 100
    module = caches.module_for(settings, replace(settings.module_spec(), dropout=p))  # run_trace trains a copy
    x, labels = runs.build_input(settings.input_spec())
    return runs.run_dropout(module, x, p, settings.seed + draw), labels


@caches.gated("knobs")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def dropout_view(settings: Settings, percent: int, draw: int, presenter: bool) -> knobs_that_teach.DropoutView:
    run, labels = _dropout_run(settings, percent, draw)
    return knobs_that_teach.build_dropout_view(run, labels, presenter=presenter)


@byte_cached(max_bytes=RUN_BYTES, max_entries=8, ttl_s=900)
def _preset_run(settings: Settings, preset: str):
    module, x, labels = caches.module_and_input(settings)
    return runs.run_preset(module, x, labels, preset, num_heads=settings.num_heads)


@caches.gated("knobs")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def preset_view(settings: Settings, preset: str, presenter: bool) -> knobs_that_teach.PresetView:
    return knobs_that_teach.build_preset_view(_preset_run(settings, preset), presenter=presenter)


@caches.gated("follow")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def token_view(settings: Settings, token: int, batch_index: int, presenter: bool):
    """One query token followed through every head, from the explorer's computed run (shared with its pages)."""
    return build_token_view(
        caches.explorer_run(settings),
        token=token,
        batch_index=batch_index,
        presenter=presenter,
        book_example=settings.is_book_example(),
    )


@caches.gated("follow")
@byte_cached(max_bytes=VIEW_BYTES, max_entries=64, ttl_s=1800, spinner=_SPIN)
def head_view(settings: Settings, batch_index: int, focus: int | None, presenter: bool):
    """The at-a-glance head view, from the explorer's computed run."""
    return build_head_view(caches.explorer_run(settings), batch_index=batch_index, focus=focus, presenter=presenter)
