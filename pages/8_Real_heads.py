"""Real heads: a real GPT's every layer and head on a sentence you type, what kind of head each one is, and one click
to open any head in the Explorer or Follow a token on that layer's real input.

The model and the sentence are the session's settings (``?model=own|gpt2&text=...``, fitted in
explorer.glue.real_fit); the readings are cached per (model, text) in explorer.glue.real_models, the figures built in
explorer.views.real_heads.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitAPIException, StreamlitPageNotFoundError

from explorer.glue import boundary, real_models, sidebar, url
from explorer.glue import settings as cfg
from explorer.views import real_heads

st.set_page_config(page_title="Real heads · Multi-Head Attention Explorer", page_icon="🧠", layout="wide")

MODEL_LABELS = {"own": "Our model, trained on Python's docs", "gpt2": "GPT-2 (124M, OpenAI)"}
TARGETS = {  # (script, the path a plain link opens, label)
    "explorer": ("app.py", "./", "Explorer"),
    "follow": ("pages/7_Follow_a_token.py", "./Follow_a_token", "Follow a token"),
    "circuits": ("pages/2_Heads_and_references.py", "./Heads_and_references", "W_QK and W_OV (circuits)"),
}
TARGET_QUERY = {"circuits": {"part": "circuits"}}  # a target's own parameters, beside the head's


def main() -> None:
    presenter = sidebar.presenter_toggle()
    settings = first_visit(url.current_settings())
    st.session_state["_page_fields"] = ("text", "model", "layer", "device")  # the notices this page shows
    st.title("Real heads")
    if not presenter:
        st.markdown(
            "A real GPT reads your sentence. Every layer's attention is the project's own `MultiHeadAttention`, "
            "the module the Explorer traces: below, all of its heads at once, what kind of head each one is, "
            "and one click to open any of them in the Explorer on the layer's real input."
        )
    name = choose_model(settings)
    text = choose_text(name)
    linked = linked_head(name)
    url.show_notices()
    if name is None:
        return
    view = real_models.page_view(name, text, presenter)
    st.header("What comes next?")
    show_prediction(view, presenter)
    st.header("Every head at once")
    if not presenter:
        st.markdown(
            "Each square is one head's attention weights on your sentence, as in BertViz's model view: row i is "
            "the token that reads, column j a token it may read (only earlier ones: the mask), brighter is more "
            "weight. A bright line just under the diagonal is a previous-token head; a bright first column, a "
            "first-token head."
        )
    figure(view.model_view, presenter)
    st.header("What kind of head is each?")
    show_kinds(view, name, text, presenter)
    st.header("Open any head")
    show_open_any(view, name, text, linked)
    st.header("Induction: a repeat gets easier")
    figure(view.induction, presenter)
    st.markdown(real_heads.induction_sentence(*view.copy_losses, view.vocab_size))
    show_about(name)
    url.sync_url(st.session_state.settings)


def first_visit(settings):
    """The session on a real model from here on (the Explorer's sidebar offers the way back); without a sentence in
    the link, one in the shipped model's own register, Python's documentation."""
    if settings.model:
        return settings
    state = st.session_state
    text = settings.text if "text" in st.query_params else real_models.DEFAULT_TEXT
    earlier = list(state.get("notices", []))  # the link's own notices stay
    url.apply_settings(replace(settings, model="own", text=text, layer=0))
    state.notices = earlier + [m for m in state.notices if m not in earlier]
    return state.settings


def _apply(model: str, text: str) -> None:
    settings = st.session_state.settings
    url.apply_settings(replace(settings, model=model, text=text, layer=settings.layer if settings.model else 0))


def choose_model(settings) -> str | None:
    """The model radio; GPT-2 serves once on this server (a Download button), else the shipped model, said plainly."""
    state = st.session_state
    if "w_rh_model" not in state:  # a ?model=gpt2 link still asks for GPT-2 where the settings fell back
        asked = st.query_params.get("model", settings.model or "own")
        state.w_rh_model = cfg.parse_choice("model", asked, settings.model or "own", cfg.REAL_MODELS)[0]
    wanted = st.radio(
        "model",
        list(MODEL_LABELS),
        key="w_rh_model",
        format_func=MODEL_LABELS.get,
        horizontal=True,
        on_change=lambda: _apply(state.w_rh_model, state.settings.text),
    )
    if wanted == "gpt2" and not real_models.gpt2_ready():
        offer_gpt2()
    name = "gpt2" if wanted == "gpt2" and real_models.gpt2_ready() else "own"
    reason = real_models.own_absent_reason() if name == "own" else ""
    if reason:
        st.info(f"{reason} This page needs it: there is nothing to draw yet.", icon=":material/info:")
        return None
    return name


def offer_gpt2() -> None:
    """GPT-2's notice, and its Download button where this server might fetch it (the notice says what happened)."""
    reason = real_models.gpt2_absent_reason()
    state = st.session_state
    state.notices = [m for m in state.get("notices", []) if reason not in m]  # said here, beside the button
    slot = st.empty()
    if real_models.gpt2_offline():
        slot.info(f"{reason} Our own model serves instead.", icon=":material/cloud_off:")
        return
    slot.info(f"{reason} Our own model serves until it is here.", icon=":material/download:")
    if st.button(f"Download GPT-2 ({real_models.GPT2_FETCH_MB} MB)", key="w_rh_download"):
        bar = st.progress(0.0, text="Downloading GPT-2…")

        def progress(done: int, total: int | None) -> None:
            of = f" of {total / 1e6:.0f}" if total else ""
            bar.progress(min(1.0, done / total) if total else 0.0, text=f"Downloading GPT-2… {done / 1e6:.0f}{of} MB")

        real_models.download_gpt2(progress)  # offline, the rerun says so (without a button)
        st.rerun()


def choose_text(name: str | None) -> str:
    """The sentence box (the session's text); a sentence longer than the page draws is cut with a notice."""
    state = st.session_state
    state.setdefault("w_rh_text", state.settings.text)
    st.text_input(
        "Type a sentence",
        key="w_rh_text",
        max_chars=cfg.MAX_TEXT_CHARS,
        on_change=lambda: _apply(state.settings.model or "own", state.w_rh_text),
    )
    text = state.settings.text
    if name is not None:
        count = len(real_models.token_ids(name, text))
        if count > real_models.PAGE_TOKEN_CAP:
            url.notice(f"The sentence is {count} tokens long; this page draws the first {real_models.PAGE_TOKEN_CAP}.")
    return text


def figure(panel, presenter: bool) -> None:
    """A panel under this page's own section heading: the figure, then its caption (shapes), unless presenting."""
    boundary.show_figure(panel, bare=True)
    if not presenter:
        st.caption(panel.caption)


def show_prediction(view, presenter: bool) -> None:
    """The next token: a language model's whole job, in five bars."""
    left, right = st.columns([3, 2])
    with left:
        figure(view.top5, presenter)
    with right:
        st.markdown("**Your sentence and the model's first choice for what follows:**")
        st.markdown(cfg.quote(f"{view.sentence}⟨{view.top5_rows[0]['token']}⟩", limit=400))  # user text: a code span
        boundary.show_table(view.top5_rows, presenter=presenter, key="rh_top5", formats={"probability": "%.3f"})


def head_link(target: str, name: str, text: str, layer: int, head: int, label: str) -> None:
    """A link that opens one head of one layer on this sentence, in the Explorer or on Follow a token."""
    script, path, _ = TARGETS[target]
    query = {"model": name, "layer": str(layer), "head": str(head), "text": text} | TARGET_QUERY.get(target, {})
    try:
        st.page_link(script, label=label, icon=":material/open_in_new:", query_params=query)
    except (StreamlitPageNotFoundError, StreamlitAPIException, KeyError):  # a page run on its own (AppTest)
        st.link_button(label, f"{path}?{urlencode(query)}", icon=":material/open_in_new:")


def show_kinds(view, name: str, text: str, presenter: bool) -> None:
    """The scores, the strongest head of each kind named, and a link to each."""
    figure(view.scores, presenter)
    columns = st.columns(len(view.strongest))
    for column, (kind, (layer, head, score)) in zip(columns, view.strongest.items(), strict=True):
        with column:
            st.markdown(f"**Strongest {kind} head: {layer}.{head}** (score {score:.2f})")
            st.caption(f"{'An' if kind[0] in 'aeiou' else 'A'} {kind} head {real_heads.KIND_TEXT[kind]}")
            for target in ("explorer", "follow"):
                head_link(target, name, text, layer, head, f"Open head {layer}.{head} in {TARGETS[target][2]}")


def linked_head(name: str | None) -> tuple[int, int] | None:
    """A link's ``?layer=&head=`` (the settings clamped the layer, with a notice): the head clamped likewise."""
    if name is None or "head" not in st.query_params or "w_rh_head" in st.session_state:
        return None
    heads = real_models.facts(name).n_heads
    return st.session_state.settings.layer, url.url_int("head", 0, 0, heads - 1)


def show_open_any(view, name: str, text: str, linked: tuple[int, int] | None = None) -> None:
    """Any head: choose layer.head (a link's, else the strongest induction head), then open it."""
    num_layers, num_heads = view.strongest_shape
    choices = [f"{layer}.{head}" for layer in range(num_layers) for head in range(num_heads)]
    layer, head = linked or view.strongest["induction"][:2]
    chosen = st.selectbox("open head (layer.head)", choices, key="w_rh_head", index=choices.index(f"{layer}.{head}"))
    layer, head = (int(part) for part in chosen.split("."))
    for column, target in zip(st.columns(3), ("explorer", "follow", "circuits"), strict=True):
        with column:
            head_link(target, name, text, layer, head, f"Open head {chosen} in {TARGETS[target][2]}")
    st.caption(
        "The Explorer shows this layer's Q, K, V, scores, mask, weights, context and out_proj, traced by the same "
        "module on the layer's real input x, shape (1, T, emb); its sidebar follows the model. The circuits view "
        "shows the head as W_QK (emb × emb) and W_OV, and the layer's output as the sum over its heads."
    )


def show_about(name: str) -> None:
    st.header("What is this model?")
    for line in real_heads.about_lines(name, real_models.shipped_record(), real_models.facts(name)):
        st.markdown(line)


boundary.run_page(main)
