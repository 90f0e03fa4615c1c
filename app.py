"""The Explorer: the book's MultiHeadAttention run from sliders, every step drawn head by head.

Pages lay out; they do not compute. Settings live in explorer.glue.frame.sidebar and .url, caches in .caches, the
figures in explorer.views.attention_explorer and explorer.views.figures, the numbers in mha_core.
"""

import streamlit as st

from explorer.glue.cached import teaching_runs
from explorer.glue.frame import boundary, sidebar
from explorer.glue.memory import budget, caches, downloads
from explorer.glue.state import url
from explorer.views.attention_explorer import BOOK_ROWS, SECTIONS
from explorer.views.markdown_text import escape_markdown

st.set_page_config(page_title="Multi-Head Attention Explorer", page_icon="🔍", layout="wide")


def main() -> None:
    presenter = sidebar.presenter_toggle()
    settings = sidebar.settings_sidebar(fields=sidebar.KNOB_FIELDS)
    batch_index, enlarge_choice = view_controls(settings)
    enlarge = None if enlarge_choice == "none" else int(enlarge_choice)

    st.title("Multi-Head Attention Explorer")
    shape = (
        f"{settings.num_heads} heads × head_dim {settings.head_dim} = d_out {settings.d_out}, "
        f"{settings.num_tokens} tokens, batch {settings.batch_size}"
    )
    if not presenter and settings.model:
        st.markdown(
            f"Layer **{settings.layer}** of a real GPT ({caches.real_model_label(settings)}): its own "
            f"`MultiHeadAttention`, Listing 3.5, traced on the layer's real input, your sentence through the layers "
            f"below it: {shape}."
        )
    elif not presenter:
        st.markdown(
            "The causal `MultiHeadAttention` of *Build a Large Language Model (From Scratch)*, Listing 3.5, "
            f"running on **{settings.device}** in **{settings.dtype}**: {shape}."
        )
    sidebar.where_to_start(shown=not presenter)  # a first visit's and a class's path through the pages
    section = sidebar.section_choice("section", SECTIONS, default="attention")
    shuffle = teaching_runs.seed_int("positions_shuffle", "shuffle", 0, 0, url.MAX_SHUFFLE)
    url.show_notices()  # after every URL value is read, so a bad one's notice shows now

    view = caches.cached_view(settings, section, batch_index, enlarge, presenter)
    with st.container():  # one block, whatever the output shows: the tabs' charts keep their place (url.show_notices)
        staged = stage_panel(view) if presenter and section == "attention" else None
        if staged is None:
            draw_output(view, settings, batch_index)
        else:  # presenter mode: the attention weights fill the first screen beside the output and the book check
            output_column, stage_column = st.columns([1, 2], gap="medium")  # the printed rows just fit at 1280 px
            with output_column:
                st.caption(f"Listing 3.5 on {settings.device}, {settings.dtype}: {shape}.")
                draw_output(view, settings, batch_index, compact=True)
            with stage_column:
                boundary.show_figure(staged, bare=True, stage=True)
            if view.output_panel is not None:  # a large output's heatmap, full width under the first screen
                boundary.show_figure(view.output_panel)
        if view.enlarged is not None:
            boundary.show_figure(view.enlarged)

    attention_tab, reshape_tab, download_tab, positions_tab = sidebar.section_tabs("section", SECTIONS, section)
    with attention_tab:  # only the open section is drawn and sent
        draw_attention([panel for panel in view.panels if panel is not staged] if section == "attention" else [])
    with reshape_tab:
        for panel in view.panels if section == "reshapes" else []:
            boundary.show_figure(panel)
    with download_tab:
        if section == "downloads":
            draw_downloads(settings)
    with positions_tab:
        if section == "positions":
            draw_positions(settings, shuffle, presenter)

    shuffled = {"shuffle": shuffle} if shuffle else {}  # absent: the tokens' own order, links as before the knob
    url.sync_url(settings, view_batch=batch_index, head=enlarge_choice, section=section, **shuffled)


def view_controls(settings) -> tuple[int, str]:
    """The batch element shown and the head enlarged ("none" or its number), in the sidebar's View."""
    st.sidebar.header("View")
    batch_index = st.sidebar.number_input(
        "batch element",
        0,
        settings.batch_size - 1,
        value=min(url.url_int("view_batch", 0, 0, settings.batch_size - 1), settings.batch_size - 1),
        key="w_view_batch",
    )
    head_choices = ["none"] + [str(k) for k in range(settings.num_heads)]
    enlarge_choice = st.sidebar.selectbox(
        "enlarge a head",
        head_choices,
        key="w_enlarge",
        index=head_choices.index(url.url_choice("head", "none", head_choices)),
    )
    return int(batch_index), enlarge_choice


