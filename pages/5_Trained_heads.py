"""Trained heads: train a tiny model built from the real MultiHeadAttention, then look at what its heads learned.

Pages lay out; they do not compute. Training and its caches live in explorer.glue.cached.training_runs, the
figures in explorer.views.trained_heads, the model and tasks in mha_core.toy.tiny_training.
"""

from __future__ import annotations

import time
from typing import NamedTuple
from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from explorer.glue.cached import training_runs as training_cache
from explorer.glue.frame import boundary, code_css, sidebar
from explorer.glue.state import settings as cfg
from explorer.glue.state import trained_link, url
from explorer.glue.state.url import TASKS
from explorer.views import trained_heads

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


# --- the page's own choices -------------------------------------------------------------------------------------------


def _initial_params() -> dict[str, object]:
    """First draw in this session (or after a page switch): the URL if it names a value, else the last choices."""
    saved = st.session_state.get(_SAVED, {})
    task = url.url_choice("task", saved.get("task", "previous_token"), list(TASKS))
    defaults = TASKS[task].defaults
    heads = int(url.url_choice("heads", str(saved.get("heads", 2)), [str(h) for h in HEAD_CHOICES]))
    layers = url.url_int("layers", saved.get("layers", defaults.num_layers), 1, 2)
    steps = url.url_int("steps", saved.get("steps", defaults.steps), MIN_STEPS, MAX_STEPS)
    layer = url.url_int("layer", saved.get("layer", layers - 1), 0, 1)
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
    task = left.selectbox("task", list(TASKS), format_func=TASK_LABELS.get, key="w_tr_task", on_change=_on_task_change)
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


def train_config(params: PageParams, settings):
    """The config to train: the page's choices plus the sidebar's device and seed."""
    shape = {
        "num_heads": params.heads,
        "num_layers": params.layers,
        "d_model": D_MODEL,
        "steps": params.steps,
        "seed": settings.seed,
    }
    return training_cache.train_config(params.task, shape, settings.device)


def _request_training() -> None:
    """The Train button's on_click: the job starts in the script, once the config is known."""
    st.session_state["_tr_train_requested"] = True


def _request_replay() -> None:
    """The Replay button's on_click: the recorded curves are redrawn in the script, nothing is trained."""
    st.session_state["_tr_replay_requested"] = True


# --- live curves: a training in progress, or one replayed from its record ---------------------------------------------


class LiveCurves:
    """A progress bar and the loss and accuracy charts, redrawn as steps arrive (training or replay)."""

    def __init__(self, label: str, total: int, presenter: bool, key: str):
        self.label, self.total, self.presenter, self.key = label, total, presenter, key
        self.bar = st.progress(0.0, text=f"{label}…")
        self.slots = [column.empty() for column in st.columns(2)]
        self.count = 0

    def progress(self, step: int, loss: list[float], accuracy: list[float], note: str = "") -> None:
        text = f"{self.label} · step {step} of {self.total}"
        if loss:
            text += f" · loss {loss[-1]:.3f} · accuracy {accuracy[-1]:.2f}"
        self.bar.progress(min(step / self.total, 1.0), text=text + note)

    def draw(self, steps: list[int], loss: list[float], accuracy: list[float]) -> None:
        self.count += 1
        figs = trained_heads.curve_figures(steps, loss, accuracy, total=self.total, presenter=self.presenter)
        for slot, fig, name in zip(self.slots, figs, ("loss", "accuracy"), strict=True):
            boundary.plot(slot, fig, key=f"{self.key}_{name}_{self.count}", table=False)  # a slot holds one element


def show_job(job: training_cache.TrainingJob, presenter: bool) -> None:
    """Progress bar and live loss and accuracy curves until the job ends.

    The curves are redrawn after every ~10% of the steps or every 2 s, whichever comes first.
    """
    total = job.config.steps
    live = LiveCurves(f"Training {TASK_LABELS[job.config.task]}", total, presenter, key="live")
    drawn = {"step": 0, "time": 0.0}

    def draw(job: training_cache.TrainingJob) -> None:
        steps, loss, accuracy = job.history()
        step = steps[-1] if steps else 0
        live.progress(step, loss, accuracy, " · stopping…" if job.stopping else "")
        due = step - drawn["step"] >= total / 10 or time.monotonic() - drawn["time"] >= 2.0 or not job.running
        if steps and step > drawn["step"] and due:
            drawn.update(step=step, time=time.monotonic())
            live.draw(steps, loss, accuracy)

    training_cache.follow(job, draw)


REPLAY_FRAMES = 12  # the recorded curves grow in this many frames,
REPLAY_SECONDS = 3.0  # over about this long: slow enough to follow, short enough for a class


def replay(result, presenter: bool) -> None:
    """The recorded loss and accuracy history drawn again as it grew during training (no training)."""
    history = result.history
    live = LiveCurves(f"Replaying {TASK_LABELS[result.config.task]}", result.config.steps, presenter, key="replay")
    count = len(history.steps)
    for frame in range(1, REPLAY_FRAMES + 1):
        shown = max(1, round(count * frame / REPLAY_FRAMES))
        steps, loss, accuracy = history.steps[:shown], history.loss[:shown], history.accuracy[:shown]
        live.progress(steps[-1] if steps else 0, loss, accuracy)
        live.draw(steps, loss, accuracy)
        if frame < REPLAY_FRAMES:
            time.sleep(REPLAY_SECONDS / REPLAY_FRAMES)


# --- results ----------------------------------------------------------------------------------------------------------


