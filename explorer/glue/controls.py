"""Streamlit glue shared by every page: settings in the sidebar, the URL as state, caches.

Canonical settings live in ``st.session_state["settings"]`` (a frozen ``Settings``), so
they survive page switches, where Streamlit drops the state of widgets not on the page.
Widgets are keyed ``w_<name>``; their ``on_change`` callback reconciles the whole set and
writes any correction back into the widgets before the rerun draws them.
"""

from __future__ import annotations

import functools
import logging
import traceback
from collections.abc import Callable
from dataclasses import replace

import streamlit as st
import torch

from mha_core import devices, runs
from mha_core.runs import INPUT_KINDS

from . import admission, idle, server_setup
from . import settings as cfg
from .settings import FIELD_NAMES, Settings

server_setup.configure_process()  # once per process, before any session computes
idle.start_watcher()  # caches cleared after 5 minutes without a visitor

INPUT_LABELS = {"book": "The book's six words", "random": "Seeded random embeddings", "text": "A sentence you type"}


# --- URL <-> settings ----------------------------------------------------------------------------------------------


def _query_dict() -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params.keys()}  # noqa: SIM118


def current_settings() -> Settings:
    """The session's settings: from the URL on first load (or when the URL changes), else as kept."""
    state = st.session_state
    url_settings = {k: v for k, v in _query_dict().items() if k in FIELD_NAMES}
    last_written = state.get("_written_query")
    if "settings" not in state:
        state.settings, state.notices = cfg.parse_query(url_settings)
        _load_widgets(state.settings)
    elif url_settings and last_written is not None and url_settings != {k: [v] for k, v in last_written.items()}:
        state.settings, state.notices = cfg.parse_query(url_settings, base=state.settings)
        _load_widgets(state.settings)
    return state.settings


def sync_url(settings: Settings, **page_params: object) -> None:
    """Mirror the settings (and a page's own parameters) into the query string."""
    query = cfg.to_query(settings)
    st.session_state["_written_query"] = dict(query)  # only the settings: pages add their own keys below
    query.update({k: str(v) for k, v in page_params.items()})
    if st.session_state.get("_presenter"):
        query["presenter"] = "true"
    if st.session_state.get("_width") == "fixed":
        query["width"] = "fixed"
    current = {k: v[-1] if v else "" for k, v in _query_dict().items()}
    if current != query:
        st.query_params.from_dict(query)


def url_int(name: str, default: int, low: int, high: int) -> int:
    """A page's own integer parameter from the URL, clamped, with a notice when it was bad (never raises)."""
    raw = st.query_params.get(name)
    if raw is None:
        return default
    value, message = cfg.parse_int(name, raw, default, low, high)
    if message is not None:
        notice(message)
    return value


def url_choice(name: str, default: str, choices: list[str] | tuple[str, ...]) -> str:
    """A page's own choice parameter from the URL, replaced by the default when unknown."""
    raw = st.query_params.get(name)
    if raw is None:
        return default
    value, message = cfg.parse_choice(name, raw, default, choices)
    if message is not None:
        notice(message)
    return value


def range_slider_or_fixed(container, label: str, low: int, high: int, *, key: str, **kwargs) -> int:
    """A slider from low to high; where the range has one value (or none), that value as a caption instead.

    ``st.slider`` raises StreamlitInvalidMinMaxError when min_value == max_value (a one-key window).
    """
    if high <= low:
        st.session_state[key] = low
        container.caption(f"{label}: {low} (the only value these settings allow)")
        return low
    return int(container.slider(label, low, high, key=key, **kwargs))


def section_choice(url_name: str, sections: dict[str, str], default: str) -> str:
    """The open section: the tabs' own state once drawn, else the URL's ``?<url_name>=``, else the default.

    Read before the tabs are drawn, so a page computes and sends only what the open section shows.
    """
    label = st.session_state.get(f"w_{url_name}")
    by_label = {text: name for name, text in sections.items()}
    if label in by_label:
        return by_label[label]
    return url_choice(url_name, default, tuple(sections))


def section_tabs(url_name: str, sections: dict[str, str], current: str):
    """Tabs that rerun the page when switched (Streamlit's lazy tabs), opened on ``current``."""
    return st.tabs(list(sections.values()), key=f"w_{url_name}", on_change="rerun", default=sections[current])


def notice(message: str) -> None:
    """Queue a one-line notice for ``show_notices`` (deduplicated)."""
    notices = st.session_state.setdefault("notices", [])
    if message not in notices:
        notices.append(message)


