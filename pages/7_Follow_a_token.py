"""Follow one token: every head at a glance, then one query token through each head to its output row.

The token and batch element are in the URL (?token=1&batch=0). Every number comes from the explorer's traced run
(explorer.views.follow_a_token, explorer.views.head_view); the page lays them out.
"""

import streamlit as st

from explorer.glue.cached import teaching_runs
from explorer.glue.frame import boundary, sidebar
from explorer.glue.memory import caches
from explorer.glue.state import url
from explorer.views import follow_a_token

st.set_page_config(page_title="Follow a token · Multi-Head Attention Explorer", page_icon="🔎", layout="wide")

DEFAULT_TOKEN = 1  # "journey", the book's x⁽²⁾


def main() -> None:
    presenter = sidebar.presenter_toggle()
    sidebar_settings = sidebar.settings_sidebar()
    settings = caches.fit_page(sidebar_settings, "follow")  # the URL keeps the user's own settings
    state = st.session_state
    last = settings.num_tokens - 1
    teaching_runs.seed_int("follow_token", "token", DEFAULT_TOKEN, 0, last)
    teaching_runs.seed_int("follow_batch", "batch", 0, 0, settings.batch_size - 1)
    labels = caches.input_labels(settings)
    st.sidebar.header("View")
    st.sidebar.number_input("batch element", 0, settings.batch_size - 1, key="follow_batch")
    st.sidebar.selectbox(
        "query token", list(range(settings.num_tokens)), key="follow_token", format_func=lambda i: f"{i}: {labels[i]}"
    )
    token, batch_index = int(state.follow_token), int(state.follow_batch)
    followed = url.url_int_or_none("head", 0, settings.num_heads - 1, "no head is followed")

    st.title("Follow one token")
    if not presenter:
        url.show_notices()
    show_glance(settings, batch_index, token, presenter)
    if presenter:  # after the figure, which fills the first screen (a notice above pushed its legend off it)
        url.show_notices()
    view = teaching_runs.token_view(settings, token, batch_index, presenter)
    show_heads(view, token, presenter, followed)
    show_output(view, token, batch_index, presenter)
    head = {"head": followed} if followed is not None else {}
    url.sync_url(sidebar_settings, token=token, batch=batch_index, **head)


def show_glance(settings, batch_index: int, token: int, presenter: bool) -> None:
    """1. Every head at a glance."""
    st.header("At a glance: every head")
    glance = teaching_runs.head_view(settings, batch_index, token, presenter)
    if not presenter:
        st.markdown(
            "Queries on the left, keys on the right: each line's strength is the attention weight, one "
            "colour per head (as in BertViz's head view). The followed token's lines are drawn strong."
        )
    boundary.show_figure(glance.panel, bare=presenter, stage=presenter)  # presenter: it fills the first screen


def show_heads(view, token: int, presenter: bool, followed: int | None = None) -> None:
    """2. One token through each head: its row of every step, as a table per head; a followed head (``?head=``, from
    the Real heads page's links) first and open."""
    st.header(follow_a_token.heading(view))
    if not presenter:
        st.markdown(follow_a_token.heads_intro(view))
    opened = {followed} if followed is not None else {0, 1}
    for head in sorted(view.heads, key=lambda h: h.head != followed):
        with st.expander(
            f"head {head.head} · q = {head.query} · context = {head.context}", expanded=head.head in opened or presenter
        ):
            show_head_rows(head, presenter)
    boundary.show_figure(view.panels[0], bare=presenter)


def show_head_rows(head, presenter: bool) -> None:
    boundary.show_table(
        [
            {
                "key": f"{row.position}: {row.label}",
                "k_j": row.key,
                "q · k_j": row.dot,
                "÷ √head_dim": row.scaled,
                "softmax": row.weight,
                "weight used": row.used,
                "v_j": row.value,
                "weight × v_j": row.weighted,
            }
            for row in head.rows
        ],
        presenter=presenter,
        key=f"follow_rows_{head.head}",
        formats=dict.fromkeys(("q · k_j", "÷ √head_dim", "softmax", "weight used"), "%.4f"),
    )
    more = f" ({head.hidden_keys} lighter keys not listed)" if head.hidden_keys else ""
    st.markdown(f"{head.visible} visible keys{more}. Context of head {head.head} = Σ weight × v_j = `{head.context}`")


def show_output(view, token: int, batch_index: int, presenter: bool) -> None:
    """3. Concatenate, out_proj, the output row (and the book's, at the book's settings)."""
    st.header("Concatenate, then out_proj")
    st.markdown(f"The heads side by side: context[{token}] = `{view.concatenated}`")
    if not presenter:
        st.markdown(
            "out_proj multiplies this row by its weight: each head's block of the row meets its own block of columns "
            "of W_out, so the output is a sum of one contribution per head plus the bias: "
            "output = Σ_k context_k · W_out[:, block k]ᵀ + bias."
        )
    boundary.show_figure(view.panels[1], bare=presenter)
    st.markdown(f"**Output row {token}** (`output[{batch_index}, {token}]`): `{view.output_text}`")
    if view.book_row is not None:
        if view.matches_book:
            st.success(follow_a_token.book_row_text(view), icon=":material/check:")
        else:
            st.warning(follow_a_token.book_row_text(view), icon=":material/warning:")


boundary.run_page(main)
