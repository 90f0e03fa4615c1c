"""Trained heads: train a tiny model built from the real MultiHeadAttention, then look at what its heads learned.

Pages lay out; they do not compute. Training and its caches live in explorer.glue.training_cache, the
figures in explorer.views.trained_heads, the model and tasks in mha_core.training.
"""

from __future__ import annotations

import time
from typing import NamedTuple
from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from explorer.glue import controls, trained_link, training_cache
from explorer.glue import settings as cfg
from explorer.views import trained_heads
from explorer.views.trained_heads import TASKS

st.set_page_config(page_title="Trained heads · Multi-Head Attention Explorer", page_icon="🎓", layout="wide")

HEAD_CHOICES = cfg.TRAIN_HEAD_CHOICES  # divisors of d_model = 32; ?trained= links are clamped to the same offer
D_MODEL = cfg.TRAIN_D_MODEL
MIN_STEPS, MAX_STEPS = cfg.TRAIN_MIN_STEPS, cfg.TRAIN_MAX_STEPS  # within what a trained spec can carry
TASK_LABELS = {
    "previous_token": "Previous token",
    "first_token": "First token",
    "key_value_lookup": "Key-value lookup",
    "induction": "Induction (two layers)",
}
_SAVED = "_tr_params"  # a non-widget copy of the page's choices: widget state is dropped on page switches


class PageParams(NamedTuple):
    task: str
    heads: int
    layers: int
    steps: int
    layer: int  # the layer the explorer link opens


# --- the page ---------------------------------------------------------------------------------------------------------


