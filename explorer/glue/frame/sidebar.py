"""The sidebar every page shares: navigation, presenter mode, the settings a page uses; and a page's section tabs.

A page names the settings fields that change what it draws (``settings_sidebar(fields=...)``); the others are not
shown, and stay in the session and the URL untouched. Widgets are keyed ``w_<name>`` and written from the session's
settings on every run before they are drawn (``url.load_widgets``: a page's widgets are new to Streamlit); their
``on_change`` callback reconciles the whole set and writes any correction back into the widgets before the rerun.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import streamlit as st
from streamlit.errors import StreamlitAPIException

from explorer.glue.cached.real_models import LABELS, facts
from explorer.glue.frame import contrast
from explorer.glue.frame.history_guard import install_history_guard
from explorer.glue.state import settings as cfg
from explorer.glue.state.settings import FIELD_NAMES, Settings
from explorer.glue.state.url import (
    apply_settings,
    current_settings,
    load_widgets,
    url_choice,
    width_mode,
)
from explorer.views.markdown_text import escape_markdown
from mha_core import devices
from mha_core.attention.positions import POSITION_KINDS
from mha_core.runs.forward import INPUT_KINDS

POSITION_LABELS = {
    "none": "none (Listing 3.5)",
    "learned": "learned (GPT-2)",
    "sinusoidal": "sinusoidal (Vaswani et al.)",
    "rope": "RoPE (Llama)",
    "alibi": "ALiBi (BLOOM)",
}
INPUT_LABELS = {"book": "The book's six words", "random": "Seeded random embeddings", "text": "A sentence you type"}

# The settings each kind of page draws with (``settings_sidebar(fields=...)``); d_out comes with num_heads.
POSITION_FIELDS = ("positions", "rope_base")  # the position knob: only the pages that draw its views show it
ALL_FIELDS = tuple(n for n in FIELD_NAMES if n not in POSITION_FIELDS)  # the pages that run the sidebar's module
KNOB_FIELDS = ALL_FIELDS + POSITION_FIELDS  # the Explorer and Step through: the module, and the knob beside it
EVAL_FIELDS = tuple(n for n in ALL_FIELDS if n not in ("dropout", "train"))  # the module in eval mode (a knob's own p)
CROSS_FIELDS = ("num_heads", "d_out", "batch_size", "qkv_bias", "seed", "device", "dtype")  # QKV cross-attention
COST_FIELDS = ("num_heads", "d_out", "batch_size", "seed", "device", "dtype")  # a timing of the attention alone
TRAINING_FIELDS = ("seed", "device")  # Trained heads: its model has its own shape
# Attention variants: five float32 modules built on the CPU from the shape and seed, on the sidebar's input
VARIANT_FIELDS = (
    "num_heads",
    "d_out",
    "d_in",
    "num_tokens",
    "context_length",
    "batch_size",
    "qkv_bias",
    "seed",
    "input",
)


def range_slider_or_fixed(container, label: str, low: int, high: int, *, key: str, **kwargs) -> int:
    """A slider from low to high; where the range has one value (or none), that value as a caption instead.

    ``st.slider`` raises StreamlitInvalidMinMaxError when min_value == max_value (a one-key window).
    """
    if high <= low:
        st.session_state[key] = low
        container.caption(f"{escape_markdown(label)}: {low} (the only value these settings allow)")
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


# --- the settings ----------------------------------------------------------------------------------------------------


def _on_width_change() -> None:
    state = st.session_state
    state._width = "fixed" if state.w_width_fixed else "per_head"
    load_widgets(state.settings)


def _try_wider_heads() -> None:
    """One click from the book's head_dim = 1 to heads that differ visibly: 4 heads × head_dim 16."""
    apply_settings(replace(st.session_state.settings, num_heads=4, d_out=64))


