"""Trained heads replays the training a teacher just ran: the recorded curves grow again, nothing is retrained."""

from __future__ import annotations

import pytest

from explorer.glue.cached import training_runs
from explorer.glue.frame.chart import figure_of, key_of
from mha_core.toy import tiny_training

from ..apptest_helpers import chart_elements, run_page

PAGE = "pages/5_Trained_heads.py"


@pytest.fixture(autouse=True)
def _empty_store():
    training_runs.result_store().clear()
    yield
    training_runs.result_store().clear()


@pytest.fixture
def train_calls(monkeypatch):
    calls = []
    real_run = tiny_training.run

    def counting_run(config, **kwargs):
        calls.append(config)
        return real_run(config, **kwargs)

    monkeypatch.setattr(tiny_training, "run", counting_run)
    return calls


def _replay_charts(at) -> dict[str, list[dict]]:
    """The replay's charts, by name (loss, accuracy), in the order drawn."""
    found: dict[str, list[dict]] = {"loss": [], "accuracy": []}
    for element in chart_elements(at):
        key = key_of(element.proto)
        if key.startswith("replay_"):
            found[key.split("_")[1]].append(figure_of(element.proto))
    return found


def test_replay_redraws_the_recorded_curves_without_training(train_calls):
    at = run_page(PAGE, steps="60")
    assert at.button(key="tr_replay").disabled  # nothing to replay yet
    at.button(key="tr_train").click().run()
    assert not at.exception and len(train_calls) == 1
    assert "trained in this session" in " ".join(c.value for c in at.caption)
    assert "shown from the cache" not in " ".join(c.value for c in at.caption)
    assert not at.button(key="tr_replay").disabled
    at.button(key="tr_replay").click().run()
    assert not at.exception
    assert len(train_calls) == 1  # replayed from the record: no training
    drawn = _replay_charts(at)
    assert drawn["loss"] and drawn["accuracy"]
    config = tiny_training.make_config("previous_token", d_model=32, seed=123, steps=60)
    history = training_runs.finished_result(config).history
    (loss_trace,) = drawn["loss"][-1]["data"]
    (accuracy_trace,) = drawn["accuracy"][-1]["data"]
    assert _values(loss_trace["y"]) == pytest.approx(history.loss)  # the whole recorded run, at the end
    assert _values(accuracy_trace["y"]) == pytest.approx(history.accuracy)
    assert _values(loss_trace["x"]) == pytest.approx(history.steps)
    assert at.metric  # and the result is shown again below the replay


def _values(array) -> list[float]:
    from explorer.views.figures import decode_array

    return [float(v) for v in decode_array(array)] if isinstance(array, dict) else [float(v) for v in array]
