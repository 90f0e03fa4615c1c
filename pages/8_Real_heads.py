"""Real heads: a real GPT's every layer and head on a sentence you type, what kind of head each one is, and one click
to open any head in the Explorer or Follow a token on that layer's real input.

The model and the sentence are the session's settings (``?model=own|gpt2&text=...``, fitted in
explorer.glue.state.real_fit); the readings are cached per (model, text) in explorer.glue.cached.real_models, the
figures built in explorer.views.real_heads.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitAPIException, StreamlitPageNotFoundError

from explorer.glue.cached import real_circuits, real_models
from explorer.glue.frame import boundary, sidebar, writing_sections
from explorer.glue.state import settings as cfg
from explorer.glue.state import url, user_text
from explorer.views import head_kinds, induction_circuit, real_heads, real_record

st.set_page_config(page_title="Real heads · Multi-Head Attention Explorer", page_icon="🧠", layout="wide")

MODEL_LABELS = {"own": "Our model, trained on Python's docs", "gpt2": "GPT-2 (124M, OpenAI)"}
TARGETS = {  # (script, the path a plain link opens, label)
    "explorer": ("app.py", "./", "Explorer"),
    "follow": ("pages/7_Follow_a_token.py", "./Follow_a_token", "Follow a token"),
    "circuits": ("pages/2_Heads_and_references.py", "./Heads_and_references", "circuits"),
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
            "what it writes, and what breaks when you knock heads out."
        )
    with st.sidebar if presenter else st.container():  # presenting: the heads fill the first screen
        name = choose_model(settings)
        text = choose_text(name)
    if name is not None:
        seed_knockout(name)  # before the notices: a bad ?ablate= or ?pos= is said with them
        writing_sections.seed_from_link(name, text)
        linked = linked_head(name)
    url.show_notices()
    if name is None:
        return
    view = real_models.page_view(name, text, presenter)
    st.header("Every head at once")
    if not presenter:
        st.markdown(real_heads.MODEL_VIEW_TEXT)
    figure(view.model_view, presenter)
    st.header("What kind of head is each?")
    show_kinds(view, name, text, presenter)
    st.header("What comes next?")
    show_prediction(view, presenter)
    st.header("Knock heads out")
    heads, mode, params = show_knockout(view, name, text, presenter)
    st.header("The model writes")
    writing_sections.show_writing(name, text, heads, mode, presenter)
    if real_circuits.characters_fit(name):
        st.header("Character by character")
        strongest = view.strongest["induction"][0]
        params |= writing_sections.show_characters(name, text, heads, mode, strongest, presenter)
    if real_circuits.composition_fits(name):
        st.header("The induction circuit")
        show_composition(name, presenter)
    st.header("Induction on random tokens: a repeat gets easier")
    figure(view.induction, presenter)
    st.markdown(real_heads.induction_sentence(*view.copy_losses, view.drawn, real_models.probe_source(name)))
    if name == "own":
        show_phase_change(presenter)
    st.header("Open any head")
    show_open_any(view, name, text, linked)
    show_about(name)
    url.sync_url(st.session_state.settings, **params)


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


def _choose() -> None:
    """The radio's change: GPT-2 where it can serve; else the radio goes back to the model that serves, and GPT-2's
    notice (with its Download button where it might come) says why."""
    state = st.session_state
    state.rh_wants_gpt2 = state.w_rh_model == "gpt2" and not real_models.gpt2_ready()
    if state.rh_wants_gpt2:
        state.w_rh_model = "own"
    _apply(state.w_rh_model, state.settings.text)


def _settle_radio(settings) -> None:
    """Before the radio draws: it shows the model that serves, and remembers a wish for GPT-2 until GPT-2 can serve
    (downloaded here, or by another visitor)."""
    state = st.session_state
    if "w_rh_model" not in state:  # a ?model=gpt2 link asks for GPT-2 even where the settings fell back
        asked = st.query_params.get("model", settings.model or "own")
        asked = cfg.parse_choice("model", asked, settings.model or "own", cfg.REAL_MODELS)[0]
        state.rh_wants_gpt2, state.w_rh_model = asked == "gpt2", "own"
    ready = real_models.gpt2_ready()
    if state.w_rh_model == "gpt2" and not ready:  # it served, and no longer can
        state.rh_wants_gpt2, state.w_rh_model = True, "own"
    if state.get("rh_wants_gpt2") and ready:
        state.rh_wants_gpt2, state.w_rh_model = False, "gpt2"
    if (settings.model or "own") != state.w_rh_model:
        _apply(state.w_rh_model, settings.text)


def choose_model(settings) -> str | None:
    """The model radio, on the model that serves; GPT-2 serves once on this server (a Download button), else the
    shipped model, and a notice says why in plain words."""
    state = st.session_state
    _settle_radio(settings)
    st.radio(
        "model", list(MODEL_LABELS), key="w_rh_model", format_func=MODEL_LABELS.get, horizontal=True, on_change=_choose
    )
    if state.get("rh_wants_gpt2"):
        offer_gpt2()
    name = state.w_rh_model
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
    """The sentence box (the session's text) and "Repeat my sentence"; a sentence longer than the page reads is cut,
    with one notice."""
    state = st.session_state
    state.setdefault("w_rh_text", state.settings.text)
    st.text_input(
        "Type a sentence",
        key="w_rh_text",
        max_chars=cfg.MAX_TEXT_CHARS,
        on_change=lambda: _apply(state.settings.model or "own", state.w_rh_text),
    )
    text = state.settings.text
    if name is None:
        return text
    count, cap = len(real_models.token_ids(name, text)), real_models.page_cap(name)
    st.button(
        "Repeat my sentence",
        key="w_rh_repeat",
        icon=":material/repeat:",
        help="Type it twice: an induction head finds each token's earlier copy and reads what came next.",
        on_click=_repeat,
        args=(name,),
    )
    if count > cap:  # said once, here: the settings' own notice of the cut (for the Explorer) goes
        state.notices = [m for m in state.get("notices", []) if not m.startswith("The sentence is ")]
        writes = real_circuits.writing_cap(name)
        after = f"; the model writes after {'all' if count <= writes else 'its first'} {min(count, writes)}"
        url.notice(
            f"The sentence is {count} tokens long; this page reads the first {cap}{after if writes > cap else ''}."
        )
    return text


def _repeat(name: str) -> None:
    """The sentence twice, a space between, when the two fit in what the page reads; else a notice says so."""
    state = st.session_state
    text = state.settings.text
    doubled = f"{text} {text}"
    cap = real_models.page_cap(name)
    if len(real_models.token_ids(name, doubled)) > cap:
        url.notice(f"Your sentence twice would be over {cap} tokens, all this page reads: shorten it first.")
        return
    state.w_rh_text = doubled
    _apply(state.settings.model or "own", doubled)


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
        shown = f"{view.sentence}⟨{view.top5_rows[0]['token']}⟩"
        st.markdown(user_text.quote(shown, limit=400))  # user text: a code span
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
    """The scores on the sentence and on the random probe, the strongest head of each kind named (or said to be no
    such head), and links to each."""
    # one under the other, each the page's width: side by side (planned for the whole width) their titles were cut,
    # their kinds' names ran together ("previous tokenfirst token") and their numbers shrank to 5 px
    if view.text_scores is None:
        st.caption("Your sentence is one token: no query has an earlier token to read, so nothing to score.")
    else:
        figure(view.text_scores, presenter)
    figure(view.scores, presenter)
    columns = st.columns(len(view.strongest))
    for column, (kind, (layer, head, score)) in zip(columns, view.strongest.items(), strict=True):
        with column:
            even = view.baselines[kind]
            st.markdown(head_kinds.kind_headline(kind, layer, head, score, even))
            an = "An" if kind[0] in "aeiou" else "A"
            st.caption(f"{an} {kind} head {real_heads.KIND_TEXT[kind]} {head_kinds.bar_text(even)}")
            for target in ("explorer", "follow"):
                head_link(target, name, text, layer, head, f"L{layer} H{head} in {TARGETS[target][2]}")


def show_knockout(view, name: str, text: str, presenter: bool):
    """Choose heads to knock out (``?ablate=0.1,1.3``), zeroed or mean-ablated; the loss before and after. Returns
    the heads, the mode and the page's own URL parameters."""
    labels = head_labels(*view.strongest_shape)
    left, right = st.columns([3, 2])
    picked = left.multiselect("heads to knock out", list(labels), key="w_rh_ablate")
    mode = right.radio("how", real_circuits.KNOCKOUT_MODES, key="w_rh_ablation", horizontal=True,
                       format_func={"zero": "set to zero", "mean": "set to its mean"}.get)  # fmt: skip
    if not presenter:
        st.markdown(real_record.knockout_record_lines(real_models.shipped_record()) if name == "own" else "")
    heads = tuple(labels[label] for label in picked)
    reading = real_circuits.knockout(name, text, heads, mode)
    knocked = induction_circuit.knockout_view(reading, list(real_circuits.repeat_rows(name, text)), presenter=presenter)
    st.markdown(knocked.sentence)
    figure(knocked.loss, presenter)
    if knocked.scores is not None:
        st.markdown("**What comes next, without them:**")
        boundary.show_table(knocked.top_rows, presenter=presenter, key="rh_knocked_top5",
                            formats={"probability": "%.3f"})  # fmt: skip
        figure(knocked.scores, presenter)  # the page's width, as the scores above
    ablate = ",".join(f"{layer}.{head}" for layer, head in heads)
    return heads, mode, ({"ablate": ablate, "ablation": mode} if heads else {})


def head_labels(num_layers: int, num_heads: int) -> dict[str, tuple[int, int]]:
    return {f"L{layer} H{head}": (layer, head) for layer in range(num_layers) for head in range(num_heads)}


def seed_knockout(name: str) -> None:
    """The knock-out widgets from the link (``?ablate=0.1,1.3&ablation=mean``), strictly parsed, once a session."""
    state = st.session_state
    if "w_rh_ablate" in state:
        return
    facts = real_models.facts(name)
    chosen = url.url_heads("ablate", facts.n_layers, facts.n_heads)
    state.w_rh_ablate = [label for label, pair in head_labels(facts.n_layers, facts.n_heads).items() if pair in chosen]
    state.w_rh_ablation = url.url_choice("ablation", "zero", real_circuits.KNOCKOUT_MODES)


def show_composition(name: str, presenter: bool) -> None:
    view = real_circuits.circuit_view(name, presenter)
    st.markdown(view.pair)
    figure(view.panel, presenter)


def linked_head(name: str | None) -> tuple[int, int] | None:
    """A link's ``?layer=&head=`` (the settings clamped the layer, with a notice): the head clamped likewise."""
    if name is None or "head" not in st.query_params or "w_rh_head" in st.session_state:
        return None
    heads = real_models.facts(name).n_heads
    return st.session_state.settings.layer, url.url_int("head", 0, 0, heads - 1)


def show_open_any(view, name: str, text: str, linked: tuple[int, int] | None = None) -> None:
    """Any head: choose it (a link's, else the strongest induction head), then open it."""
    num_layers, num_heads = view.strongest_shape
    choices = [f"L{layer} H{head}" for layer in range(num_layers) for head in range(num_heads)]
    layer, head = linked or view.strongest["induction"][:2]
    chosen = st.selectbox("open head", choices, key="w_rh_head", index=choices.index(f"L{layer} H{head}"))
    layer, head = (int(part[1:]) for part in chosen.split(" "))
    for column, target in zip(st.columns(3), ("explorer", "follow", "circuits"), strict=True):
        with column:
            head_link(target, name, text, layer, head, f"{chosen} in {TARGETS[target][2]}")
    st.caption(
        "The Explorer shows this layer's Q, K, V, scores, mask, weights, context and out_proj, traced by the same "
        "module on the layer's real input x, shape (1, T, emb); its sidebar follows the model. The circuits view "
        "shows the head as W_QK (emb × emb) and W_OV, its OV circuit in token space with a copying score, and the "
        "layer's output as the sum over its heads."
    )


def show_phase_change(presenter: bool) -> None:
    """The shipped model's training curve, with the induction rows' fall marked (item 4 of issue 46)."""
    panels, said = real_circuits.phase_change(presenter)
    if not panels:
        return
    st.header("How it learned to copy: the phase change")
    st.markdown(said)
    figure(panels[0], presenter)
    for column, panel in zip(st.columns(2), panels[1:], strict=False):
        with column:
            figure(panel, presenter)


def show_about(name: str) -> None:
    st.header("What is this model?")
    for line in real_record.about_lines(name, real_models.shipped_record(), real_models.facts(name)):
        st.markdown(line)


boundary.run_page(main)
