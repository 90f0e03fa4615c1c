"""The "Trained heads" page under AppTest, and the training cache behind it.

AppTest runs in this process, so the page's ``st.cache_resource`` store is the one these tests
clear and inspect, and ``mha_core.toy.tiny_training.run`` can be wrapped to count trainings. The page is
opened on its own, as a link to it would open it. No timing assertions.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from streamlit.testing.v1 import AppTest

from explorer.glue.cached import training_runs
from explorer.glue.frame.chart import figure_of
from explorer.glue.state import trained_link
from mha_core.attention.modules import MultiHeadAttention
from mha_core.toy import tasks
from mha_core.toy import tiny_training as training

from ..apptest_helpers import chart_elements, run_page

PAGE = "pages/5_Trained_heads.py"


@pytest.fixture(autouse=True)
def _empty_caches():
    """Each test starts with no stored runs: the store is shared by every session in this process."""
    training_runs.result_store().clear()
    training_runs._explorer_input.clear()
    yield
    training_runs.result_store().clear()
    training_runs._explorer_input.clear()


@pytest.fixture
def train_calls(monkeypatch):
    """Count the trainings (and let a test make them stop early)."""
    calls: list[training.TrainConfig] = []
    real_run = training.run

    def counting_run(config, *, progress=None, should_stop=None, time_budget_s=None):
        calls.append(config)
        return real_run(config, progress=progress, should_stop=should_stop, time_budget_s=time_budget_s)

    monkeypatch.setattr(training, "run", counting_run)
    return calls


def _page(**query: str) -> AppTest:
    return run_page(PAGE, timeout=120, **query)


def _figures(at: AppTest) -> list[dict]:
    return [figure_of(chart.proto) for chart in chart_elements(at)]


def _traces(at: AppTest, role: str) -> list[dict]:
    return [trace for fig in _figures(at) for trace in fig["data"] if (trace.get("meta") or {}).get("role") == role]


def _metric(at: AppTest, label_start: str) -> str:
    (value,) = [m.value for m in at.metric if m.label.startswith(label_start)]
    return value


def _page_config(**overrides) -> training.TrainConfig:
    """The config the page trains for the default sidebar (cpu, seed 123)."""
    return training.make_config(overrides.pop("task", "previous_token"), d_model=32, seed=123, **overrides)


def test_page_opens_without_exception_and_asks_for_training():
    at = _page()
    assert not at.exception
    assert at.title[0].value == "Trained heads"
    assert any("Press **Train**" in info.value for info in at.info)
    assert any(info.value == tasks.TASKS["previous_token"].description for info in at.info)
    assert not chart_elements(at)
    assert not at.button(key="tr_train").disabled
    assert at.button(key="tr_stop").disabled
    assert {k: at.query_params[k] for k in ("task", "heads", "layers", "steps", "layer")} == {
        "task": "previous_token",
        "heads": "2",
        "layers": "1",
        "steps": "200",
        "layer": "0",
    }


def test_train_button_learns_previous_token_and_shows_each_head(train_calls):
    at = _page()
    at.button(key="tr_train").click().run()
    assert not at.exception
    assert train_calls == [_page_config()]
    heatmaps = _traces(at, "values")
    assert len(heatmaps) == 2 * 1  # heads × layers
    assert len(_traces(at, "expected")) == 2  # expected keys marked in every head
    (result,) = [training_runs.finished_result(_page_config())]
    assert result.heldout_accuracy >= 0.95
    assert float(_metric(at, "held-out accuracy").rstrip("%")) >= 95.0
    titles = [fig["layout"]["title"]["text"] for fig in _figures(at)]
    assert "Layer 0: attention weights, head by head" in titles
    assert any(title.startswith("Head scores: mean weight on the previous token") for title in titles)
    table = at.table[0].value  # HTML, every position shown; (5, T): token, expected key, target, prediction, correct
    assert list(table.index) == ["token", "expected key", "target", "prediction", "correct"]
    assert table.loc["target"].tolist()[1:] == table.loc["token"].tolist()[:-1]  # the previous token
    assert (table.loc["correct"].tolist()[1:]).count("✓") >= 14
    assert at.button(key="tr_train").disabled  # trained: the same settings give the same weights


def test_one_heatmap_per_head_and_layer_for_a_deeper_model(train_calls):
    at = _page(task="previous_token", heads="4", layers="2", steps="40")
    at.button(key="tr_train").click().run()
    assert not at.exception
    assert len(train_calls) == 1
    heads = _traces(at, "values")
    assert len(heads) == 4 * 2
    assert sorted((trace["meta"]["head"]) for trace in heads) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert len(_traces(at, "expected")) == 4 * 2
    assert at.query_params["layer"] == "1"  # the last layer by default
    at.radio(key="w_tr_layer").set_value(0).run()
    assert at.query_params["layer"] == "0"
    assert at.get("link_button")[0].proto.url.endswith(".layer0")
    assert len(train_calls) == 1


def test_revisit_with_the_same_settings_shows_the_result_without_training(train_calls):
    first = _page()
    first.button(key="tr_train").click().run()
    assert len(train_calls) == 1
    url = dict(first.query_params.items())
    again = _page(**url)  # a new session, opened from the URL
    assert not again.exception
    assert len(train_calls) == 1  # no retraining
    assert len(_traces(again, "values")) == 2
    assert not again.get("progress")
    assert again.button(key="tr_train").disabled
    other_steps = _page(**{**url, "steps": "150"})
    assert not _traces(other_steps, "values")  # another config is not served from the cache
    assert len(train_calls) == 1


def test_bad_url_params_give_notices_not_tracebacks():
    at = _page(task="nope", heads="999", layers="7", steps="lots", layer="-3")
    assert not at.exception
    notices = " ".join(w.value for w in at.warning)
    for name in ("task=", "heads=", "layers=", "steps=", "layer="):
        assert name in notices, name
    assert at.selectbox(key="w_tr_task").value == "previous_token"
    assert at.radio(key="w_tr_heads").value == 2
    assert at.radio(key="w_tr_layers").value == 2  # clamped to the nearest allowed value
    assert at.number_input(key="w_tr_steps").value == 200
    assert at.query_params["task"] == "previous_token" and at.query_params["heads"] == "2"


def test_stop_ends_training_and_keeps_the_partial_run_in_this_session_only(train_calls):
    """Train from the page; while its run follows the job, stop the job as the Stop button's callback does."""
    at = _page(task="induction", heads="8", steps="2000")
    config = _page_config(task="induction", num_heads=8, steps=2000)
    clicked = threading.Thread(target=lambda: at.button(key="tr_train").click().run())
    clicked.start()
    try:
        deadline = time.monotonic() + 60
        while "_trained_job" not in at.session_state and time.monotonic() < deadline:
            time.sleep(0.02)
        job = at.session_state["_trained_job"]
        while not job.history()[0] and job.running:  # let it log a step or two, so the curves have data
            time.sleep(0.02)
        job.stop()  # what training_runs.request_stop does for this session
    finally:
        clicked.join(120)
    assert not clicked.is_alive() and not at.exception
    assert job.result.stopped_early and job.result.steps_run < 2000
    assert any(w.value.startswith(f"Stopped at step {job.result.steps_run} of 2000") for w in at.warning)
    assert len(_traces(at, "values")) == 8 * 2
    assert training_runs.finished_result(config) is None  # never stored for other sessions
    assert not at.get("link_button")  # a stopped run is not offered to the explorer
    assert not at.button(key="tr_train").disabled and at.button(key="tr_stop").disabled
    assert len(_traces(at.run(), "values")) == 16  # still shown in this session
    assert not _traces(_page(task="induction", heads="8", steps="2000"), "values")  # but not in another one
    assert train_calls == [config]


