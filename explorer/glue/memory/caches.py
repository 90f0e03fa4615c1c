"""The caches every page shares, bounded in bytes, and the admission gate in front of them: one cache mechanism.

``st.cache_resource`` bounds a cache by its number of entries only, so a cache sized for a class's small views
(64 entries of tens of KB) held 64 views of the largest run too: Follow a token kept 726 MB after 64 visits. Here
each cache has a byte budget (and an entry cap), and the sum over every cache is bounded by ``TOTAL_BYTES``.
Everything here is keyed on settings (never on arrays), shared by every session and never mutated (modules, runs,
views with their built figures); ``st.cache_data`` would pickle the figures, and plotly validates a figure again on
unpickle. ``clear_all`` empties every cache (the idle clear). Each run goes through the gate with its page's
estimate in bytes (``budget``).
"""

from __future__ import annotations

import functools
import threading

from explorer.glue.cached.real_models import LABELS, explorer_input
from explorer.glue.cached.training_runs import trained_explorer_input
from explorer.glue.memory import admission, budget, downloads
from explorer.glue.memory.byte_caches import (  # noqa: F401 - the byte caches' names, used here and by callers
    MB,
    REGISTRY,
    TOTAL_BYTES,
    ByteCache,
    byte_cached,
    clear_all,
    size_of,
    total_bytes,
)
from explorer.glue.state import settings as cfg
from explorer.glue.state.settings import Settings
from explorer.glue.state.url import notice
from explorer.views import attention_explorer, explorer_positions
from mha_core.runs import forward as runs
from mha_core.runs import token_order

_REGISTRY = REGISTRY  # every byte cache (tests read it here)

# --- the gate and the explorer's caches ------------------------------------------------------------------------


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
    return budget.need_bytes(page, settings) > budget.light_bytes()


def heavy_gate(settings: Settings, page: str = "explorer"):
    """Big runs go one at a time through the one admission gate (explorer.glue.memory.admission) with their byte
    estimate; small runs pass straight through. A waiting run gives up when its session ends; afterwards freed memory
    goes back to the OS."""
    need = budget.need_bytes(page, settings)
    return admission.admit(budget.PAGE_NAMES[page], need_bytes=need)


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
# (``byte_cached`` above), shared by every session and never mutated (the chart element serialises it): a heavy
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


@gated("explorer")
@byte_cached(max_bytes=16 * MB, max_entries=32, ttl_s=1800, spinner="Scoring with positions…")
def positions_view(settings: Settings, shuffle: int, presenter: bool):
    """The Explorer's Positions section for the settings' position knob and shuffle: the module's scores without
    and with the kind (at most ``token_order.MAX_POSITION_TOKENS`` tokens of batch element 0), figures built once."""
    kind, head_dim = settings.positions, settings.head_dim
    refused = ""
    run = None
    if not token_order.rope_fits(kind, head_dim):
        refused = (
            f"RoPE turns pairs of dimensions, and this module's head_dim is {head_dim}: its queries have no pair to "
            "turn. Choose an even head_dim in the sidebar (num_heads × head_dim, for example 4 × 16); the figures "
            "below use head_dim 16."
        )
    else:
        module, x, labels = module_and_input(settings)
        run = token_order.run_positions(
            module, x, labels, kind=kind, rope_base=settings.rope_base, seed=settings.seed, shuffle=shuffle
        )
    return explorer_positions.build_positions_view(
        run, kind=kind, head_dim=head_dim, rope_base=settings.rope_base, presenter=presenter, refused=refused
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
    return module_for(settings), x, labels


def input_labels(settings: Settings) -> list[str]:
    """The token labels of the settings' input, without building a module outside the gate (issue 43: pages asked
    ``module_and_input`` for labels alone, and a heavy link built its 36 MB module beside the gate's job)."""
    if settings.model or settings.trained:  # a real or trained model's module is shared and cached: no new bytes
        return module_and_input(settings)[2]
    return list(runs.build_input(settings.input_spec())[1])


def module_for(settings: Settings, spec: runs.ModuleSpec | None = None):
    """The settings' module (or ``spec``'s): shared from ``cached_module`` when light, built for this run when heavy.

    A heavy run's module (up to 36 MB at d_in = d_out = 1024 in float64) kept in the cache stayed on a used server
    after the run; heavy runs go one at a time, so building it each run costs a few ms and no memory that adds up.
    """
    spec = settings.module_spec() if spec is None else spec
    return runs.build_module(spec) if is_heavy(settings) else cached_module(spec)


def real_model_label(settings: Settings) -> str:
    """The real model a ``?model=`` setting names, in words."""
    return LABELS.get(settings.model, settings.model)


def npz_offered(settings: Settings) -> bool:
    """The .npz download is offered when making it fits the one budget and the file fits what the caches may hold
    while it waits to be fetched (``downloads.held_bytes()``, within the caches' bytes)."""
    return budget.fits("npz", settings) and npz_file_bytes(settings) <= downloads.held_bytes()


def npz_download(settings: Settings):
    """A callable for st.download_button: the whole trace as .npz, made only on click, through the gate, and held
    (within the caches' bytes) only until it is sent (``downloads``).

    The button's request sent again before the file is fetched (a hand-made loop) gets the same bytes, made once;
    the callable keeps only their identity, so a sent file is not kept alive by a tab that still shows the button.
    """
    made: list[int | None] = [None]  # id() of the file while downloads.HELD holds it
    lock = threading.Lock()

    def build() -> bytes:
        module, x, labels = module_and_input(settings)
        trace = runs.run_trace(module, x, train=settings.train, seed=settings.seed)
        return runs.trace_npz(trace, labels)

    def make() -> bytes:
        with lock:
            data = downloads.HELD.get(made[0])
            if data is None:
                need = budget.need_bytes("npz", settings)
                data = downloads.make(budget.PAGE_NAMES["npz"], need, build, expected_bytes=npz_file_bytes(settings))
                made[0] = id(data)
                _REGISTRY.enforce_total()  # cached views make room for the held file
            return data

    return make


def npz_file_bytes(settings: Settings) -> int:
    """The .npz file's size, about: its (b, h, T, T) steps (scores, masked, weights, dropped) in the dtype, compressed
    little (random floats), and the rest of the trace."""
    cells = settings.batch_size * settings.num_heads * settings.num_tokens**2
    return 4 * cells * budget.itemsize(settings.dtype) + budget.module_bytes(settings)
