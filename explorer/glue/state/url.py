"""The URL as state: the session's settings from the query string and back, a page's own parameters, notices.

Canonical settings live in ``st.session_state["settings"]`` (a frozen ``Settings``), so they survive page switches,
where Streamlit drops the state of widgets not on the page. Widgets are keyed ``w_<name>``; ``load_widgets`` writes
the settings into them on every run before they are drawn: the widgets show the settings, and change them only
through their ``on_change`` (docs/decisions.md, issue 42).
"""

from __future__ import annotations

import re
import threading

import streamlit as st

from explorer.glue.state import settings as cfg
from explorer.glue.state.settings import FIELD_NAMES, Settings
from explorer.glue.state.user_text import quote
from mha_core.gpt import knockout
from mha_core.runs import forward as runs
from mha_core.runs import profiling, teaching, token_order
from mha_core.toy import tasks

# A page's own parameters: their choices and bounds. Each lives in mha_core beside the code that accepts it; pages
# import only explorer, so they read them here, as the sidebar's bounds come from settings.py.
MASK_KINDS = teaching.MASK_KINDS
MASK_IMPLEMENTATIONS = teaching.IMPLEMENTATIONS
MAX_CROSS_TOKENS = teaching.MAX_CROSS_TOKENS  # query and key lengths on the Masks page
MaskParams = teaching.MaskParams  # the Masks page's run request: a mask's kind and its parameters
PRESETS = teaching.PRESETS  # the Knobs page's preset weights
SCALE_MULTIPLIERS = runs.SCALE_MULTIPLIERS  # the Knobs page's temperature choices, as URL text
TASKS = tasks.TASKS  # the Trained heads page's tasks: name → defaults and description
MAX_SHUFFLE = token_order.MAX_SHUFFLE  # the Explorer's Positions section: ?shuffle=, a seeded permutation
COST_TOKEN_CHOICES = tuple(t for t in profiling.TOKEN_STEPS if t >= profiling.CostSpec.min_tokens)  # 64 … 1024


def _query_dict() -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params.keys()}  # noqa: SIM118


def current_settings() -> Settings:
    """The session's settings: from the URL on first load (or when the URL changes), else as kept."""
    state = st.session_state
    url_settings = cfg.settings_params(_query_dict())
    last_written = state.get("_written_query")
    if "settings" not in state:
        state.settings, state.notices = cfg.parse_query(url_settings)
        load_widgets(state.settings)
    elif url_settings and last_written is not None and url_settings != {k: [v] for k, v in last_written.items()}:
        state.settings, state.notices = cfg.parse_query(url_settings, base=state.settings)
        load_widgets(state.settings)
    return state.settings


def sync_url(settings: Settings, **page_params: object) -> None:
    """Mirror the settings (every field, shown on this page or not) and a page's own parameters into the URL."""
    query = cfg.to_query(settings)
    query.update({k: str(v) for k, v in page_params.items()})
    # the settings as written (a page's own ?layer= may stand where the settings' layer would): only they compare
    st.session_state["_written_query"] = cfg.settings_params(query)
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


def url_int_or_none(name: str, low: int, high: int, none_text: str) -> int | None:
    """A page's own optional integer (``?head=``): None when absent or not a number (the notice says ``none_text``),
    else clamped to [low, high] with a notice."""
    raw = st.query_params.get(name)
    if raw is None:
        return None
    value, message = cfg.parse_int(name, raw, low, low, high)
    if message is not None and " is outside " not in message:
        notice(f"{name}={cfg.quote(raw)} is not a whole number; {none_text}.")
        return None
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


def url_heads(name: str, num_layers: int, num_heads: int) -> set[tuple[int, int]]:
    """A page's own list of heads (``?ablate=0.1,1.3``: layer.head, comma separated), strictly parsed: a malformed
    list gives none and a head the model lacks is dropped, each with a notice (never raises)."""
    raw = st.query_params.get(name)
    if raw is None:
        return set()
    try:
        if len(raw) > 400:
            raise ValueError("too long")
        pairs = knockout.parse_heads(raw)
    except ValueError as error:
        notice(f"{name}={quote(raw)}: {error}; knocking out no head.")
        return set()
    kept = {(layer, head) for layer, head in pairs if layer < num_layers and head < num_heads}
    dropped = sorted(set(pairs) - kept)
    if dropped:
        missing = ", ".join(f"{layer}.{head}" for layer, head in dropped)
        notice(f"{name}: no head {missing} in a model of {num_layers} layers × {num_heads} heads; left out.")
    return kept


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


