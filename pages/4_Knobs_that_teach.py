"""Knobs that teach: the softmax scale (temperature), dropout in train mode, and hand-made weights.

Each knob runs the same MultiHeadAttention: with ExplicitAttention(scale=...), on a train-mode copy, or on a copy
(or a new module) with hand-made weights; the shared cached module is never changed. The knobs are in the URL.
"""

import streamlit as st

from explorer.glue.cached import teaching_runs
from explorer.glue.frame import boundary, sidebar
from explorer.glue.memory import caches
from explorer.glue.state import url
from explorer.glue.state.url import PRESETS, SCALE_MULTIPLIERS

st.set_page_config(page_title="Knobs that teach · Multi-Head Attention Explorer", page_icon="🎛️", layout="wide")


def main() -> None:
    presenter = sidebar.presenter_toggle()
    sidebar_settings = sidebar.settings_sidebar(fields=sidebar.EVAL_FIELDS)
    settings = caches.fit_page(sidebar_settings, "knobs")
    seed_int, seed_choice = teaching_runs.seed_int, teaching_runs.seed_choice

    seed_choice("knobs_scale", "scale", "1", SCALE_MULTIPLIERS)
    default_percent = round(settings.dropout * 100) if settings.dropout >= 0.05 else 50
    seed_int("knobs_drop", "drop", default_percent, 5, 90)
    seed_int("knobs_draw", "draw", 0, 0, 999)
    seed_choice("knobs_preset", "preset", "previous", PRESETS)

    st.title("Knobs that teach")
    knob = sidebar.section_choice("knob", KNOBS, default="temperature")
    url.show_notices()
    tabs = dict(zip(KNOBS, sidebar.section_tabs("knob", KNOBS, knob), strict=True))

    side, stage = st.columns([1.2, 3.8], gap="medium") if presenter else (st.container(), None)

    def show(panels, pairs_from: int = 1, main: int = 0) -> None:
        """The first panel at full width; from ``pairs_from`` on, two to a row (presenter mode: ``main`` alone,
        filling the first screen beside the knob)."""
        if presenter:
            with stage:
                boundary.show_figure(panels[main], bare=True, stage=True)
            return
        for panel in panels[:pairs_from]:
            boundary.show_figure(panel, bare=presenter)
        rest = panels[pairs_from:]
        for start in range(0, len(rest), 2):
            for column, panel in zip(st.columns(2), rest[start : start + 2], strict=False):
                with column:
                    boundary.show_figure(panel, bare=presenter)

    # Only the open knob runs and is sent; the others keep their values in session state and the URL.
    with tabs[knob], side:
        {"temperature": temperature_knob, "dropout": dropout_knob, "presets": preset_knob}[knob](
            settings, show, presenter
        )
    state = st.session_state
    url.sync_url(
        sidebar_settings,
        knob=knob,
        scale=state.knobs_scale,
        drop=int(state.knobs_drop),
        draw=int(state.knobs_draw),
        preset=state.knobs_preset,
    )


KNOBS = {
    "temperature": "1. Softmax scale (temperature)",
    "dropout": "2. Dropout in train mode",
    "presets": "3. Hand-made weights",
}


def metric_columns(presenter: bool):
    """Three metrics side by side; in presenter mode one under the other, in the narrow column beside the figure."""
    return (st.container(), st.container(), st.container()) if presenter else st.columns(3)


def temperature_knob(settings, show, presenter: bool) -> None:
    head_dim = settings.head_dim
    multiplier = st.select_slider(
        "softmax scale, in units of 1/√head_dim",
        SCALE_MULTIPLIERS,
        key="knobs_scale",
        format_func=lambda m: f"×{m} → {float(m) / head_dim**0.5:.3g}" + (" (the book)" if m == "1" else ""),
    )
    temperature = teaching_runs.temperature_view(settings, multiplier, presenter)
    if not presenter:
        st.markdown(
            f"The weights are softmax(scores × scale). The book's scale is 1/√head_dim = {1 / head_dim**0.5:.3g}; "
            f"the temperature τ = 1/×{multiplier} = {1 / float(multiplier):.3g} is its inverse, in those units. A "
            "larger scale (lower temperature) sharpens each row towards one-hot, entropy 0; a smaller one flattens it "
            "towards uniform, entropy log(number of visible keys)."
        )
    e1, e2, e3 = metric_columns(presenter)
    e1.metric("softmax scale", f"{temperature.scale:.4g}")
    e2.metric("mean row entropy (nats)", f"{temperature.mean_entropy:.4f}")
    e3.metric(
        "uniform gives (nats)",
        f"{temperature.max_mean_entropy:.4f}",
        help="the mean row entropy of uniform attention over the visible keys: the most possible",
    )
    show(temperature.panels)


def dropout_knob(settings, show, presenter: bool) -> None:
    d1, d2 = (st.container(), st.container()) if presenter else st.columns([3, 1])
    percent = int(d1.slider("dropout p (%)", 5, 90, step=5, key="knobs_drop"))
    draw = int(d2.number_input("draw", 0, 999, key="knobs_draw", help="Another seed for dropout's random mask."))
    dropout = teaching_runs.dropout_view(settings, percent, draw, presenter)
    if not presenter:
        st.markdown(
            f"In train mode `nn.Dropout(p={dropout.p:g})` zeroes each attention weight with probability p and "
            f"multiplies the survivors by 1/(1−p) = {dropout.scale:.4g}, so each weight keeps its expected value. "
            "Rows no longer sum "
            "to 1, only on average. In eval mode dropout does nothing. The module here is a train-mode copy; the "
            "sidebar's train toggle is not needed."
        )
    k1, k2, k3 = metric_columns(presenter)
    k1.metric(
        "kept", f"{dropout.kept_fraction:.1%}", help=f"share of the unmasked weights kept; expected {1 - dropout.p:.0%}"
    )
    k2.metric("survivors scaled by", f"×{dropout.scale:.4g}")
    k3.metric("rescale error", f"{dropout.max_rescale_error:.1e}", help="max |after − before × 1/(1−p)| on kept cells")
    show(dropout.panels, pairs_from=3, main=dropout.main_index)


def preset_knob(settings, show, presenter: bool) -> None:
    preset = st.radio("weights", PRESETS, key="knobs_preset", horizontal=True)
    made = teaching_runs.preset_view(settings, preset, presenter)
    st.markdown(made.description)
    if made.hits is not None:  # a positional preset, on at most MAX_PRESET_TOKENS one-hot positions
        if settings.num_tokens > made.num_tokens:
            st.caption(f"Positional presets use the first {made.num_tokens} positions.")
        if not presenter:
            st.caption(
                f"Input: {made.num_tokens} one-hot position vectors (d_in = head_dim = {made.num_tokens}); "
                "W_value and out_proj are the identity, so each head's context row is its weight row. "
                "Every head gets the same pattern."
            )
        st.metric(
            "rows on the pattern", f"{made.hits:.0%}", help="rows whose heaviest key is the one the pattern names"
        )
    show(made.panels, pairs_from=2)


boundary.run_page(main)
