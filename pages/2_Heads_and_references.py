"""Heads and references: section 3.6.2's claim made visible, and the module checked against torch's attention.

1. Every head computed on its own (the book's MultiHeadAttentionWrapper) beside the same head of the batched module.
2. The module against nn.MultiheadAttention and F.scaled_dot_product_attention with the same weights, in float32
   and float64, on the chosen device.
"""

import streamlit as st

from explorer.glue.cached import real_circuits, teaching_runs
from explorer.glue.frame import boundary, sidebar
from explorer.glue.memory import caches
from explorer.glue.state import url
from explorer.views import head_circuits, heads_and_references

st.set_page_config(page_title="Heads and references · Multi-Head Attention Explorer", page_icon="🧩", layout="wide")


def main() -> None:
    presenter = sidebar.presenter_toggle()
    sidebar_settings = sidebar.settings_sidebar(fields=sidebar.EVAL_FIELDS)
    settings = caches.fit_page(sidebar_settings, "heads")
    state = st.session_state

    teaching_runs.seed_int("heads_batch", "batch", 0, 0, settings.batch_size - 1)
    st.sidebar.header("View")
    st.sidebar.number_input("batch element", 0, settings.batch_size - 1, key="heads_batch")
    batch_index = int(state.heads_batch)

    st.title("Heads and references")
    part = sidebar.section_choice("part", PARTS, default="heads")
    url.show_notices()
    tabs = dict(zip(PARTS, sidebar.section_tabs("part", PARTS, part), strict=True))
    shown: dict[str, int] = {}  # the open part's own URL parameters
    with tabs[part]:  # only the open part runs and is sent
        if part == "heads":
            heads_part(settings, batch_index, presenter)
        elif part == "circuits":
            shown = circuits_part(settings, batch_index, presenter)
        else:
            references_part(settings, presenter)
    url.sync_url(sidebar_settings, batch=batch_index, part=part, **shown)


PARTS = {
    "heads": "h heads = one batched module",  # short: the three fit the tab list at 1280 px (the third was cut)
    "circuits": "W_QK and W_OV: heads add",
    "references": "Against torch's attention",
}


def circuits_part(settings, batch_index: int, presenter: bool) -> dict[str, int]:
    """One head as W_QK and W_OV, and one token's output row as the sum over heads; returns its URL parameters."""
    labels = caches.input_labels(settings)
    teaching_runs.seed_int("circuits_head", "head", 0, 0, settings.num_heads - 1)
    teaching_runs.seed_int("circuits_token", "token", min(1, len(labels) - 1), 0, len(labels) - 1)
    url.show_notices()  # a head or token out of range in the link, corrected just now
    st.sidebar.number_input("head", 0, settings.num_heads - 1, key="circuits_head")
    st.sidebar.selectbox(
        "token (for the sum)", list(range(len(labels))), key="circuits_token", format_func=lambda i: f"{i}: {labels[i]}"
    )
    head, token = int(st.session_state.circuits_head), int(st.session_state.circuits_token)
    view = teaching_runs.circuits_view(settings, head, batch_index, token, presenter)
    if not presenter:
        st.markdown(head_circuits.INTRO)
        st.caption(head_circuits.SCALE_NOTE + " " + head_circuits.RANK_NOTE)
    m1, m2 = st.columns(2)
    m1.metric(f"max |x W_QK xᵀ − attn_scores|, head {head}", f"{view.scores_diff:.1e}")
    m2.metric("max |Σ_h Aʰ X W_OVʰᵀ + b − output|", f"{view.output_diff:.1e}")
    left, right = st.columns(2)
    with left:
        boundary.show_figure(view.panels[0], bare=presenter)
    with right:
        boundary.show_figure(view.panels[1], bare=presenter)
    for panel in view.panels[2:]:
        boundary.show_figure(panel, bare=presenter)
    if settings.model and real_circuits.copying_fits(settings.model):  # a real model: what the head copies
        copying = real_circuits.copying_view(settings.model, settings.layer, head, presenter)
        boundary.show_figure(copying.matrix, bare=presenter)
        boundary.show_figure(copying.scores, bare=presenter)
    return {"head": head, "token": token}


def heads_part(settings, batch_index: int, presenter: bool) -> None:
    if not presenter:
        st.markdown(
            "Section 3.6.2 of the book replaces `MultiHeadAttentionWrapper` (a list of causal heads, each with its own "
            "small W_query, W_key, W_value, run one after another and concatenated) by one module that projects once, "
            "splits the result into heads with `view` and `transpose`, and runs every head in one matmul. Below, each "
            "head is computed alone with its own slice of the batched weights, beside the batched module's head. "
            "The equality holds up to the concatenation: `out_proj` is extra, the wrapper has none."
        )
        if settings.train:
            st.info(
                "Train mode is on in the sidebar; this comparison runs in eval mode (no dropout), so it is "
                "deterministic."
            )

    heads_view = teaching_runs.heads_view(settings, batch_index, presenter)
    side, stage = st.columns([1.2, 3.8], gap="medium") if presenter else (st.container(), st.container())
    with side:
        show_difference(heads_view)
    with stage:
        if presenter:  # the last panel (the difference) fills the first screen beside its largest value
            boundary.show_figure(heads_view.panels[-1], bare=True, stage=True)
    show_differences_by_step(heads_view, presenter)
    if not presenter:
        for panel in heads_view.panels:
            boundary.show_figure(panel)


def show_difference(heads_view) -> None:
    worst = max(heads_view.max_abs_diff.values())
    st.metric("largest difference, any step, any head", "0: bit for bit" if worst == 0 else f"{worst:.3g}")


def show_differences_by_step(heads_view, presenter: bool) -> None:
    diffs = {"step": list(heads_view.max_abs_diff), "max |separate − batched|": list(heads_view.max_abs_diff.values())}
    boundary.show_table(
        diffs, presenter=presenter, key="heads_diffs", width="content", formats={"max |separate − batched|": "%.3e"}
    )


def references_part(settings, presenter: bool) -> None:
    st.markdown(heads_and_references.FUSED_NO_WEIGHTS)
    columns = teaching_runs.reference_dtypes(settings)
    if not presenter:
        st.markdown(
            f"The module's weights are copied into `torch.nn.MultiheadAttention` (causal mask translated to its "
            "True = blocked convention, per-head weights requested) and its projections are fed to "
            f"`F.scaled_dot_product_attention(is_causal=True)`, on **{settings.device}**. The float64 baseline is the "
            "same module in float64: our float error should be about torch's own, at most about twice it."
        )
        moved = [name for name, _, _ in columns if name.endswith("(cpu)")]
        if moved:
            st.info(f"{settings.device} has no float64, so the float64 column runs on the cpu.")
    reports = teaching_runs.references(settings)
    table = heads_and_references.reference_table(reports)
    boundary.show_table(table, presenter=presenter, key="reference_table", formats=dict.fromkeys(reports, "%.2e"))
    if not presenter:
        st.caption(
            "In the float64 column the baseline is the module itself, so our own error there reads 0; torch's "
            "rows show how far torch's float64 kernels are from ours."
        )
    for name, report in reports.items():
        if heads_and_references.within_torch_error(report):
            st.success(
                f"{name}: our errors are within twice torch's own, as flash-attention's tests require.",
                icon=":material/check_circle:",
            )
        else:
            st.error(
                f"{name}: our error is above twice torch's own (output {report.output_vs_float64:.2e}, "
                f"weights {report.weights_vs_float64:.2e})."
            )


boundary.run_page(main)
