"""The caches every page shares, keyed on settings (never on arrays), and the admission gate in front of them.

Everything here is in ``st.cache_resource``: shared by every session and never mutated (modules, runs, views with
their built figures). ``st.cache_data`` would pickle the figures, and plotly validates a figure again on unpickle.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import streamlit as st

from mha_core import runs

from . import admission
from . import settings as cfg
from .settings import Settings
from .url import notice


@st.cache_resource(max_entries=4, ttl=600, show_spinner=False)
def cached_module(spec: runs.ModuleSpec):
    """One module per settings, shared read-only by every session (never mutate it)."""
    return runs.build_module(spec)


HEAVY_CELLS = admission.HEAVY_CELLS  # b·h·T² above which a run waits for the others (see explorer.glue.admission)


def fit_budget(settings: Settings, max_cells: int, page: str) -> Settings:
    """The nearest settings with b·h·T² ≤ max_cells, with a notice, for pages that run several copies at once.

    Batch goes down first, then tokens; the sidebar keeps the user's own settings for the other pages.
    """
    b, h, T = settings.batch_size, settings.num_heads, settings.num_tokens
    if b * h * T * T <= max_cells:
        return settings
    b = max(1, min(b, max_cells // (h * T * T)))
    while b * h * T * T > max_cells and T > 1:
        T -= 1
    notice(
        f"{page} runs several copies of the module at once, so it uses batch_size={b} and num_tokens={T} "
        f"(b·h·T² ≤ {max_cells:,}) instead of {settings.batch_size} and {settings.num_tokens}."
    )
    fitted, _ = cfg.reconcile(replace(settings, batch_size=b, num_tokens=T))
    return fitted


def is_heavy(settings: Settings) -> bool:
    return admission.explorer_is_heavy(settings)


def heavy_gate(settings: Settings):
    """Big runs go one at a time through the one admission gate (explorer.glue.admission); small runs pass straight
    through. A waiting run gives up when its session ends; afterwards freed memory goes back to the OS."""
    cells = settings.batch_size * settings.num_heads * settings.num_tokens**2
    return admission.admit(f"the explorer at b·h·T² = {cells:,}", heavy=is_heavy(settings))


def gated(cached_function):
    """Put a cached function taking settings first behind ``heavy_gate`` (outside its cache, so a waiting
    session finds the first one's result)."""

    @functools.wraps(cached_function)
    def run(settings: Settings, *args, **kwargs):
        with heavy_gate(settings):
            return cached_function(settings, *args, **kwargs)

    return run


release_memory = admission.release_memory


# Two levels of cache. The computed view (a run's trace, keyed on settings) is reused by every section, batch element
# and presentation choice; the figures drawn from it are cached per presentation, as built objects in
# st.cache_resource, because st.cache_data would pickle them and plotly validates a figure again on every unpickle.
# Both are shared by every session and never mutated (st.plotly_chart serialises a copy).

RUN_CACHE_CELLS = 2**18  # runs with b·h·T² above this are not kept (≤ 16 entries of about 6 MB at most)


@st.cache_resource(max_entries=16, ttl=900, show_spinner=False)
def _kept_explorer_run(settings: Settings):
    from ..views import attention_explorer

    module, x, labels = module_and_input(settings)
    return attention_explorer.run_explorer(module, x, labels, settings)


def explorer_run(settings: Settings):
    """The explorer's computed view for the settings: kept when small, run afresh (behind the gate) when large."""
    from ..views import attention_explorer

    if _cells(settings) <= RUN_CACHE_CELLS:
        return _kept_explorer_run(settings)
    module, x, labels = module_and_input(settings)
    return attention_explorer.run_explorer(module, x, labels, settings)


def _cells(settings: Settings) -> int:
    return settings.batch_size * settings.num_heads * settings.num_tokens**2


def _build_view(settings: Settings, section: str, batch_index: int, enlarge: int | None, presenter: bool):
    from ..views import attention_explorer

    return attention_explorer.build_view(
        explorer_run(settings), section=section, batch_index=batch_index, enlarge=enlarge, presenter=presenter
    )


# A view holds its figures: tens of KB at a class's settings, up to a few MB for a heavy run. Heavy views get a
# cache of their own, a few entries long, so that a burst of large runs cannot fill memory with views nobody reopens.
@st.cache_resource(max_entries=64, ttl=1800, show_spinner="Running the module…")
def _small_view(settings: Settings, section: str, batch_index: int, enlarge: int | None, presenter: bool):
    return _build_view(settings, section, batch_index, enlarge, presenter)


@st.cache_resource(max_entries=4, ttl=600, show_spinner="Running the module…")
def _heavy_view(settings: Settings, section: str, batch_index: int, enlarge: int | None, presenter: bool):
    return _build_view(settings, section, batch_index, enlarge, presenter)


@gated
def cached_view(settings: Settings, section: str, batch_index: int, enlarge: int | None, presenter: bool):
    """What the explorer draws for one section and presentation, from the cached run; the figures are built once."""
    cache = _heavy_view if is_heavy(settings) else _small_view
    return cache(settings, section, batch_index, enlarge, presenter)


def module_and_input(settings: Settings):
    """(module, x (b, T, d_in), token labels) for the settings: seeded random weights, a trained layer, or a real
    GPT's layer on its real input (``?model=``).

    The module is shared by every session: never mutate it (runs.run_trace copies it for train mode).
    """
    if settings.model:
        from .real_models import explorer_input

        module, x, labels = explorer_input(settings.model, settings.text, settings.layer, settings.num_tokens)
        return module, x, list(labels)
    if settings.trained:
        from .training_cache import trained_explorer_input

        module, x, labels = trained_explorer_input(settings.trained)
        return module, x, list(labels)
    x, labels = runs.build_input(settings.input_spec())
    return cached_module(settings.module_spec()), x, labels


def real_model_label(settings: Settings) -> str:
    """The real model a ``?model=`` setting names, in words."""
    from .real_models import LABELS

    return LABELS.get(settings.model, settings.model)


def npz_download(settings: Settings):
    """A callable for st.download_button: the whole trace as .npz, computed only on click."""

    def make() -> bytes:
        with heavy_gate(settings):
            module, x, labels = module_and_input(settings)
            return runs.trace_npz(runs.run_trace(module, x, train=settings.train, seed=settings.seed), labels)

    return make
