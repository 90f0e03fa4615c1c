"""The caches every page shares, keyed on settings (never on arrays), and the admission gate in front of them.

Everything here is in a cache bounded in bytes (``byte_cache``), shared by every session and never mutated (modules,
runs, views with their built figures); ``st.cache_data`` would pickle the figures, and plotly validates a figure again
on unpickle. Each run goes through the gate with its page's estimate in bytes (``budget``).
"""

from __future__ import annotations

import functools
import threading

from mha_core import runs

from ..views import attention_explorer
from . import admission, budget
from . import settings as cfg
from .byte_cache import MB, byte_cached
from .real_models import LABELS, explorer_input
from .settings import Settings
from .training_cache import trained_explorer_input
from .url import notice


@byte_cached(max_bytes=48 * MB, max_entries=4, ttl_s=600)
def cached_module(spec: runs.ModuleSpec):
    """One module per settings, shared read-only by every session (never mutate it); its weights and mask counted."""
    return runs.build_module(spec)


def fit_page(settings: Settings, page: str) -> Settings:
    """The nearest settings whose ``page`` run fits the one byte budget (budget.fitted), with a notice when it moved.

    The sidebar and the URL keep the user's own settings for the other pages.
    """
    fitted = budget.fitted(page, settings)
    if fitted == settings:
        return settings
    notice(budget.fit_notice(page, settings, fitted))
    reconciled, _ = cfg.reconcile(fitted)
    return reconciled


def is_heavy(settings: Settings, page: str = "explorer") -> bool:
    """A run that adds more than LIGHT_BYTES waits its turn in the gate."""
    return budget.need_bytes(page, settings) > admission.LIGHT_BYTES


def heavy_gate(settings: Settings, page: str = "explorer"):
    """Big runs go one at a time through the one admission gate (explorer.glue.admission) with their byte estimate;
    small runs pass straight through. A waiting run gives up when its session ends; afterwards freed memory goes
    back to the OS."""
    need = budget.need_bytes(page, settings)
    label = f"{budget.PAGE_NAMES[page]} at about {need / MB:,.0f} MB"
    return admission.admit(label, need_bytes=need)


def gated(page: str = "explorer"):
    """Put a cached function taking settings first behind ``heavy_gate`` with ``page``'s estimate (outside its
    cache, so a waiting session finds the first one's result)."""

    def decorate(cached_function):
        @functools.wraps(cached_function)
        def run(settings: Settings, *args, **kwargs):
            peek = getattr(cached_function, "peek", None)
            if peek is not None:  # a view already made waits for nobody
                hit, value = peek(settings, *args, **kwargs)
                if hit:
                    return value
            with heavy_gate(settings, page):
                return cached_function(settings, *args, **kwargs)

        return run

    if callable(page):  # the old form, @gated without a page
        function, page = page, "explorer"
        return decorate(function)
    return decorate


# Two levels of cache. The computed view (a run's trace, keyed on settings) is reused by every section, batch element
# and presentation choice; the figures drawn from it are cached per presentation, as built objects (st.cache_data
# would pickle them, and plotly validates a figure again on every unpickle). Both are byte-bounded caches
# (explorer.glue.byte_cache), shared by every session and never mutated (st.plotly_chart serialises a copy): a heavy
# run is never kept, and a cache holds as many views as fit its bytes.


def _run_explorer(settings: Settings):
    """The explorer's module run once on its input (train mode on a private copy)."""
    module, x, labels = module_and_input(settings)
    return runs.run_explorer(module, x, labels, train=settings.train, seed=settings.seed, dropout=settings.dropout)


@byte_cached(max_bytes=32 * MB, max_entries=16, ttl_s=900)
def _kept_explorer_run(settings: Settings):
    return _run_explorer(settings)


def explorer_run(settings: Settings):
    """The explorer's computed view for the settings: kept when light, run afresh (behind the gate) when heavy."""
    if not is_heavy(settings):
        return _kept_explorer_run(settings)
    return _run_explorer(settings)


@gated("explorer")
@byte_cached(max_bytes=32 * MB, max_entries=64, ttl_s=1800, spinner="Running the module…")
def cached_view(settings: Settings, section: str, batch_index: int, enlarge: int | None, presenter: bool):
    """What the explorer draws for one section and presentation, from the cached run; the figures are built once."""
    return attention_explorer.build_view(
        explorer_run(settings), section=section, batch_index=batch_index, enlarge=enlarge, presenter=presenter
    )


def module_and_input(settings: Settings):
    """(module, x (b, T, d_in), token labels) for the settings: seeded random weights, a trained layer, or a real
    GPT's layer on its real input (``?model=``).

    The module is shared by every session: never mutate it (runs.run_trace copies it for train mode).
    """
    if settings.model:
        module, x, labels = explorer_input(settings.model, settings.text, settings.layer, settings.num_tokens)
        return module, x, list(labels)
    if settings.trained:
        module, x, labels = trained_explorer_input(settings.trained)
        return module, x, list(labels)
    x, labels = runs.build_input(settings.input_spec())
    return cached_module(settings.module_spec()), x, labels


def real_model_label(settings: Settings) -> str:
    """The real model a ``?model=`` setting names, in words."""
    return LABELS.get(settings.model, settings.model)


def npz_offered(settings: Settings) -> bool:
    """The .npz download is offered when making it fits the one budget."""
    return budget.fits("npz", settings)


def npz_download(settings: Settings):
    """A callable for st.download_button: the whole trace as .npz, computed only on click, through the gate.

    The button's request sent again (a hand-made loop) gets the same bytes, made once: Streamlit stores a file by its
    content, so a tab holds one copy, not one per request.
    """
    made: list[bytes] = []
    lock = threading.Lock()

    def make() -> bytes:
        with lock:
            if not made:
                with heavy_gate(settings, "npz"):
                    module, x, labels = module_and_input(settings)
                    trace = runs.run_trace(module, x, train=settings.train, seed=settings.seed)
                    made.append(runs.trace_npz(trace, labels))
            return made[0]

    return make