def show_notices() -> None:
    """Show and clear the queued notices. Their user text is quoted (see settings.quote)."""
    for message in st.session_state.get("notices", []):
        st.warning(message, icon=":material/warning:")
    st.session_state["notices"] = []


# --- widgets ---------------------------------------------------------------------------------------------------------


def _widget_values(settings: Settings) -> dict[str, object]:
    values = {name: getattr(settings, name) for name in FIELD_NAMES if name != "d_out"}
    values["head_dim"] = settings.head_dim
    return values


def _load_widgets(settings: Settings) -> None:
    for name, value in _widget_values(settings).items():
        st.session_state[f"w_{name}"] = value
    st.session_state["w_d_out"] = settings.d_out  # the fixed-width mode's widgets
    st.session_state["w_heads_fixed"] = settings.num_heads


def width_mode() -> str:
    """The heads' width mode, from ?width= once per session (strictly parsed), then kept in the session."""
    state = st.session_state
    if "_width" not in state:
        raw = st.query_params.get("width")
        mode, problem = (
            ("per_head", None) if raw is None else cfg.parse_choice("width", raw, "per_head", cfg.WIDTH_MODES)
        )
        if problem:
            notice(problem)
        state._width = mode
    return state._width


def _on_width_change() -> None:
    state = st.session_state
    state._width = "fixed" if state.w_width_fixed else "per_head"
    _load_widgets(state.settings)


def _try_wider_heads() -> None:
    """One click from the book's head_dim = 1 to heads that differ visibly: 4 heads × head_dim 16."""
    state = st.session_state
    state.settings, state.notices = cfg.reconcile(replace(state.settings, num_heads=4, d_out=64))
    _load_widgets(state.settings)


def _heads_controls(settings: Settings, common: dict) -> None:
    """num_heads and head_dim (d_out follows), or, at a fixed width, d_out and num_heads (head_dim follows)."""
    state, sb = st.session_state, st.sidebar
    fixed = width_mode() == "fixed"
    state["w_width_fixed"] = fixed
    sb.toggle(
        "fixed width: d_out stays, heads split it",
        key="w_width_fixed",
        on_change=_on_width_change,
        help="The book's and GPT-2's convention: head_dim = d_out // num_heads (768 = 12 × 64).",
    )
    if fixed:
        state.setdefault("w_d_out", settings.d_out)
        choices = cfg.head_choices(settings.d_out) or [1]
        if state.get("w_heads_fixed") not in choices:
            state["w_heads_fixed"] = settings.num_heads if settings.num_heads in choices else choices[0]
        sb.number_input("d_out", 1, cfg.MAX_HEADS * cfg.MAX_HEAD_DIM, key="w_d_out", **common)
        sb.select_slider("num_heads", choices, key="w_heads_fixed", help="The divisors of d_out.", **common)
        sb.caption(
            f"head_dim = {settings.d_out} // {settings.num_heads} = **{settings.head_dim}** · "
            f"{cfg.parameter_count(settings):,} parameters for every num_heads: heads split d_out, they add "
            "no weights"
        )
    else:
        sb.slider("num_heads", 1, cfg.MAX_HEADS, key="w_num_heads", help="Number of attention heads.", **common)
        sb.slider(
            "head_dim",
            1,
            cfg.MAX_HEAD_DIM,
            key="w_head_dim",
            help="Features per head; d_out = num_heads × head_dim, so it is always divisible.",
            **common,
        )
        sb.caption(f"d_out = {settings.num_heads} × {settings.head_dim} = **{settings.d_out}**")
    if settings.head_dim == 1 and not settings.trained:
        sb.caption(
            "head_dim = 1: each head's query and key are single numbers, so its scores are products of two "
            "numbers and the ÷√head_dim does nothing."
        )
        sb.button(
            "Try 4 heads × head_dim 16",
            key="w_wider_heads",
            on_click=_try_wider_heads,
            help="d_out = 64: heads with room to differ visibly.",
        )


def _on_widget_change() -> None:
    """Reconcile after any widget moves; write corrections back into the widgets."""
    state = st.session_state
    values = {name: state.get(f"w_{name}", getattr(state.settings, name)) for name in FIELD_NAMES if name != "d_out"}
    head_dim = state.get("w_head_dim", state.settings.head_dim)
    d_out = values["num_heads"] * head_dim
    if state.get("_width") == "fixed":  # d_out stays; num_heads is one of its divisors, head_dim follows
        d_out = int(state.get("w_d_out", state.settings.d_out))
        choices = cfg.head_choices(d_out) or [1]
        wanted = int(state.get("w_heads_fixed", state.settings.num_heads))
        values["num_heads"] = wanted if wanted in choices else min(choices, key=lambda h: abs(h - wanted))
    raw = replace(state.settings, **values, d_out=d_out)
    state.settings, new_notices = cfg.reconcile(raw)
    state.notices = new_notices
    _load_widgets(state.settings)


