"""Masks and cross-attention: QKVMultiHeadAttention with its own query and key lengths and every mask builder.

The mask convention here is True = may attend (F.scaled_dot_product_attention's); nn.MultiheadAttention's is the
opposite, and masks.to_blocked translates. Fully masked rows get zero weights and zero context, as the fused kernel
gives. The page's state (lengths, mask, its parameters, a custom mask row by row) is in the URL.
"""

from typing import NamedTuple

import streamlit as st

from explorer.glue.cached import teaching_runs
from explorer.glue.frame import boundary, sidebar
from explorer.glue.state import url
from explorer.glue.state.url import MASK_IMPLEMENTATIONS, MASK_KINDS, MAX_CROSS_TOKENS, MaskParams
from explorer.views import heads_and_references
from explorer.views import masks_and_cross_attention as views

st.set_page_config(
    page_title="Masks and cross-attention · Multi-Head Attention Explorer", page_icon="🎭", layout="wide"
)


class MaskChoice(NamedTuple):
    params: MaskParams
    url_params: dict[str, object]  # the mask's own parameters, for the URL


def padding_mask(batch_size: int, src_len: int) -> MaskChoice:
    st.caption("Padding: each batch element may attend only to its first *length* keys (the rest is padding).")
    cols = st.columns(min(batch_size, 8))
    lengths = []
    for n in range(batch_size):
        teaching_runs.seed_int(f"masks_len{n}", f"len{n}", src_len - n, 0, src_len)
        lengths.append(int(cols[n].number_input(f"length, batch {n}", 0, src_len, key=f"masks_len{n}")))
    return MaskChoice(MaskParams(kind="padding", lengths=tuple(lengths)), {f"len{n}": v for n, v in enumerate(lengths)})


def window_mask(src_len: int) -> MaskChoice:
    teaching_runs.seed_int("masks_window", "window", 2, 1, src_len)
    teaching_runs.seed_choice("masks_side", "window_side", "causal", ("causal", "both"))
    w1, w2 = st.columns(2)
    window = sidebar.range_slider_or_fixed(w1, "window: |i − j| < window", 1, src_len, key="masks_window")
    side = w2.radio(
        "which side",
        ("causal", "both"),
        key="masks_side",
        horizontal=True,
        help="causal: earlier keys only; both: earlier and later",
    )
    params = MaskParams(kind="sliding window", window=window, causal_only=side == "causal")
    return MaskChoice(params, {"window": window, "window_side": side})


def random_mask(seed: int) -> MaskChoice:
    teaching_runs.seed_int("masks_keep", "keep", 70, 0, 100)
    keep = int(st.slider("chance a position is kept (%)", 0, 100, key="masks_keep"))
    return MaskChoice(views.random_params(keep, seed), {"keep": keep})


def custom_mask(tgt_len: int, src_len: int) -> MaskChoice:
    """A mask ticked cell by cell; its rows (as bit patterns) are in the URL, one ?m<i>= per query."""
    state = st.session_state
    base_key = f"masks_custom_base_{tgt_len}x{src_len}"
    editor_key = f"masks_editor_{tgt_len}x{src_len}"
    full_row = 2**src_len - 1
    if base_key not in state:  # first time at this size: the URL's rows, else causal
        causal_rows = views.causal_rows(tgt_len, src_len)
        state[base_key] = [url.url_int(f"m{i}", causal_rows[i], 0, full_row) for i in range(tgt_len)]

    def _reset(rows: list[int]) -> None:
        state[base_key] = rows
        state.pop(editor_key, None)

    b1, b2, b3, _ = st.columns([1, 1, 1, 3])
    b1.button("all may attend", key="masks_all", on_click=_reset, args=([full_row] * tgt_len,))
    b2.button("none may attend", key="masks_none", on_click=_reset, args=([0] * tgt_len,))
    b3.button("causal", key="masks_causal", on_click=_reset, args=(views.causal_rows(tgt_len, src_len),))
    q_names = [f"q{i}" for i in range(tgt_len)]
    k_names = [f"k{j}" for j in range(src_len)]
    base = views.rows_to_table(state[base_key], q_names, k_names)
    st.caption("Tick a cell to let that query attend to that key. Empty rows and columns are allowed.")
    edited = st.data_editor(
        base,
        key=editor_key,
        width="content",
        column_config={k: st.column_config.CheckboxColumn(k, width="small") for k in k_names},
    )
    rows = views.table_to_rows(edited.to_numpy(dtype=bool))
    return MaskChoice(views.custom_params(rows, src_len), {f"m{i}": bits for i, bits in enumerate(rows)})


def mask_choice(kind: str, settings, tgt_len: int, src_len: int) -> MaskChoice:
    if kind == "padding":
        return padding_mask(settings.batch_size, src_len)
    if kind == "sliding window":
        return window_mask(src_len)
    if kind == "random":
        return random_mask(settings.seed)
    if kind == "custom":
        return custom_mask(tgt_len, src_len)
    return MaskChoice(MaskParams(kind=kind, seed=settings.seed), {})


def show_fully_masked(view, settings) -> None:
    """Queries that may attend to nothing, and what the fused kernel and a hand-written softmax make of them."""
    where = "; ".join(
        f"batch element {n}: " + ", ".join(view.query_labels[i] for i in rows) for n, rows in view.fully_masked
    )
    st.warning(f"Fully masked rows (every key blocked) · {where}", icon=":material/warning:")
    st.markdown(views.fully_masked_text(view, settings.qkv_bias))