def _fixed_width_controls(settings: Settings, common: dict) -> None:
    """d_out and num_heads (one of its divisors); head_dim follows."""
    state, sb = st.session_state, st.sidebar
    choices = cfg.head_choices(settings.d_out) or [1]
    if state.get("w_heads_fixed") not in choices:
        state["w_heads_fixed"] = settings.num_heads if settings.num_heads in choices else choices[0]
    sb.number_input("d_out", 1, cfg.MAX_HEADS * cfg.MAX_HEAD_DIM, key="w_d_out", **common)
    sb.select_slider("num_heads", choices, key="w_heads_fixed", help="The divisors of d_out.", **common)
    sb.caption(
        f"head_dim = {settings.d_out} // {settings.num_heads} = **{settings.head_dim}** · "
        f"{cfg.parameter_count(settings):,} parameters for every num_heads: heads split d_out, they add no weights"
    )


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
        _fixed_width_controls(settings, common)
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
    """Reconcile after any widget moves; write corrections back into the widgets (a field not drawn keeps its
    value from the settings)."""
    state = st.session_state
    values = {name: state.get(f"w_{name}", getattr(state.settings, name)) for name in FIELD_NAMES if name != "d_out"}
    head_dim = state.get("w_head_dim", state.settings.head_dim)
    d_out = values["num_heads"] * head_dim
    if state.get("_width") == "fixed":  # d_out stays; num_heads is one of its divisors, head_dim follows
        d_out = int(state.get("w_d_out", state.settings.d_out))
        choices = cfg.head_choices(d_out) or [1]
        wanted = int(state.get("w_heads_fixed", state.settings.num_heads))
        values["num_heads"] = wanted if wanted in choices else min(choices, key=lambda h: abs(h - wanted))
    apply_settings(replace(state.settings, **values, d_out=d_out))


def _input_controls(settings: Settings, shown: set[str], common: dict) -> None:
    sb = st.sidebar
    if "d_in" in shown:
        sb.number_input("d_in", 1, cfg.MAX_D_IN, key="w_d_in", help="Embedding size of each input token.", **common)
    if "num_tokens" in shown:
        sb.slider("num_tokens", 1, cfg.MAX_TOKENS, key="w_num_tokens", help="Sequence length.", **common)
    if "context_length" in shown:
        sb.number_input(
            "context_length",
            1,
            cfg.MAX_CONTEXT,
            key="w_context_length",
            help="Size of the causal mask buffer; at least num_tokens.",
            **common,
        )
    if "batch_size" in shown:
        sb.slider("batch_size", 1, cfg.MAX_BATCH, key="w_batch_size", **common)
    if "input" in shown:
        sb.selectbox("input", INPUT_KINDS, format_func=INPUT_LABELS.get, key="w_input", **common)
        if settings.input == "text":
            sb.text_input("text", key="w_text", max_chars=cfg.MAX_TEXT_CHARS, **common)


def _module_controls(settings: Settings, shown: set[str], common: dict) -> None:
    sb = st.sidebar
    if "dropout" in shown:
        sb.slider("dropout", 0.0, cfg.MAX_DROPOUT, step=0.05, key="w_dropout", **common)
    if "train" in shown:
        sb.toggle("train mode (dropout active)", key="w_train", **common)
    if "qkv_bias" in shown:
        sb.toggle("qkv_bias", key="w_qkv_bias", **common)
    if "seed" in shown:
        sb.number_input("seed", 0, cfg.MAX_SEED, key="w_seed", help="torch.manual_seed before building.", **common)
    if "device" in shown:
        sb.selectbox("device", devices.available_devices(), key="w_device", **common)
    if "dtype" in shown:
        sb.selectbox("dtype", devices.available_dtypes(settings.device), key="w_dtype", **common)
    if "positions" in shown:
        sb.selectbox(
            "positions",
            POSITION_KINDS,
            format_func=POSITION_LABELS.get,
            key="w_positions",
            help="Drawn beside the module in its Positions views; the module itself stays Listing 3.5.",
            **common,
        )
    if "rope_base" in shown and settings.positions == "rope":
        sb.select_slider(
            "rope_base",
            cfg.ROPE_BASES,
            format_func="{:,}".format,
            key="w_rope_base",
            help="RoPE's θ base: pair k turns by position × base^(−2k/head_dim).",
            **common,
        )