def show_metrics(result, view, presenter: bool) -> None:
    """Four metrics in a row; in presenter mode one under the other, in the narrow column beside the figure."""
    config = result.config
    best_layer, best_head, best_score = trained_heads.best_marked_head(result)
    where = f"layer {best_layer}, head {best_head}" if config.num_layers > 1 else f"head {best_head}"
    columns = [st.container() for _ in range(4)] if presenter else st.columns(4)
    columns[0].metric(
        "held-out accuracy",
        f"{result.heldout_accuracy:.1%}",
        help=trained_heads.ACCURACY_HELP,
    )
    columns[1].metric(f"best head ({where})", f"{best_score:.2f}", help=trained_heads.score_name(config.task))
    columns[2].metric(  # "15 of 15 right" was cut to "15 of 15 ri…" in a quarter of the page
        "this example: right", f"{view.example_correct}/{view.example_scored}", help="scored positions predicted right"
    )
    columns[3].metric("training time", f"{result.seconds:.1f} s", help=f"{result.steps_run} steps on {config.device}")


def show_result(result, presenter: bool, side, stage) -> None:
    """The result; in presenter mode the metrics in ``side`` and the first layer's heads on ``stage`` beside them."""
    config = result.config
    view = training_cache.trained_view(result, presenter)
    with side:
        if result.stopped_early:
            st.warning(
                f"Stopped at step {result.steps_run} of {config.steps}. This partial model is kept for this "
                "session only; press Train for a full run.",
                icon=":material/stop_circle:",
            )
        show_metrics(result, view, presenter)
    for number, panel in enumerate(view.heads):
        if stage is not None and number == 0:
            with stage:
                boundary.show_figure(panel, bare=True, stage=True)
        else:
            boundary.show_figure(panel)

    st.markdown("**The held-out example: targets and predictions**")
    boundary.show_table(view.table, presenter=presenter, key="trained_table", hide_index=False)
    st.caption(
        f"Tokens of the example shown above, shape (T,) = ({config.seq_len},) · expected key: the position "
        "each scored query should attend to · target and prediction as tokens · blank: not scored."
    )

    score_column, link_column = st.columns([3, 2])
    with score_column:
        boundary.show_figure(view.scores)
    with link_column:
        show_explorer_link(result)

    loss_column, accuracy_column = st.columns(2)
    with loss_column:
        boundary.show_figure(view.curves[0])
    with accuracy_column:
        boundary.show_figure(view.curves[1])


def show_explorer_link(result) -> None:
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
    with st.container(key="trained_spec"):  # one long token, no name inside: it may break anywhere, never be cut
        st.html(f"<style>{code_css.BREAK_ANYWHERE_CSS.format(key='trained_spec')}</style>")
        st.code(spec, language=None, wrap_lines=True)


# --- the page ---------------------------------------------------------------------------------------------------------


def introduce(config, task: str) -> None:
    st.info(TASKS[task].description, icon=":material/flag:")
    st.caption(
        f"d_model {config.d_model} = {config.num_heads} heads × head_dim {config.d_model // config.num_heads} · "
        f"vocabulary {config.vocab_size} · {config.seq_len} tokens · batch {config.batch_size} · Adam, lr "
        f"{config.lr:g} with cosine decay · on **{config.device}** with seed **{config.seed}** from the sidebar."
    )


def training_buttons(job, result, presenter: bool) -> None:
    """Train (until this config is trained), Stop (while training), Replay (once there is a run to replay); in
    presenter mode one under the other."""
    finished = result is not None and not result.stopped_early
    if presenter:
        train_column, stop_column, replay_column, note_column = (st.container() for _ in range(4))
    else:
        train_column, stop_column, replay_column, note_column = st.columns(
            [1.3, 1.3, 2, 3.4], vertical_alignment="center"
        )
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
    replay_column.button(
        "Replay",
        key="tr_replay",
        icon=":material/replay:",
        on_click=_request_replay,
        disabled=job is not None or result is None,
        width="stretch",
        help="Watch the loss and accuracy curves grow again, from the recorded run (nothing is retrained).",
    )
    if finished and job is None:
        how = "trained in this session" if training_cache.trained_here(result) else "kept from an earlier run"
        note_column.caption(
            f"Trained with these settings ({result.steps_run} steps, {how}). **Replay** redraws its curves."
        )


def main() -> None:
    presenter = sidebar.presenter_toggle()
    settings = sidebar.settings_sidebar(fields=sidebar.TRAINING_FIELDS)
    st.title("Trained heads")
    if not presenter:
        st.markdown(
            "With random weights, attention is close to uniform. Here a tiny model learns a synthetic task: token "
            "and position embeddings, one or two residual layers of the project's own `MultiHeadAttention`, and a "
            "linear read-out, with no MLP and no LayerNorm, so attention does all the work. Its heads then show the "
            "pattern the task needs."
        )
    # Presenter mode: the choices fold away, so the trained heads fill the first screen.
    with st.expander("Task, heads, layers and steps") if presenter else st.container():
        params = page_controls()
        config = train_config(params, settings)
        if presenter:
            introduce(config, params.task)
    st.session_state[_SAVED] = params._asdict()
    url.show_notices()
    if not presenter:
        introduce(config, params.task)
    url.sync_url(settings, **params._asdict())

    job = training_cache.current_job()
    if st.session_state.pop("_tr_train_requested", False) and job is None:
        job = training_cache.start_job(config)  # before the buttons, so that Stop is live while it trains
    result = training_cache.result_for(config)
    side, stage = st.columns([1.3, 3.7], gap="medium") if presenter else (st.container(), None)
    with side:
        training_buttons(job, result, presenter)
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
    if st.session_state.pop("_tr_replay_requested", False):
        replay(result, presenter)
    show_result(result, presenter, side, stage)


boundary.run_page(main)