def settings_sidebar() -> Settings:
    """Draw the settings in the sidebar and return them, reconciled and mirrored in the URL."""
    settings = current_settings()
    state = st.session_state
    for name, value in _widget_values(settings).items():
        state.setdefault(f"w_{name}", value)
    common = {"on_change": _on_widget_change}
    sb = st.sidebar
    sb.header("Settings")
    _heads_controls(settings, common)
    sb.number_input("d_in", 1, cfg.MAX_D_IN, key="w_d_in", help="Embedding size of each input token.", **common)
    sb.slider("num_tokens", 1, cfg.MAX_TOKENS, key="w_num_tokens", help="Sequence length.", **common)
    sb.number_input(
        "context_length",
        1,
        cfg.MAX_CONTEXT,
        key="w_context_length",
        help="Size of the causal mask buffer; at least num_tokens.",
        **common,
    )
    sb.slider("batch_size", 1, cfg.MAX_BATCH, key="w_batch_size", **common)
    sb.selectbox("input", INPUT_KINDS, format_func=INPUT_LABELS.get, key="w_input", **common)
    if settings.input == "text":
        sb.text_input("text", key="w_text", max_chars=cfg.MAX_TEXT_CHARS, **common)
    sb.slider("dropout", 0.0, cfg.MAX_DROPOUT, step=0.05, key="w_dropout", **common)
    sb.toggle("train mode (dropout active)", key="w_train", **common)
    sb.toggle("qkv_bias", key="w_qkv_bias", **common)
    sb.number_input("seed", 0, cfg.MAX_SEED, key="w_seed", help="torch.manual_seed before building.", **common)
    sb.selectbox("device", devices.available_devices(), key="w_device", **common)
    sb.selectbox("dtype", devices.available_dtypes(settings.device), key="w_dtype", **common)
    if state.settings.trained:
        sb.info("These are trained weights (see the Trained heads page).")
        sb.button("Use seeded random weights again", on_click=_forget_trained)
    return state.settings


def _forget_trained() -> None:
    state = st.session_state
    state.settings, state.notices = cfg.reconcile(replace(state.settings, trained=""))
    _load_widgets(state.settings)


PAGES = (  # (script, label, icon): our own navigation, so the explorer is not listed as "app"
    ("app.py", "Explorer", ":material/search:"),
    ("pages/1_Step_through.py", "Step through", ":material/stairs:"),
    ("pages/2_Heads_and_references.py", "Heads and references", ":material/compare:"),
    ("pages/3_Masks_and_cross_attention.py", "Masks and cross-attention", ":material/grid_on:"),
    ("pages/4_Knobs_that_teach.py", "Knobs that teach", ":material/tune:"),
    ("pages/5_Trained_heads.py", "Trained heads", ":material/school:"),
    ("pages/6_Cost.py", "Cost", ":material/speed:"),
    ("pages/7_Follow_a_token.py", "Follow a token", ":material/timeline:"),
)


def navigation() -> None:
    """Links to every page at the top of the sidebar (config hides Streamlit's own list)."""
    from streamlit.errors import StreamlitAPIException

    for script, label, icon in PAGES:
        try:
            st.sidebar.page_link(script, label=label, icon=icon)
        except (StreamlitAPIException, KeyError):
            return  # a page run on its own (AppTest) has no app to link to
    st.sidebar.divider()


def presenter_toggle() -> bool:
    """Presenter mode: large type and no clutter, for a projector. Kept in the URL."""
    navigation()
    state = st.session_state
    if "_presenter" not in state:  # a non-widget copy survives page switches
        state._presenter = st.query_params.get("presenter", "").lower() in ("1", "true", "yes", "on")
    state.setdefault("w_presenter", state._presenter)
    presenter = st.sidebar.toggle(
        "Presenter mode",
        key="w_presenter",
        help="Large type for a projector.",
        on_change=lambda: state.update(_presenter=state.w_presenter),
    )
    if presenter:
        st.markdown(PRESENTER_CSS, unsafe_allow_html=True)  # a constant: nothing from the user
    return presenter