def main() -> None:
    def _initial_params() -> dict[str, object]:
        """First draw in this session (or after a page switch): the URL if it names a value, else the last choices."""
        saved = st.session_state.get(_SAVED, {})
        task = controls.url_choice("task", saved.get("task", "previous_token"), list(TASKS))
        defaults = TASKS[task].defaults
        heads = int(controls.url_choice("heads", str(saved.get("heads", 2)), [str(h) for h in HEAD_CHOICES]))
        layers = controls.url_int("layers", saved.get("layers", defaults.num_layers), 1, 2)
        steps = controls.url_int("steps", saved.get("steps", defaults.steps), MIN_STEPS, MAX_STEPS)
        layer = controls.url_int("layer", saved.get("layer", layers - 1), 0, 1)
        return {"task": task, "heads": heads, "layers": layers, "steps": steps, "layer": layer}

    def _on_task_change() -> None:
        """A new task brings its own budget and depth (the user can still change them)."""
        state = st.session_state
        defaults = TASKS[state.w_tr_task].defaults
        state.w_tr_steps, state.w_tr_layers = defaults.steps, defaults.num_layers
        state.w_tr_layer = defaults.num_layers - 1  # the layer that carries the task's pattern

    def page_controls() -> PageParams:
        state = st.session_state
        if "w_tr_task" not in state:
            for name, value in _initial_params().items():
                state[f"w_tr_{name}"] = value
        if "w_tr_layer" not in state:  # its radio is drawn only with a result, so Streamlit may have dropped it
            state.w_tr_layer = state.get(_SAVED, {}).get("layer", 0)
        left, mid, right, far = st.columns([3, 2, 1.4, 1.6])
        task = left.selectbox(
            "task", list(TASKS), format_func=TASK_LABELS.get, key="w_tr_task", on_change=_on_task_change
        )
        heads = mid.radio(
            "heads",
            HEAD_CHOICES,
            key="w_tr_heads",
            horizontal=True,
            help=f"d_model = {D_MODEL} is split into heads × head_dim.",
        )
        layers = right.radio(
            "layers", (1, 2), key="w_tr_layers", horizontal=True, help="Residual attention layers. Induction needs two."
        )
        steps = far.number_input(
            "training steps",
            MIN_STEPS,
            MAX_STEPS,
            step=50,
            key="w_tr_steps",
            help="Adam steps, one fresh batch each; the learning rate decays to 0 over them.",
        )
        state.w_tr_layer = min(int(state.w_tr_layer), int(layers) - 1)  # before its radio is drawn
        return PageParams(task, int(heads), int(layers), int(steps), state.w_tr_layer)

    def train_config(params: PageParams, settings) -> trained_heads.TrainConfig:
        """The config to train: the page's choices plus the sidebar's device and seed."""
        shape = {
            "num_heads": params.heads,
            "num_layers": params.layers,
            "d_model": D_MODEL,
            "steps": params.steps,
            "seed": settings.seed,
        }
        try:
            return trained_heads.make_config(params.task, **shape, device=settings.device)
        except ValueError as error:
            controls.notice(f"Training on cpu instead of {settings.device}: {error}")
            return trained_heads.make_config(params.task, **shape, device="cpu")

    def _request_training() -> None:
        """The Train button's on_click: the job starts in the script, once the config is known."""
        st.session_state["_tr_train_requested"] = True

    # --- training in progress -----------------------------------------------------------------------------------------

    def show_job(job: training_cache.TrainingJob, presenter: bool) -> None:
        """Progress bar and live loss and accuracy curves until the job ends.

        The curves are redrawn after every ~10% of the steps or every 2 s, whichever comes first.
        """
        total = job.config.steps
        bar = st.progress(0.0, text=f"Training {TASK_LABELS[job.config.task]}…")
        loss_slot, accuracy_slot = (column.empty() for column in st.columns(2))
        drawn = {"step": 0, "time": 0.0, "count": 0}

        def draw(job: training_cache.TrainingJob) -> None:
            steps, loss, accuracy = job.history()
            step = steps[-1] if steps else 0
            text = f"Training {TASK_LABELS[job.config.task]} · step {step} of {total}"
            if steps:
                text += f" · loss {loss[-1]:.3f} · accuracy {accuracy[-1]:.2f}"
            if job.stopping:
                text += " · stopping…"
            bar.progress(min(step / total, 1.0), text=text)
            due = step - drawn["step"] >= total / 10 or time.monotonic() - drawn["time"] >= 2.0 or not job.running
            if steps and step > drawn["step"] and due:
                drawn.update(step=step, time=time.monotonic(), count=drawn["count"] + 1)
                figs = trained_heads.curve_figures(steps, loss, accuracy, total=total, presenter=presenter)
                for slot, fig, name in zip((loss_slot, accuracy_slot), figs, ("loss", "accuracy"), strict=True):
                    slot.plotly_chart(fig, width="stretch", theme=None, key=f"live_{name}_{drawn['count']}")

        training_cache.follow(job, draw)

    # --- results ------------------------------------------------------------------------------------------------------

    def show_result(result: trained_heads.TrainResult, presenter: bool) -> None:
        config = result.config
        view = training_cache.trained_view(result, presenter)
        if result.stopped_early:
            st.warning(
                f"Stopped at step {result.steps_run} of {config.steps}. This partial model is kept for this "
                "session only; press Train for a full run.",
                icon=":material/stop_circle:",
            )
        best_layer, best_head, best_score = trained_heads.best_marked_head(result)
        where = f"layer {best_layer}, head {best_head}" if config.num_layers > 1 else f"head {best_head}"
        columns = st.columns(4)
        columns[0].metric(
            "held-out accuracy",
            f"{result.heldout_accuracy:.1%}",
            help=f"Scored positions of {trained_heads.HELDOUT_SIZE} sequences never trained on.",
        )
        columns[1].metric(f"best head ({where})", f"{best_score:.2f}", help=trained_heads.score_name(config.task))
        columns[2].metric("this example", f"{view.example_correct} of {view.example_scored} right")
        columns[3].metric(
            "training time", f"{result.seconds:.1f} s", help=f"{result.steps_run} steps on {config.device}"
        )

        for panel in view.heads:
            controls.show_figure(panel, presenter)

        st.markdown("**The held-out example: targets and predictions**")
        st.dataframe(view.table, width="stretch")
        st.caption(
            f"Tokens of the example shown above, shape (T,) = ({config.seq_len},) · expected key: the position "
            "each scored query should attend to · target and prediction as tokens · blank: not scored."
        )

        score_column, link_column = st.columns([3, 2])
        with score_column:
            controls.show_figure(view.scores, presenter)
        with link_column:
            show_explorer_link(result)

        loss_column, accuracy_column = st.columns(2)
        with loss_column:
            controls.show_figure(view.curves[0], presenter)
        with accuracy_column:
            controls.show_figure(view.curves[1], presenter)

    def show_explorer_link(result: trained_heads.TrainResult) -> None:
        st.markdown("**Take a trained layer to the explorer**")
        if result.stopped_early:
            st.caption("A stopped run stays on this page; finish a full run to open it in the explorer.")
            return
        layers = result.config.num_layers
        layer = 0
        if layers > 1:
            layer = st.radio(
                "layer to open", range(layers), key="w_tr_layer", horizontal=True, format_func=lambda k: f"layer {k}"
            )
        spec = trained_link.format_trained_spec(result.config, layer)
        label = f"Open layer {layer} in the explorer"
        try:  # in-app navigation keeps the session (and the sidebar's settings)
            st.page_link("app.py", label=label, icon=":material/open_in_new:", query_params={"trained": spec})
        except StreamlitPageNotFoundError:  # the page was run on its own (AppTest): app.py is not its entrypoint
            st.link_button(label, f"./?{urlencode({'trained': spec})}", icon=":material/open_in_new:")
        st.caption(
            f"The explorer runs this layer's real module on the held-out example's input, shape (1, T, d_model) "
            f"= (1, {result.config.seq_len}, {result.config.d_model}). The link carries `trained=` this spec:"
        )
        st.code(spec, language=None, wrap_lines=True)

    # --- the page -----------------------------------------------------------------------------------------------------

    presenter = controls.presenter_toggle()
    settings = controls.settings_sidebar()

    st.title("Trained heads")
    st.markdown(
        "With random weights, attention is close to uniform. Here a tiny model learns a synthetic task: token and "
        "position embeddings, one or two residual layers of the project's own `MultiHeadAttention`, and a linear "
        "read-out, with no MLP and no LayerNorm, so attention does all the work. Its heads then show the pattern "
        "the task needs."
    )
    params = page_controls()
    config = train_config(params, settings)
    st.session_state[_SAVED] = params._asdict()
    controls.show_notices()
    st.info(TASKS[params.task].description, icon=":material/flag:")
    st.caption(
        f"d_model {config.d_model} = {config.num_heads} heads × head_dim {config.d_model // config.num_heads} · "
        f"vocabulary {config.vocab_size} · {config.seq_len} tokens · batch {config.batch_size} · Adam, lr "
        f"{config.lr:g} with cosine decay · on **{config.device}** with seed **{config.seed}** from the sidebar "
        "(the sidebar's other settings belong to the explorer)."
    )
    controls.sync_url(settings, **params._asdict())

    job = training_cache.current_job()
    if st.session_state.pop("_tr_train_requested", False) and job is None:
        job = training_cache.start_job(config)  # before the buttons, so that Stop is live while it trains
    result = training_cache.result_for(config)
    finished = result is not None and not result.stopped_early
    train_column, stop_column, note_column = st.columns([1, 1, 6], vertical_alignment="center")
    train_column.button(
        "Train",
        type="primary",
        key="tr_train",
        on_click=_request_training,
        disabled=job is not None or finished,
        width="stretch",
        help="Already trained: the same settings give the same weights. Change the seed for another run."
        if finished
        else "Train from scratch with these settings.",
    )
    stop_column.button(
        "Stop",
        key="tr_stop",
        on_click=training_cache.request_stop,
        disabled=job is None,
        width="stretch",
        help="End training now and look at the partial model.",
    )
    if finished and job is None:
        note_column.caption(
            f"Trained with these settings ({result.steps_run} steps): shown from the cache, no training needed."
        )
    if job is not None:
        show_job(job, presenter)
        training_cache.collect(job)
        st.rerun()

    error = training_cache.error_for(config)
    if error is not None:
        st.error(f"Training failed: {error}")
    if result is None:
        st.info(
            "Press **Train**: the default budget takes a few seconds on a CPU. Results are kept, so coming back "
            "with the same settings shows them at once.",
            icon=":material/model_training:",
        )
        st.stop()
    show_result(result, presenter)


controls.run_page(main)
