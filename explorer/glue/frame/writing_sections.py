"""The Real heads page's writing sections (issue 46): the model writes with every head and with the chosen heads
knocked out, side by side against the copy; and one position read closely (``?pos=``, ``?reading=``). Widgets and
layout only: the runs are real_circuits', the figures explorer.views.character_view's.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import streamlit as st

from explorer.glue.cached import real_circuits, real_models
from explorer.glue.frame import boundary
from explorer.glue.state import settings as cfg
from explorer.glue.state import url, user_text
from explorer.views import character_view, induction_circuit
from mha_core.gpt import attribution

READINGS = {"given": "the true text given", "own": "writing on its own"}


def figure(panel, presenter: bool, on_click=None) -> None:
    boundary.show_figure(panel, bare=True, on_click=on_click)
    if not presenter:
        st.caption(panel.caption)


def _start_copy(name: str) -> None:
    """The sentence cut to its copy's first tokens (or given them): what the model should finish."""
    state = st.session_state
    text = real_circuits.copy_prompt(name, state.settings.text)
    state.w_rh_text = text
    url.apply_settings(replace(state.settings, text=text, model=state.settings.model or "own"))


def writing_controls(name: str, presenter: bool) -> tuple[int, float, int, int]:
    """Tokens to write, temperature, top-k and seed; the Continue and Start-the-copy buttons."""
    # On a 720p stage presenter mode's type is too large for the button in a fifth column: there it goes under.
    columns = st.columns([2, 2, 2, 2] if presenter else [2, 2, 2, 2, 3])
    new_tokens = columns[0].number_input("tokens to write", 1, real_circuits.MAX_NEW_TOKENS, 40, key="w_rh_write")
    temperature, problem = real_circuits.fit_temperature(
        columns[1].number_input(
            "temperature",
            0.0,
            real_circuits.MAX_TEMPERATURE,
            0.0,
            0.1,
            key="w_rh_temperature",
            help=f"0: always the likeliest (greedy); else at least {real_circuits.MIN_TEMPERATURE}",
        )
    )
    top_k = columns[2].number_input("top-k", 0, real_circuits.MAX_TOP_K, 0, key="w_rh_top_k", help="0: every token")
    seed = columns[3].number_input("seed", 0, cfg.MAX_SEED, 0, key="w_rh_sample_seed")
    with st.container() if presenter else columns[4]:
        st.button("Continue my sentence", key="w_rh_continue", icon=":material/edit_note:", type="primary")
        st.button(
            "Start the copy",
            key="w_rh_copy",
            icon=":material/content_copy:",
            on_click=_start_copy,
            args=(name,),
            help=f"Your sentence, a space and its first {attribution.COPY_GIVEN} tokens (characters, for our model); a "
            "sentence typed twice is cut to that. The model finishes the copy.",
        )
    if problem:
        st.warning(problem, icon=":material/warning:")
    return int(new_tokens), float(temperature), int(top_k), int(seed)


def show_writing(name: str, text: str, heads, mode: str, presenter: bool) -> None:
    """ "Continue my sentence": the book's chapter 5 loop with every head, and with ``heads`` knocked out."""
    state = st.session_state
    how = writing_controls(name, presenter)
    if not (state.get("w_rh_continue") or state.get("_rh_written")):
        return
    state["_rh_written"] = True
    written = real_circuits.continuation(name, text, how, heads, mode)
    said = "greedy" if how[1] == 0 else f"sampled at temperature {how[1]:g}, top-k {how[2] or 'all'}"
    st.markdown(f"**The model writes** ({how[0]} tokens, {said}):")
    st.markdown(user_text.quote(text, limit=400) + " ⟶ " + user_text.quote(written.text[0], limit=400))
    who = induction_circuit.heads_label(heads)
    copy_ids, copy_labels = written.copy
    views = [character_view.written_view(*written.intact[::-1], copy_ids, copy_labels, who="With every head",
                                         key="written_all", presenter=presenter)]  # fmt: skip
    if written.knocked is not None:
        views.append(character_view.written_view(*written.knocked[::-1], copy_ids, copy_labels, who=f"Without {who}",
                                                 key="written_knocked", presenter=presenter))  # fmt: skip
    for column, view in zip(st.columns(2), views, strict=False):
        with column:
            figure(view.panel, presenter)
    if written.knocked is None:
        st.caption("Choose heads to knock out above, and the model writes a second time without them, beside this.")
    st.markdown(character_view.comparison_sentence(views[0], views[1] if len(views) > 1 else None, who))
    if not presenter:
        st.caption(
            "The book's chapter 5 loop: predict the next token, append it, read again, one token at a time. The "
            "copy is what copying your sentence's earlier stretch would write (the token after the longest earlier "
            "match of the text's end); green: the model wrote the copy's token, orange with ✗: it did not."
        )


def _read_from(token: int, *, last: int) -> None:
    """A token clicked on the text: the position to read from, when it is one (before the slider is drawn)."""
    if 0 <= token <= last:
        st.session_state.w_rh_pos = token


def default_position(ids: list[int]) -> int:
    """The first token the model writes on its own after the copy's start, else the last that predicts one."""
    return min(attribution.prompt_length(ids) if attribution.copy_start(ids) is not None else len(ids), len(ids) - 2)


def _ids(name: str, text: str) -> list[int]:
    return real_models.token_ids(name, text)[: real_models.page_cap(name)]


def seed_from_link(name: str, text: str) -> None:
    """``?pos=`` and ``?reading=`` from the link, strictly parsed, once a session (before the page's notices)."""
    state = st.session_state
    ids = _ids(name, text)
    if "w_rh_pos" in state or len(ids) < 2 or not real_circuits.characters_fit(name):
        return
    state.w_rh_pos = url.url_int("pos", default_position(ids), 0, len(ids) - 2)
    state.w_rh_reading = url.url_choice("reading", "given", list(READINGS))


def show_characters(name: str, text: str, heads, mode: str, strongest: int, presenter: bool) -> dict[str, str]:
    """One position read closely; returns the section's URL parameters."""
    ids = _ids(name, text)
    if len(ids) < 2:
        st.caption("Your sentence is one token: no position has a next token to predict.")
        return {}
    layers, state = real_models.facts(name).n_layers, st.session_state
    state.setdefault("w_rh_pos", default_position(ids))
    state.w_rh_pos = min(int(state.w_rh_pos), len(ids) - 2)  # a shorter sentence typed since: its last position
    state.setdefault("w_rh_char_layer", min(strongest, layers - 1))
    left, right = st.columns([3, 1])
    own = left.radio("the model reads", list(READINGS), format_func=READINGS.get, key="w_rh_reading", horizontal=True)
    layer = right.selectbox("heads of layer", list(range(layers)), key="w_rh_char_layer")
    reading = real_circuits.characters(name, text, heads, mode, own == "own")
    labels = reading.labels
    pos = st.select_slider(
        "token to read from (drag, click, or the arrow keys)",
        options=list(range(len(ids) - 1)),
        format_func=lambda i: f"{i} “{labels[i]}”",
        key="w_rh_pos",
    )
    view = real_circuits.position_view(
        name, text, tuple(sorted(heads)), mode, own == "own", int(pos), int(layer), presenter
    )
    figure(view.text, presenter, on_click=functools.partial(_read_from, last=len(ids) - 2))
    st.markdown(view.sentence)
    left, right = st.columns([2, 3])
    with left:
        figure(view.top, presenter)
    with right:
        figure(view.attribution, presenter)
    return {"pos": str(pos), "reading": own}