def settings_sidebar(fields: Iterable[str] = ALL_FIELDS) -> Settings:
    """Draw the settings this page uses in the sidebar and return all of them, reconciled.

    Only ``fields`` are drawn, and only notices about them are shown (see ``url.show_notices``); the others keep
    their values in the session and in the URL (``url.sync_url`` writes every field).
    """
    settings = current_settings()
    state = st.session_state
    shown = set(fields)
    state["_page_fields"] = tuple(shown)
    load_widgets(settings)  # on every run: each page's widgets are new to Streamlit (see load_widgets)
    common = {"on_change": _on_widget_change}
    st.sidebar.header("Settings")
    if "num_heads" in shown:
        _heads_controls(settings, common)
    _input_controls(settings, shown, common)
    _module_controls(settings, shown, common)
    if state.settings.model and "model" in shown:
        _real_model_controls(state.settings, common)
    if state.settings.trained and "trained" in shown:
        st.sidebar.info("These are trained weights (see the Trained heads page).")
        st.sidebar.button("Use seeded random weights again", on_click=_forget_trained)
    return state.settings


def _forget_trained() -> None:
    apply_settings(replace(st.session_state.settings, trained=""))


def _real_model_controls(settings: Settings, common: dict) -> None:
    """A real GPT's layer: which block, and the way back to seeded random weights."""
    known = facts(settings.model)
    layers = list(range(known.n_layers if known is not None else settings.layer + 1))
    st.sidebar.info(
        f"These are layer {settings.layer} of {LABELS[settings.model]}'s weights, on its real input: your sentence "
        "through the layers below it (see the Real heads page)."
    )
    st.sidebar.selectbox("layer", layers, key="w_layer", help="Which block's attention to trace.", **common)
    st.sidebar.button("Use seeded random weights again", key="w_forget_model", on_click=_forget_model)


def _forget_model() -> None:
    apply_settings(replace(st.session_state.settings, model="", layer=0))


# --- navigation and presenter mode -----------------------------------------------------------------------------------

PAGES = (  # (script, label, icon): our own navigation, so the explorer is not listed as "app"
    ("app.py", "Explorer", ":material/search:"),
    ("pages/1_Step_through.py", "Step through", ":material/stairs:"),
    ("pages/2_Heads_and_references.py", "Heads and references", ":material/compare:"),
    ("pages/3_Masks_and_cross_attention.py", "Masks and cross-attention", ":material/grid_on:"),
    ("pages/4_Knobs_that_teach.py", "Knobs that teach", ":material/tune:"),
    ("pages/5_Trained_heads.py", "Trained heads", ":material/school:"),
    ("pages/6_Cost.py", "Cost", ":material/speed:"),
    ("pages/7_Follow_a_token.py", "Follow a token", ":material/timeline:"),
    ("pages/8_Real_heads.py", "Real heads", ":material/psychology:"),
    ("pages/9_Attention_variants.py", "Attention variants", ":material/call_split:"),
)


def navigation() -> None:
    """Links to every page at the top of the sidebar (config hides Streamlit's own list)."""
    for script, label, icon in PAGES:
        try:
            st.sidebar.page_link(script, label=label, icon=icon)
        except (StreamlitAPIException, KeyError):
            return  # a page run on its own (AppTest) has no app to link to
    install_history_guard()  # a page a link opens is one history entry: Back returns to the page before
    st.sidebar.divider()


START_PATHS = (  # (who, why, the pages in order): the front page's "Where to start", one line each
    (
        "Start here",
        "the module step by step, then one token, then whole heads, then a real GPT's",
        (
            "pages/1_Step_through.py",
            "pages/7_Follow_a_token.py",
            "pages/2_Heads_and_references.py",
            "pages/8_Real_heads.py",
        ),
    ),
    (
        "With a class",
        "In presenter mode, Page Down steps through Listing 3.5; then masks, the knobs, and heads that learned",
        (
            "pages/1_Step_through.py",
            "pages/3_Masks_and_cross_attention.py",
            "pages/4_Knobs_that_teach.py",
            "pages/5_Trained_heads.py",
        ),
    ),
)


