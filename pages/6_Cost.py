"""Cost: how time and memory grow with the sequence length, for four ways to run the same attention.

The measurement (explorer.glue.memory.measuring, mha_core.runs.profiling) uses the sidebar's device, dtype, num_heads,
head_dim and batch_size; the figures and the table come from explorer.views.cost.
Nothing is measured until "Measure" is pressed.
"""

import streamlit as st

from explorer.glue.frame import boundary, sidebar
from explorer.glue.memory import admission, budget, measuring
from explorer.glue.state import url
from explorer.views import cost
from explorer.views.figures.panel import Panel

st.set_page_config(page_title="Cost · Multi-Head Attention Explorer", page_icon="⏱️", layout="wide")

TOKEN_CHOICES = url.COST_TOKEN_CHOICES  # 64, 128, ..., 1024
TIME_BUDGET_S = measuring.TIME_BUDGET_S


def max_tokens_from_url() -> int:
    """The page's ?max_tokens=, clamped to 64–1024 and rounded down to a measured length."""
    wanted = url.url_int("max_tokens", cost.DEFAULT_MAX_TOKENS, TOKEN_CHOICES[0], TOKEN_CHOICES[-1])
    snapped = max(t for t in TOKEN_CHOICES if t <= wanted)
    if snapped != wanted:
        url.notice(f"max_tokens={wanted} is not one of the measured lengths; using {snapped}.")
    return snapped


def main() -> None:
    presenter = sidebar.presenter_toggle()
    settings = sidebar.settings_sidebar(fields=sidebar.COST_FIELDS)
    state = st.session_state
    if "cost_max_tokens" not in state:
        state.cost_max_tokens = max_tokens_from_url()
    st.sidebar.header("Cost")
    chosen = st.sidebar.select_slider(
        "longest sequence to measure",
        options=TOKEN_CHOICES,
        key="cost_max_tokens",
        help="Lengths double from 64 up to this one.",
    )

    st.title("Cost: time and memory against sequence length")
    url.show_notices()
    spec = measuring.cost_spec(settings, chosen, TIME_BUDGET_S)
    longest = spec.max_tokens
    with st.container():  # one block, warning or none: the figures below keep their places (url.show_notices)
        if longest < chosen:
            st.warning(
                f"batch_size={settings.batch_size} × {settings.num_heads} heads × {chosen}² tokens in "
                f"{settings.dtype} is over the measurement's memory budget of {budget.job_bytes() // budget.MB} MB "
                f"within {budget.budget_words()}; "
                f"measuring up to {longest} tokens, the nearest length that fits. Lower batch_size or num_heads to "
                "go further.",
                icon="⚠️",
            )
    tokens = spec.tokens
    if not presenter:
        st.markdown(
            f"Four ways to run one module with d_in = d_out = {settings.num_heads} × {settings.head_dim} = "
            f"{spec.d_model}, batch {settings.batch_size}, on **{settings.device}** in **{settings.dtype}**, at "
            f"T = {', '.join(str(t) for t in tokens)}: the explicit Listing 3.5 forward, the traced forward that "
            "keeps every step, torch's fused `F.scaled_dot_product_attention`, and `torch.nn.MultiheadAttention` "
            f"with the same weights. At most {TIME_BUDGET_S:.0f} s: lengths that would run over are skipped."
        )
    # Presenter mode: the formula and the button in a narrow column, the memory figure filling the first screen.
    side, stage = st.columns([1.4, 3.6], gap="medium") if presenter else (st.container(), None)
    with side:
        formula_and_measure(spec, settings, tokens, presenter)

    report = state.get("cost_report")
    if report is None:
        (stage or st).info("Press **Measure** to time the four variants and measure their peak memory.")
    else:
        show_report(report, spec, presenter, side, stage)
    url.sync_url(settings, max_tokens=chosen)


def formula_and_measure(spec, settings, tokens: list[int], presenter: bool) -> None:
    """The formula b·h·T²·bytes and the Measure button (presenter mode: the button first, the formula folded)."""
    formula = cost.formula_markdown(settings.batch_size, settings.num_heads, settings.dtype, tokens)
    if not presenter:
        st.markdown(formula)
        st.markdown(cost.work_markdown(settings.batch_size, settings.num_heads, settings.head_dim, tokens))
    measure = st.button("Measure", type="primary", key="cost_measure")
    if presenter:
        with st.expander("The formula: b·h·T²·bytes"):
            st.markdown(formula)
    if measure:
        bar = st.progress(0.0, text="Waiting for the CPU…")
        try:
            st.session_state.cost_report = measuring.measure_cost(spec, bar.progress)
        except (TimeoutError, admission.ServerBusyError) as error:
            st.warning(f"{error}.", icon="⏳")
        bar.empty()


def show_report(report, spec, presenter: bool, side, stage) -> None:
    """Notes in ``side``; the memory figure on ``stage`` (presenter mode), then the time figure and the tables."""
    with side:
        report_notes(report, spec)
    shape = f"(b, h, T, T) = ({report.spec.batch_size}, {report.spec.num_heads}, T, T)"
    memory = Panel(
        "cost_memory",
        "Peak memory: the explicit paths grow like T²",
        f"Attention matrices {shape}; log-log axes, so T² is a straight line of slope 2. "
        + cost.memory_method(report.spec.device),
        cost.memory_figure(report, presenter),
    )
    if stage is None:
        boundary.show_figure(memory)
    else:
        with stage:
            boundary.show_figure(memory, bare=True, stage=True)
    boundary.show_figure(
        Panel(
            "cost_time",
            "Forward time",
            f"Median of {report.spec.repeats} calls after a warm-up, {shape}. Times on a shared "
            "server vary with what other visitors run.",
            cost.time_figure(report, presenter),
        )
    )
    st.header("Measured beside the formula")
    boundary.show_table(cost.table_rows(report), presenter=presenter, key="cost_table")
    trace_rows = cost.trace_rows(report)
    if trace_rows:
        same = all(row["equal"] for row in trace_rows)
        st.markdown(
            f"The trace's own (b, h, T, T) tensors at T = {report.tokens()[-1]}: their bytes "
            f"{'equal' if same else 'differ from'} the formula b·h·T²·bytes."
        )
        boundary.show_table(trace_rows, presenter=presenter, key="cost_trace", width="content")
    st.caption(f"Measured in {report.seconds:.1f} s on {report.spec.device}, {report.spec.dtype}.")


def report_notes(report, spec) -> None:
    """Whether the numbers shown were measured with other settings, and which lengths were skipped."""
    if report.spec != spec:
        st.info(
            "These numbers were measured with other settings (see the figure titles); press Measure again "
            "for the current ones."
        )
    if report.skipped:
        st.warning(
            f"Skipped T = {', '.join(str(t) for t in report.skipped)} to stay within "
            f"{report.spec.time_budget_s:.0f} s.",
            icon="⏱️",
        )


boundary.run_page(main)
