"""Step through: the forward pass of Listing 3.5, one step per screen, for a classroom.

The step is in the URL (?step=5), so a teacher's link opens on the step being discussed. In presenter mode the step's
code and sentences sit beside its main figure, so the figure is on the first screen of a 1280 × 720 projector.
"""

from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitAPIException, StreamlitPageNotFoundError

from explorer.glue.cached import teaching_runs
from explorer.glue.frame import boundary, code_css, sidebar
from explorer.glue.memory import caches
from explorer.glue.state import trained_link, url
from explorer.views.step_notes import PREVIOUS_TOKEN_LINK
from explorer.views.step_through_steps import STEP_COUNT, STEPS

st.set_page_config(page_title="Step through · Multi-Head Attention Explorer", page_icon="🪜", layout="wide")

# Constants, nothing from the user. The listing wraps its long lines instead of being cut, at a readable size, each
# under its own indentation (code_css.hanging_indent_css).
LISTING_CSS = """<style>
  .st-key-step_listing pre code { font-size: 0.9rem; }
  .st-key-step_listing pre { overflow-x: auto; }
  .st-key-step_listing .linenumber { align-self: flex-start !important; line-height: 1.92; }
</style>"""
PRESENTER_CODE_CSS = "<style>.st-key-step_code pre code { font-size: 1.05rem; }</style>"


def _move(delta: int) -> None:
    state = st.session_state
    state.step_number = min(max(state.step_number + delta, 1), STEP_COUNT)


def step_buttons(view, presenter: bool) -> None:
    """Previous, the step slider and Next; Page Up / Page Down (a presentation clicker) press the buttons."""
    previous_col, slider_col, next_col = st.columns([4, 3, 4] if presenter else [3, 5, 3], vertical_alignment="bottom")
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


def shape_text(view) -> str:
    return f"{view.shape_before}  →  {view.shape_after}" if view.shape_before else view.shape_after


def presenter_step(view) -> None:
    """The step's shape, its first sentence, its code and the other sentences in a narrow column beside its main
    figure: the first sentence above the code, so that it is on a 1280 × 720 projector's first screen (under the
    code it fell below the fold on every step)."""
    words_col, figure_col = st.columns([1, 2], gap="medium")
    with words_col:
        st.code(shape_text(view), language=None, wrap_lines=True)
        st.markdown(view.sentences[0])
        with st.container(key="step_code"):
            st.html(PRESENTER_CODE_CSS)
            st.html(code_css.hanging_indent_css("step_code", view.code, line_numbers=False))
            st.code(view.code, language="python", wrap_lines=True)
        for sentence in view.sentences[1:]:
            st.markdown(sentence)
    with figure_col:
        boundary.show_figure(view.main, bare=True, stage=True)


def classroom_step(view, trained: bool = False) -> None:
    """The whole listing (this step in colour) beside the step: its shape, its lines, its figures."""
    lines = view.line_text
    with st.container(key="step_columns"):  # a phone stacks the columns: the step first, the listing under it
        st.html(boundary.RIGHT_FIRST_CSS.format(key="step_columns"))
        listing_col, step_col = st.columns([4, 7], gap="medium")  # the step's figures keep the room (issue 11, 3)
    with listing_col, st.container(key="step_listing"):
        st.html(LISTING_CSS)
        st.html(code_css.hanging_indent_css("step_listing", view.listing, line_numbers=True, marker=1))
        st.html(code_css.lit_lines_css("step_listing", view.listing))
        st.caption(f"Listing 3.5 · this step is {lines}, in colour")
        st.code(view.listing, language="python", line_numbers=True, wrap_lines=True)  # Python: breaks between names
    with step_col:
        st.header(f"Step {view.number} of {view.count}: {view.title}")
        st.markdown(f"**Shape:** `{shape_text(view)}`")
        st.markdown(f"**Listing 3.5, {lines}:**")
        with st.container(key="step_code"):
            st.html(code_css.hanging_indent_css("step_code", view.code, line_numbers=False))
            st.code(view.code, language="python", wrap_lines=True)
        for sentence in view.sentences:
            st.markdown(sentence)
        if STEPS[view.number - 1].key == "scores" and not trained:
            previous_token_link(view.number)
        for panel in view.panels:
            boundary.show_figure(panel)


def previous_token_link(number: int) -> None:
    """One click from seeded random weights to a trained previous-token layer, at this same step."""
    query = {"trained": trained_link.previous_token_spec(), "step": str(number)}
    label = "Open a trained previous-token head at this step"
    st.caption(PREVIOUS_TOKEN_LINK)
    try:
        st.page_link("pages/1_Step_through.py", label=label, icon=":material/open_in_new:", query_params=query)
    except (StreamlitPageNotFoundError, StreamlitAPIException, KeyError):  # the page run on its own (AppTest)
        st.link_button(label, f"./Step_through?{urlencode(query)}", icon=":material/open_in_new:")


def positions_beside(settings, presenter: bool) -> None:
    """The scores step with the sidebar's positions: without | with side by side, as the Explorer's Positions
    section draws them (its first pair), titles, figures and captions each in one row."""
    view = caches.positions_view(settings, 0, presenter)
    st.subheader("The same scores with positions")
    for sentence in view.sentences:
        st.markdown(sentence)
    for pair in view.pairs[:1]:
        boundary.show_pair(pair)


def main() -> None:
    presenter = sidebar.presenter_toggle()
    settings = sidebar.settings_sidebar(fields=sidebar.KNOB_FIELDS)
    state = st.session_state
    teaching_runs.seed_int("step_number", "step", 1, 1, STEP_COUNT)
    teaching_runs.seed_int("step_batch", "batch", 0, 0, settings.batch_size - 1)
    st.sidebar.header("View")
    st.sidebar.number_input("batch element", 0, settings.batch_size - 1, key="step_batch")
    view = teaching_runs.step_view(settings, int(state.step_number), int(state.step_batch), presenter)

    if presenter:
        st.title(f"{view.number}/{view.count} · {view.title}")
    else:
        st.title("Step through Listing 3.5")
        st.markdown(
            "The book's `MultiHeadAttention.forward`, one step per screen, on the settings in the sidebar: "
            f"{settings.num_heads} heads × head_dim {settings.head_dim} = d_out {settings.d_out}, "
            f"{settings.num_tokens} tokens, batch {settings.batch_size}, {'train' if settings.train else 'eval'} mode."
        )
    url.show_notices()
    step_buttons(view, presenter)
    if presenter:
        presenter_step(view)
    else:
        classroom_step(view, trained=bool(settings.trained or settings.model))
    if STEPS[view.number - 1].key == "scores" and settings.positions != "none":
        positions_beside(settings, presenter)
    url.sync_url(settings, step=int(state.step_number), batch=int(state.step_batch))


boundary.run_page(main)