def stage_panel(view):
    """The figure presenter mode puts on the first screen: the attention weights."""
    return next((panel for panel in view.panels if panel.key == "attn_weights"), None)


def draw_output(view, settings, batch_index: int, *, compact: bool = False) -> None:
    """The output as torch prints it, and whether it is the book's (``compact``: for a narrow column beside presenter
    mode's figure: the book check in one short line, a large output's heatmap left to the caller)."""
    st.header("Final output")
    if view.output is not None:
        if len(view.labels) <= 8:
            boundary.printed(view.output_text, wrap=compact)
        else:
            with st.expander(f"All {len(view.labels)} rows of the output, as torch prints them"):
                boundary.printed(view.output_text, wrap=compact)
        st.caption(
            f"`output[{batch_index}]` · shape (T, d_out) = {view.output.shape} · rows are tokens "
            f"{', '.join(escape_markdown(label) for label in view.labels[:8])}{' …' if len(view.labels) > 8 else ''}"
        )
    if view.output_panel is not None and not compact:
        boundary.show_figure(view.output_panel)
    elif view.output_panel is not None:
        st.caption(
            f"`output[{batch_index}]`, {len(view.labels)} × {settings.d_out} values: the heatmap under the weights."
        )
    if settings.is_book_example():
        if view.matches_book:
            st.success(
                "✓ The book's printed output, exactly"
                if compact
                else f"✓ This matches the book's printed output exactly: {BOOK_ROWS}"
            )
        else:
            st.error(f"This does not match the book's printed output {BOOK_ROWS}.")


def draw_attention(panels) -> None:
    """The attention panels, with the mask buffer and the slice used side by side: their titles, figures and
    captions each in one row, so that the captions line up under figures of different heights."""
    pair = [p for p in panels if p.key in ("mask_buffer", "mask")]
    for panel in panels:
        if panel.key == "mask_buffer" and len(pair) == 2:
            boundary.show_pair(pair)
        elif panel.key not in ("mask_buffer", "mask") or len(pair) != 2:
            boundary.show_figure(panel)


def _shuffle(step: int) -> None:
    """The next seeded permutation (step 1), or the tokens' own order again (step 0)."""
    state = st.session_state
    state.positions_shuffle = state.positions_shuffle % url.MAX_SHUFFLE + 1 if step else 0


def draw_positions(settings, shuffle: int, presenter: bool) -> None:
    """The position knob's section: what the kind does, the shuffle, then each pair without | with side by side."""
    view = caches.positions_view(settings, shuffle, presenter)
    for sentence in view.sentences:
        st.markdown(sentence)
    shuffle_column, back_column, _ = st.columns([3, 3, 3])  # room for the labels at presenter type
    shuffle_column.button("Shuffle the tokens", key="shuffle_tokens", on_click=_shuffle, args=(1,), width="stretch")
    back_column.button(
        "Their own order", key="unshuffle_tokens", on_click=_shuffle, args=(0,), disabled=not shuffle, width="stretch"
    )
    if view.shuffle_sentence:
        st.markdown(view.shuffle_sentence)
    for pair in view.pairs:
        boundary.show_pair(pair)
    for panel in view.panels:
        boundary.show_figure(panel)


def draw_downloads(settings) -> None:
    if not caches.npz_offered(settings):
        st.info(
            f"The whole trace at {settings.num_heads} heads × {settings.num_tokens} tokens in {settings.dtype} is "
            f"too large to pack within {budget.budget_words()}; the .npz download is offered while making it fits "
            f"the {budget.job_bytes() / budget.MB:.0f} MB one run may use and the file fits the "
            f"{downloads.held_bytes() / budget.MB:.0f} MB of downloads the server holds."
        )
    else:
        st.download_button(
            "Download the trace (.npz, every step by name)",
            caches.npz_download(settings),
            file_name="mha_trace.npz",
            mime="application/octet-stream",
            on_click="ignore",
        )
    st.markdown("Each figure downloads as PNG from its toolbar (camera icon).")


boundary.run_page(main)