PRESENTER_CSS = """
<style>
  html, body, [data-testid="stAppViewContainer"] { font-size: 22px; }
  [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.35rem; }
  [data-testid="stCaptionContainer"] { font-size: 1.1rem; }
  h1 { font-size: 3rem !important; } h2 { font-size: 2.3rem !important; } h3 { font-size: 1.9rem !important; }
  [data-testid="stMetricValue"] { font-size: 2.6rem; }
  pre code { font-size: 1.1rem; }
  [data-testid="stToolbar"], [data-testid="stDecoration"], footer { display: none; }
  .block-container { padding-top: 1.5rem; max-width: 100%; }
</style>
"""


# --- caches: keyed on settings, never on arrays ----------------------------------------------------------------------


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
    """(module, x (b, T, d_in), token labels) for the settings: seeded random weights, or a trained layer.

    The module is shared by every session: never mutate it (runs.run_trace copies it for train mode).
    """
    if settings.trained:
        from .training_cache import trained_explorer_input

        module, x, labels = trained_explorer_input(settings.trained)
        return module, x, list(labels)
    x, labels = runs.build_input(settings.input_spec())
    return cached_module(settings.module_spec()), x, labels


def npz_download(settings: Settings):
    """A callable for st.download_button: the whole trace as .npz, computed only on click."""

    def make() -> bytes:
        with heavy_gate(settings):
            module, x, labels = module_and_input(settings)
            return runs.trace_npz(runs.run_trace(module, x, train=settings.train, seed=settings.seed), labels)

    return make


def show_figure(panel, presenter: bool = False) -> None:
    """A panel: its heading, the figure (PNG download named after it), and its caption."""
    from ..views import figures

    st.markdown(f"**{panel.title}**")
    st.plotly_chart(
        panel.figure, width="stretch", theme=None, config=figures.png_config_for(panel.figure), key=f"chart_{panel.key}"
    )
    st.caption(panel.caption)


# --- the page boundary -----------------------------------------------------------------------------------------------

log = logging.getLogger("mha_explorer")


def _control_flow_classes() -> tuple[type[BaseException], ...]:
    """Streamlit's own control flow, by class: st.stop raises StopException; st.rerun and st.switch_page raise
    RerunException. Both derive from ScriptControlException (a BaseException): they must pass through."""
    from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

    return (ScriptControlException,)


def _is_streamlit_control_flow(error: BaseException) -> bool:
    return isinstance(error, _control_flow_classes())


def run_page(main: Callable[[], None]) -> None:
    """Run a page's body; turn any exception into a short message that says what to change, and log it.

    Everything but Streamlit's control flow is caught, Streamlit's own API errors included (a widget given
    an impossible range). Out-of-memory gets its own advice; a session that ended mid-run stops quietly.
    The user's settings stay in session state and the URL.
    """
    from . import admission

    try:
        main()
    except BaseException as error:  # noqa: BLE001 - this is the page boundary
        if _is_streamlit_control_flow(error) or not isinstance(error, Exception):
            raise  # st.stop / st.rerun / st.switch_page, KeyboardInterrupt, SystemExit
        if isinstance(error, admission.SessionEndedError):
            log.info("stopped work for a session that ended: %s", error)
            return
        log.error("page failed: %s", "".join(traceback.format_exception(error)))
        if isinstance(error, admission.ServerBusyError):
            st.warning(f"{error} Try again in a minute; your settings are kept.", icon=":material/hourglass:")
        elif isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower():
            st.error(
                "The device ran out of memory for these settings. Lower num_tokens, num_heads or batch_size, "
                "or choose the cpu device."
            )
            _offer_smaller_settings()
        elif isinstance(error, ValueError):
            st.error(f"These settings cannot run: {settings_quote(error)}. Change the setting it names.")
        else:
            st.error(
                f"Something went wrong ({type(error).__name__}). Try smaller settings or reload the page; "
                "the error was logged."
            )


def _offer_smaller_settings() -> None:
    """One click to the nearest smaller setting: half the tokens, or the CPU when on a GPU."""
    settings = st.session_state.get("settings")
    if settings is None:
        return
    if settings.device != "cpu":
        smaller = replace(settings, device="cpu", dtype="float32")
        label = "Run on the cpu instead"
    elif settings.num_tokens > 1:
        smaller = replace(settings, num_tokens=max(1, settings.num_tokens // 2))
        label = f"Try num_tokens = {smaller.num_tokens}"
    else:
        return
    st.button(label, key="oom_smaller", on_click=_apply_settings, args=(smaller,))


def _apply_settings(settings: Settings) -> None:
    state = st.session_state
    state.settings, state.notices = cfg.reconcile(settings)
    _load_widgets(state.settings)


def settings_quote(error: BaseException) -> str:
    return cfg.quote(error, limit=300)