def where_to_start(shown: bool) -> None:
    """The front page's starting paths, one row of page links each. Drawn as one block whether shown or not, so the
    blocks after it keep their places (url.show_notices says why that matters)."""
    labels = {script: (label, icon) for script, label, icon in PAGES}
    with st.container():
        if not shown:
            return
        for who, why, scripts in START_PATHS:
            widths = [len(who) + 6, *(len(labels[script][0]) + 6 for script in scripts)]  # no label cut at 1280 px
            columns = st.columns(widths, gap="small", vertical_alignment="center")
            columns[0].markdown(f"**{who}:**", help=why)
            for column, script in zip(columns[1:], scripts, strict=True):
                label, icon = labels[script]
                try:
                    column.page_link(script, label=label, icon=icon)
                except (StreamlitAPIException, KeyError):
                    return  # as in navigation: a page run on its own has no app to link to


def presenter_toggle() -> bool:
    """Presenter mode: large type and no clutter, for a projector, with the sidebar folded away. Kept in the URL."""
    navigation()
    state = st.session_state
    if "_presenter" not in state:  # a non-widget copy survives page switches
        state._presenter = st.query_params.get("presenter", "").lower() in ("1", "true", "yes", "on")
    state["w_presenter"] = state._presenter  # on every run, as the settings' widgets (url.load_widgets says why)
    presenter = st.sidebar.toggle(
        "Presenter mode",
        key="w_presenter",
        help="Large type for a projector; the sidebar folds away (its › button opens it).",
        on_change=lambda: state.update(_presenter=state.w_presenter),
    )
    # The browser applies this only when it changes (and a visitor's own fold or unfold, kept by the browser, wins).
    st.set_page_config(initial_sidebar_state="collapsed" if presenter else "auto")
    if presenter:
        st.html(PRESENTER_CSS)  # a constant: nothing from the user
    contrast.apply()  # every page calls this function: Streamlit's own colours mended for WCAG AA
    return presenter


# Presenter mode's type, for a projector at the back of a room: everything larger, nothing cut. Metric values need
# selectors more specific than the markdown rule (they are markdown inside). Tables are HTML in presenter mode
# (boundary.show_table): st.dataframe draws on a canvas at the theme's size, and a CSS zoom ran it past the page's
# edge. The sidebar keeps its width, so its page names wrap rather than end in "…". The header stays: its toolbar
# holds the button that unfolds the sidebar (and the menu's theme switch).
PRESENTER_CSS = """
<style>
  html, body, [data-testid="stAppViewContainer"] { font-size: 22px; }
  [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.2rem; }
  [data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p { font-size: 1.05rem; }
  [data-testid="stMain"] h1 { font-size: 2.2rem !important; padding-top: 0; }
  [data-testid="stMain"] h2 { font-size: 1.9rem !important; }
  [data-testid="stMain"] h3 { font-size: 1.6rem !important; }
  [data-testid="stMetricValue"], [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p {
    font-size: 2.6rem !important; }
  [data-testid="stMetricValue"] div, [data-testid="stMetricValue"] p, [data-testid="stMetricLabel"] div,
  [data-testid="stMetricLabel"] p { white-space: normal !important;
    overflow: visible !important; overflow-wrap: anywhere; line-height: 1.15; }
  [data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"] p { font-size: 1.1rem; }
  [data-testid="stTable"] table, [data-testid="stMarkdownContainer"] table { font-size: 1.15rem; }
  [data-testid="stTable"] th p, [data-testid="stTable"] td p { font-size: 1.1rem; }
  [data-testid="stTable"] > div { overflow-x: auto; }
  pre code { font-size: 1.05rem; }
  [data-testid="stSidebar"] [data-testid="stPageLink-NavLink"] span { white-space: normal; overflow: visible; }
  [data-testid="stSliderThumbValue"] { transform: translateY(-0.55rem); }
  [data-testid="stSlider"] > label + div { padding-top: 0.3rem; }
  [data-testid="stToolbarActions"], [data-testid="stDecoration"], footer { display: none; }
  [data-testid="stHeader"] { background: transparent; height: 2.2rem; min-height: 2.2rem; }
  .block-container, [data-testid="stMainBlockContainer"] { padding-top: 1.6rem; padding-bottom: 2rem;
    max-width: 100%; }
  [class*="st-key-stage_"] { height: calc(100vh - 230px) !important; min-height: 320px; flex: 0 0 auto !important; }
</style>
"""