# --- settings <-> widgets --------------------------------------------------------------------------------------------


def widget_values(settings: Settings) -> dict[str, object]:
    values = {name: getattr(settings, name) for name in FIELD_NAMES if name != "d_out"}
    values["head_dim"] = settings.head_dim
    return values


def load_widgets(settings: Settings) -> None:
    """Write the settings into their widgets' keys, before the widgets are drawn (the sidebar does it on every run).

    Streamlit 1.67 gives a widget another id on every page, and a key already "in" session state may be the last
    page's widget's: a page that only filled missing keys drew its own at their defaults (1 head, seed 0) on every
    other page switch, and the next slider move applied them. A written key is the value the widget shows.
    """
    for name, value in widget_values(settings).items():
        st.session_state[f"w_{name}"] = value
    st.session_state["w_d_out"] = settings.d_out  # the fixed-width mode's widgets
    st.session_state["w_heads_fixed"] = settings.num_heads


def apply_settings(settings: Settings) -> None:
    """Make ``settings`` (reconciled) the session's, with their notices, and show them in the widgets."""
    state = st.session_state
    state.settings, state.notices = cfg.reconcile(settings)
    load_widgets(state.settings)


# --- notices ---------------------------------------------------------------------------------------------------------

# Words by which a settings notice names a field, beyond the field's own name (the notices are prose).
_FIELD_WORDS = {
    "input": ("input", "sentence", "book's embeddings"),
    "text": ("sentence",),
    "d_out": ("d_out", "head_dim"),
    "model": ("model=", "GPT-2"),  # "the shipped model" alone names no setting
    "layer": ("layer=",),  # "Showing layer 0 of …" names the fields that follow the layer, not the layer
}


def notice_fields(message: str) -> set[str]:
    """The settings fields a settings notice is about."""
    found = set()
    for name in FIELD_NAMES:
        words = _FIELD_WORDS.get(name, (name,))
        if any(re.search(rf"(?<!\w){re.escape(word)}(?!\w)", message, flags=re.IGNORECASE) for word in words):
            found.add(name)
    return found


def notice(message: str) -> None:
    """Queue a page's own one-line notice for ``show_notices`` (deduplicated): a bad ?step=, a fitted budget."""
    notices = st.session_state.setdefault("page_notices", [])
    if message not in notices:
        notices.append(message)


def show_notices() -> None:
    """Show and clear the queued notices that concern this page: its own, and the settings' notices about a field
    it uses (``st.session_state["_page_fields"]``, set by the settings sidebar). Their user text is quoted.

    They sit in a container that is drawn (empty, no gap) when there are none. Streamlit's browser side keys a block
    by its place among its siblings: a notice gone on the next rerun moved every block after it one place up, and
    remounted their charts (5 of 6 at 8 heads × 512 tokens, the first slider move after a shared link)."""
    state = st.session_state
    used = set(state.get("_page_fields", FIELD_NAMES))
    settings_notices = [m for m in state.get("notices", []) if not notice_fields(m) or notice_fields(m) & used]
    box = st.container()
    with box:  # one block, notices or none (the docstring says why)
        for message in settings_notices + state.get("page_notices", []):
            st.warning(message, icon=":material/warning:")
    state["notices"], state["page_notices"] = [], []
    _BOX.box = box


# The notices' block of the run in this thread, once drawn: a widget first declared below it (a new tab's first
# message, checked then: server_setup) has its correction drawn there, in this run, not on the next.
_BOX = threading.local()


def forget_notice_box() -> None:
    """A new run begins in this thread: its notices are not drawn yet."""
    _BOX.box = None


def notice_late(messages: list[str]) -> bool:
    """Draw ``messages`` in this run's notices block if it is drawn already; False if not (queue them instead)."""
    box = getattr(_BOX, "box", None)
    if box is None:
        return False
    for message in messages:
        box.warning(message, icon=":material/warning:")
    return True
