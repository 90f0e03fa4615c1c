"""Step through: the forward pass of Listing 3.5, one step per screen, for a classroom.

The step is in the URL (?step=5), so a teacher's link opens on the step being discussed.
"""

import streamlit as st

from explorer.glue import controls, teaching_cache
from explorer.views.step_through_steps import STEP_COUNT, line_ranges

st.set_page_config(page_title="Step through · Multi-Head Attention Explorer", page_icon="🪜", layout="wide")


def main() -> None:
    presenter = controls.presenter_toggle()
    settings = controls.settings_sidebar()
    state = st.session_state
    # Constants, nothing from the user: smaller type for the whole listing, so that its longest line fits beside the
    # figures; larger type for the step's own lines in presenter mode.
    LISTING_CSS = "<style>.st-key-step_listing pre code { font-size: 0.72rem; }</style>"
    PRESENTER_CODE_CSS = "<style>.st-key-step_code pre code { font-size: 1.15rem; }</style>"

    teaching_cache.seed_int("step_number", "step", 1, 1, STEP_COUNT)
    teaching_cache.seed_int("step_batch", "batch", 0, 0, settings.batch_size - 1)
    st.sidebar.header("View")
    st.sidebar.number_input("batch element", 0, settings.batch_size - 1, key="step_batch")

    def _move(delta: int) -> None:
        state.step_number = min(max(state.step_number + delta, 1), STEP_COUNT)

    view = teaching_cache.step_view(settings, int(state.step_number), int(state.step_batch), presenter)

    if presenter:
        st.title(f"{view.number}/{view.count} · {view.title}")
    else:
        st.title("Step through Listing 3.5")
        st.markdown(
            "The book's `MultiHeadAttention.forward`, one step per screen, on the settings in the sidebar: "
            f"{settings.num_heads} heads × head_dim {settings.head_dim} = d_out {settings.d_out}, "
            f"{settings.num_tokens} tokens, batch {settings.batch_size}, {'train' if settings.train else 'eval'} mode."
        )
    controls.show_notices()

    previous_col, slider_col, next_col = st.columns([3, 4, 3] if presenter else [2, 7, 2], vertical_alignment="bottom")
    previous_col.button(
        "◀ Previous",
        key="step_previous",
        on_click=_move,
        args=(-1,),
        disabled=view.number == 1,
        width="stretch",
        shortcut="PageUp",
        help="Page Up (a presentation clicker's back button)",
    )
    slider_col.slider("step", 1, STEP_COUNT, key="step_number", label_visibility="collapsed")
    next_col.button(
        "Next ▶",
        key="step_next",
        on_click=_move,
        args=(1,),
        disabled=view.number == STEP_COUNT,
        width="stretch",
        shortcut="PageDown",
        help="Page Down (a presentation clicker's forward button)",
    )

    lines = line_ranges(view.lines)
    shape = f"{view.shape_before}  →  {view.shape_after}" if view.shape_before else view.shape_after

    if presenter:
        if view.shape_before:
            st.markdown(f"## `{view.shape_before}`")
        st.markdown(f"## {'→ ' if view.shape_before else ''}`{view.shape_after}`")
        with st.container(key="step_code"):
            st.html(PRESENTER_CODE_CSS)
            st.code(view.code, language="python", wrap_lines=True)
        for sentence in view.sentences:
            st.markdown(sentence)
        teaching_cache.show_panel(view.main, presenter)
    else:
        listing_col, step_col = st.columns([5, 6], gap="medium")
        with listing_col, st.container(key="step_listing"):
            st.html(LISTING_CSS)
            st.caption(f"Listing 3.5 · this step is {lines}, in colour")
            st.code(view.listing, language="diff", line_numbers=True)
        with step_col:
            st.header(f"Step {view.number} of {view.count}: {view.title}")
            st.markdown(f"**Shape:** `{shape}`")
            st.markdown(f"**Listing 3.5, {lines}:**")
            st.code(view.code, language="python")
            for sentence in view.sentences:
                st.markdown(sentence)
            for panel in view.panels:
                teaching_cache.show_panel(panel, presenter)

    controls.sync_url(settings, step=int(state.step_number), batch=int(state.step_batch))


controls.run_page(main)