def show_agreement(view, settings, presenter: bool) -> None:
    """The explicit and fused paths, side by side in two metrics (one under the other in presenter mode)."""
    tolerance = heads_and_references.agreement_tolerance(settings.dtype)
    m1, m2 = (st.container(), st.container()) if presenter else st.columns(2)
    m1.metric("max |explicit − fused| output", f"{view.max_diff_explicit_fused:.2e}")
    m2.metric(
        "implementations agree",
        "yes" if view.max_diff_explicit_fused <= tolerance else "no",
        help=f"agree = max difference at most {tolerance:.1e} in {settings.dtype}",
    )
    if not presenter:
        st.caption(
            "Both implementations run with the same weights, inputs and mask. The fused kernel returns no "
            "weights, so the weights below are always the explicit path's; the output is the chosen one's."
        )


def show_conventions(view, src_len: int) -> None:
    st.header("One mask, two conventions")
    st.markdown("**Here** (and in `F.scaled_dot_product_attention`): `True` = may attend")
    if view.ours_text:
        boundary.printed(view.ours_text)
    st.markdown("**`nn.MultiheadAttention`**: `attn_mask = masks.to_blocked(mask)`, `True` = blocked")
    if view.blocked_text:
        boundary.printed(view.blocked_text)
    if not view.ours_text:
        st.caption(f"Too wide to print ({src_len} keys); the heatmap shows it.")


SIDE_CODE_MOST_CHARS = 38  # fits half the page at 1280 × 800: 378 px, 8.4 px a character and 40 px of padding


def _printed_width(view) -> int:
    """The longest line of the masks as torch prints them."""
    return max((len(line) for text in (view.ours_text, view.blocked_text) for line in text.splitlines()), default=0)


def show_panels(view, src_len: int) -> None:
    panels = {panel.key: panel for panel in view.panels}
    with st.container():  # one block, however the mask is laid out: the charts below keep their places
        if "mask" in panels and _printed_width(view) <= SIDE_CODE_MOST_CHARS:
            mask_col, conventions_col = st.columns(2, gap="large")
            with mask_col:
                boundary.show_figure(panels["mask"])
            with conventions_col:  # one mask, two conventions
                show_conventions(view, src_len)
        elif "mask" in panels:  # a wider print gets the page's width: beside the figure it hid its 6th column
            boundary.show_figure(panels["mask"])
            show_conventions(view, src_len)
    boundary.show_figure(panels["weights"])
    output_col, _ = st.columns(2)
    with output_col:
        boundary.show_figure(panels["output"])


def presenter_panels(view, settings) -> None:
    """The agreement beside the weights the mask gives, filling the first screen; the mask itself and any fully
    masked rows below."""
    panels = {panel.key: panel for panel in view.panels}
    side, stage = st.columns([1.2, 3.8], gap="medium")
    with side:
        show_agreement(view, settings, presenter=True)
    with stage:
        boundary.show_figure(panels["weights"], bare=True, stage=True)
    if "mask" in panels:
        boundary.show_figure(panels["mask"], bare=True)
    if view.fully_masked:
        show_fully_masked(view, settings)


def main() -> None:
    presenter = sidebar.presenter_toggle()
    settings = sidebar.settings_sidebar(fields=sidebar.CROSS_FIELDS)
    seed_int, seed_choice = teaching_runs.seed_int, teaching_runs.seed_choice
    batch_size = settings.batch_size

    st.title("Masks and cross-attention")
    tgt_len = seed_int("masks_tgt", "tgt_len", 4, 1, MAX_CROSS_TOKENS)
    src_len = seed_int("masks_src", "src_len", 6, 1, MAX_CROSS_TOKENS)
    seed_choice("masks_kind", "mask", views.DEFAULT_MASK, MASK_KINDS)
    seed_choice("masks_impl", "impl", "explicit", MASK_IMPLEMENTATIONS)
    seed_int("masks_batch", "batch", 0, 0, batch_size - 1)

    controls_box = st.expander("Lengths, mask and implementation", expanded=False) if presenter else st.container()
    with controls_box:
        c1, c2, c3, c4, c5 = st.columns([2, 2, 2, 2, 1])
        c1.slider("query length (tgt_len)", 1, MAX_CROSS_TOKENS, key="masks_tgt")
        c2.slider("key length (src_len)", 1, MAX_CROSS_TOKENS, key="masks_src")
        kind = c3.selectbox("mask", MASK_KINDS, key="masks_kind")
        implementation = c4.radio("attention implementation", MASK_IMPLEMENTATIONS, key="masks_impl", horizontal=True)
        batch_index = int(c5.number_input("batch element", 0, batch_size - 1, key="masks_batch"))
        mask = mask_choice(kind, settings, tgt_len, src_len)

    url.show_notices()
    view = teaching_runs.masks_view(settings, tgt_len, src_len, mask.params, batch_index, implementation, presenter)
    if not presenter:
        st.markdown(
            f"`QKVMultiHeadAttention(hidden_dim={settings.d_out}, n_heads={settings.num_heads})`: {tgt_len} queries "
            f"(q0…) attend to {src_len} keys and values (k0…) from another sequence, batch {batch_size}. Seeded random "
            "embeddings; the heads and widths come from the sidebar."
        )
        st.caption(views.mask_note(kind, tgt_len, src_len))
    if presenter:
        presenter_panels(view, settings)
    else:
        with st.container():  # one block, warning or none: the charts below keep their places (url.show_notices)
            if view.fully_masked:
                show_fully_masked(view, settings)
        show_agreement(view, settings, presenter)
        show_panels(view, src_len)
    url.sync_url(
        settings, tgt_len=tgt_len, src_len=src_len, mask=kind, impl=implementation, batch=batch_index, **mask.url_params
    )


boundary.run_page(main, light=True)  # small at any setting (budget: 32 × 32 tokens)