def test_stop_button_callback_stops_this_sessions_job():
    config = training.make_config("induction", num_heads=8, steps=2000)
    job = training_runs.TrainingJob(config, training_runs.ResultStore())
    at = AppTest.from_function(_press_stop, default_timeout=30)
    at.session_state["_trained_job"] = job
    at.run()
    assert not at.exception
    assert job.stopping


def _press_stop():
    from explorer.glue.cached import training_runs

    training_runs.request_stop()


def test_explorer_link_carries_a_spec_that_gives_the_trained_layer(train_calls):
    at = _page()
    at.button(key="tr_train").click().run()
    (link,) = at.get("link_button")  # run on its own, the page links by URL; under `streamlit run`, st.page_link
    assert link.proto.url.startswith("./?trained=")
    spec = link.proto.url.removeprefix("./?trained=")
    config, layer = trained_link.parse_trained_spec(spec)
    assert (config, layer) == (_page_config(), 0)
    module, x, labels = training_runs.trained_explorer_input(spec)
    assert len(train_calls) == 1  # served from the page's run
    assert isinstance(module, MultiHeadAttention)
    assert x.shape == (1, 16, 32) and len(labels) == 16
    stored = training_runs.finished_result(config)
    assert torch.equal(module.W_query.weight, stored.state_dict["layers.0.W_query.weight"])
    assert training_runs.trained_explorer_input(spec).module is module  # cached, shared: never mutated
    with pytest.raises(ValueError, match="unknown task"):
        training_runs.trained_explorer_input(spec.replace("previous_token", "nope"))


def test_trained_explorer_input_trains_when_nothing_is_stored(train_calls):
    spec = trained_link.format_trained_spec(training.make_config("first_token", steps=20), 0)
    module, x, _ = training_runs.trained_explorer_input(spec)
    assert len(train_calls) == 1 and x.shape == (1, 16, 32)
    assert training_runs.finished_result(training.make_config("first_token", steps=20)) is not None


def test_result_store_keeps_finished_runs_only_and_evicts_the_oldest():
    store = training_runs.ResultStore(max_entries=2)
    results = [training.train("previous_token", steps=s) for s in (3, 4, 5)]
    for result in results:
        store.put(result)
    assert len(store) == 2 and store.get(results[0].config) is None
    assert store.get(results[2].config) is results[2]
    stopped = training.train("previous_token", steps=50, should_stop=lambda: True)
    with pytest.raises(ValueError, match="stopped early"):
        store.put(stopped)


def test_a_failing_run_is_reported_on_the_page(monkeypatch):
    def failing_run(config, *, progress=None, should_stop=None, time_budget_s=None):
        raise RuntimeError("out of memory, say")

    monkeypatch.setattr(training, "run", failing_run)
    at = _page(presenter="true")
    at.button(key="tr_train").click().run()
    assert not at.exception
    assert [e.value for e in at.error] == ["Training failed: RuntimeError: out of memory, say"]
    assert "_trained_job" not in at.session_state
    assert not at.button(key="tr_train").disabled  # free to try again
