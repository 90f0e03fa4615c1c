"""Attention variants: a KV cache, grouped-query and multi-query, latent and sliding-window attention.

Five modules built from the sidebar's shape and seed (explorer.glue.cached.variant_runs, mha_core.variants.page_runs),
drawn by explorer.views.attention_variants: which key/value head each query head reads, the KV cache's bytes against the
context length for this module and named models, decoding one token at a time with the cache, and the shipped GPT
converted to GQA, MQA and sliding windows with no retraining (explorer.views.attention_variants_trained).
"""

from dataclasses import replace

import streamlit as st

from explorer.glue.cached import teaching_runs
from explorer.glue.cached import variant_runs as variants_cache
from explorer.glue.frame import boundary, sidebar
from explorer.glue.memory import caches
from explorer.glue.state import url
from explorer.views import attention_variants, attention_variants_decoding

st.set_page_config(page_title="Attention variants · Multi-Head Attention Explorer", page_icon="🔀", layout="wide")

SECTIONS = {
    "heads": "1. Shared K/V heads",
    "bytes": "2. KV-cache bytes",
    "decode": "3. Decoding",
    "trained": "4. The trained GPT",
}


def main() -> None:
    presenter = sidebar.presenter_toggle()
    variants_cache.open_on_teaching_shape()  # before the sidebar draws: it shows the shape the page runs on
    settings = sidebar.settings_sidebar(fields=sidebar.VARIANT_FIELDS)
    # the variants run in float32 and eval mode whatever the sidebar's dtype and train mode: fitted as they run
    fitted = caches.fit_page(replace(settings, dtype="float32", train=False), "variants")
    groups, latent, window = variant_controls(fitted)
    state = st.session_state

    st.title("Attention variants")
    section = sidebar.section_choice("section", SECTIONS, default="heads")
    seed_page_params()
    url.show_notices()
    if not presenter:
        st.markdown(attention_variants.intro_text())
    tabs = dict(zip(SECTIONS, sidebar.section_tabs("section", SECTIONS, section), strict=True))
    with tabs[section]:
        {"heads": heads_section, "bytes": bytes_section, "decode": decode_section, "trained": trained_section}[section](
            fitted, (groups, latent, window), presenter
        )
    url.sync_url(
        settings,
        section=section,
        kv_groups=groups,
        latent=latent,
        window=window,
        variant=state.var_kind,
        config=state.var_config,
        source=state.var_source,
        new_tokens=int(state.var_new_tokens),
        step=int(state.var_step),
    )


def variant_controls(fitted) -> tuple[int, int, int]:
    """The sidebar's num_kv_groups, latent width and window (seeded from the URL); their values."""
    groups, latent, window = variants_cache.page_params(fitted)
    st.sidebar.header("Variants")
    st.sidebar.select_slider(
        "num_kv_groups (GQA)",
        variants_cache.divisors(fitted.num_heads),
        key="var_kv_groups",
        help="Key/value heads; each is shared by num_heads / num_kv_groups query heads. 1 is multi-query attention.",
    )
    st.sidebar.number_input(
        "latent width (MLA)",
        1,
        variants_cache.MAX_LATENT,
        key="var_latent",
        help="Numbers cached per token; keys and values are rebuilt from them.",
    )
    sidebar.range_slider_or_fixed(
        st.sidebar,
        "window (SWA)",
        1,
        fitted.context_length,
        key="var_window",
        help="Each query sees itself and the window − 1 keys before it.",
    )
    state = st.session_state
    return int(state.var_kv_groups), int(state.var_latent), int(state.var_window)


def seed_page_params() -> None:
    """Every section's own URL values, read once into the widgets' state (clamped, with notices) before the notices
    are shown: the other sections keep theirs in the URL."""
    seed_choice, seed_int = teaching_runs.seed_choice, teaching_runs.seed_int
    seed_choice("var_kind", "variant", "GQA", variants_cache.VARIANT_KINDS)
    seed_choice("var_config", "config", variants_cache.CONFIG_CHOICES[0], variants_cache.CONFIG_CHOICES)
    seed_choice("var_source", "source", "gpt", tuple(variants_cache.SOURCES))
    seed_int("var_new_tokens", "new_tokens", 24, 1, variants_cache.MAX_NEW_TOKENS)
    seed_int("var_step", "step", 1, 0, variants_cache.MAX_NEW_TOKENS)


def show_panels(panels, presenter: bool) -> None:
    for panel in panels:
        boundary.show_figure(panel, bare=presenter)


def heads_section(settings, params, presenter: bool) -> None:
    kind = st.radio("variant", variants_cache.VARIANT_KINDS, key="var_kind", horizontal=True)
    panels, table, look = variants_cache.heads_view(settings, *params, kind, 0, presenter)
    st.markdown(look)
    show_panels(panels, presenter)
    st.header("Parameters and KV cache per variant, for these settings")
    boundary.show_table(table, presenter=presenter, key="var_table")
    st.caption(
        f"Computed from the five modules: parameters counted on them, the cache measured on their tensors after "
        f"a prefill of all {settings.num_tokens} tokens (batch {settings.batch_size}, float32), beside the formula."
    )


def bytes_section(settings, params, presenter: bool) -> None:
    choice = st.selectbox("config", variants_cache.CONFIG_CHOICES, key="var_config")
    panel, table, text = variants_cache.bytes_view(settings, *params, choice, presenter)
    st.markdown(text)
    boundary.show_figure(panel, bare=presenter)
    boundary.show_table(table, presenter=presenter, key="var_bytes_table")
    if not presenter:
        st.caption(attention_variants.BOOK_FIGURES)


def decode_section(settings, params, presenter: bool) -> None:
    source = st.radio(
        "decode with",
        tuple(variants_cache.SOURCES),
        key="var_source",
        format_func=variants_cache.SOURCES.get,
        horizontal=True,
    )
    kind = st.radio("variant", variants_cache.VARIANT_KINDS, key="var_kind", horizontal=True, disabled=source == "gpt")
    absent = variants_cache.gpt_absent_reason() if source == "gpt" else ""
    if absent:
        st.info(f"{absent} Decoding the chosen variant instead.")
        source = "variant"
    new_tokens = st.session_state.var_new_tokens
    if source == "gpt":
        st.slider("new tokens", 1, variants_cache.MAX_NEW_TOKENS, key="var_new_tokens")
    step = st.session_state.var_step
    view = variants_cache.decoding_view(settings, *params, source, kind, int(new_tokens), int(step), presenter)
    st.session_state.var_step = min(int(step), view.calls - 1)  # fewer calls than the link's step: the last
    sidebar.range_slider_or_fixed(st, "call shown", 0, view.calls - 1, key="var_step")
    st.markdown(attention_variants_decoding.decoding_summary(view))
    show_panels(view.panels, presenter)


def trained_section(settings, params, presenter: bool) -> None:
    """The shipped GPT converted (not the sidebar's shape): its table, and quality against cache bytes."""
    absent = variants_cache.gpt_absent_reason()
    if absent:
        st.info(absent)
        return
    panel, table, look = variants_cache.trained_view(presenter)
    st.markdown(look)
    boundary.show_figure(panel, bare=presenter)
    boundary.show_table(table, presenter=presenter, key="var_trained_table")
    if not presenter:
        st.caption(
            "The shipped GPT, not the sidebar's module: each row is a private copy of it with every layer's attention "
            "converted, scored on held-out text and on English it never saw, typed twice. Cache bytes by the same "
            "formula as section 2."
        )


boundary.run_page(main)
