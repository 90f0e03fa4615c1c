"""Training the tiny model on the synthetic tasks: it learns, its heads show the pattern, runs are reproducible.

Each task is trained once at its default budget (module-scoped fixture, a few seconds in all).
Thresholds sit below what seeds 0-7 reach (held-out accuracy >= 0.999 on every task; best
head: previous_token >= 0.97, first_token >= 0.99, key_value_lookup >= 0.68 because the two
heads split the keys between them, induction's layer-2 head >= 0.90). No timing assertions.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from mha_core.attention.modules import MultiHeadAttention, trace_forward
from mha_core.toy.tasks import NOT_SCORED, TASKS
from mha_core.toy.tiny_model import TinyAttentionModel
from mha_core.toy.tiny_training import explorer_module, load_model, make_config, train

# task -> (minimum held-out accuracy, minimum best-head pattern score, layer that must hold that head)
THRESHOLDS = {
    "previous_token": (0.95, 0.8, 0),
    "first_token": (0.95, 0.9, 0),
    "key_value_lookup": (0.95, 0.6, 0),
    "induction": (0.95, 0.8, 1),
}


@pytest.fixture(scope="module")
def trained():
    """Every task trained once at its default budget, seed 0."""
    return {name: train(name, seed=0) for name in TASKS}


def test_thresholds_cover_every_task():
    assert set(THRESHOLDS) == set(TASKS)


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_default_budget_learns_the_task(trained, name):
    result = trained[name]
    min_accuracy, _, _ = THRESHOLDS[name]
    assert result.steps_run == TASKS[name].defaults.steps
    assert not result.stopped_early
    assert result.heldout_accuracy >= min_accuracy, f"{name}: held-out accuracy {result.heldout_accuracy:.3f}"


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_some_head_follows_the_expected_pattern(trained, name):
    result = trained[name]
    _, min_score, layer = THRESHOLDS[name]
    assert result.head_scores.shape == (result.config.num_layers, result.config.num_heads)
    best = float(result.head_scores[layer].max())
    assert best >= min_score, f"{name}: best head in layer {layer} scores {result.head_scores.round(3).tolist()}"


def test_previous_token_head_puts_most_weight_on_the_previous_token(trained):
    """Check the claim directly on the traced weights, without pattern_score."""
    result = trained["previous_token"]
    tokens = TASKS["previous_token"].batch(torch.Generator().manual_seed(123), 64, 16, 16).tokens  # (b, T)
    (weights,) = load_model(result).attention_weights(tokens)  # (b, h, T, T)
    on_previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (b, h, T-1): query t, key t-1
    assert on_previous.mean(dim=(0, 2)).max() >= 0.8


def test_attention_weights_are_causal_softmax_rows(trained):
    result = trained["induction"]
    tokens = torch.as_tensor(result.example_tokens)[None]  # (1, T)
    weights = load_model(result).attention_weights(tokens)
    assert len(weights) == 2
    for layer_weights in weights:
        assert layer_weights.shape == (1, 2, 16, 16)
        torch.testing.assert_close(layer_weights.sum(-1), torch.ones(1, 2, 16))
        assert torch.all(layer_weights.triu(diagonal=1) == 0)


def test_explorer_module_is_the_trained_layer_on_its_real_input(trained):
    result = trained["induction"]
    inspection = result.inspect()
    for layer in range(2):
        module, x, labels = explorer_module(result, layer=layer)
        assert isinstance(module, MultiHeadAttention)
        assert x.shape == (1, 16, 32)
        assert labels == inspection.labels
        traced = trace_forward(module, x)
        np.testing.assert_array_equal(traced.steps["attn_weights"][0].numpy(), inspection.weights[layer])
        assert torch.equal(module.W_query.weight, result.state_dict[f"layers.{layer}.W_query.weight"])
    # layer 1's input is layer 0's input plus layer 0's output: the residual stream
    module0, x0, _ = explorer_module(result, layer=0)
    _, x1, _ = explorer_module(result, layer=1)
    torch.testing.assert_close(x1, x0 + trace_forward(module0, x0).output)


def test_inspect_reports_predictions_and_targets(trained):
    result = trained["key_value_lookup"]
    inspection = result.inspect()
    scored = inspection.scored
    assert scored.sum() == 6  # 12 tokens: 6 pairs, then 6 queries
    assert inspection.labels[0].count("=") == 1 and inspection.labels[-1].endswith("?")
    np.testing.assert_array_equal(inspection.predictions[scored], inspection.targets[scored])
    assert np.all(inspection.attend_to[scored] < 6)  # every query looks back into the pairs
    assert inspection.scores.shape == (1, 2)


def test_result_pickles_and_config_is_a_cache_key(trained):
    result = trained["previous_token"]
    restored = pickle.loads(pickle.dumps(result))
    assert restored.config == result.config
    assert hash(restored.config) == hash(make_config("previous_token"))
    for name, tensor in result.state_dict.items():
        assert tensor.device.type == "cpu"
        assert torch.equal(restored.state_dict[name], tensor)


def _short_run(seed, **kwargs):
    return train("previous_token", steps=30, seed=seed, **kwargs)


def test_same_seed_same_run_and_global_state_untouched():
    torch.manual_seed(7)
    rng_before = torch.get_rng_state()
    threads_before = torch.get_num_threads()
    first, second = _short_run(seed=3), _short_run(seed=3)
    assert torch.equal(torch.get_rng_state(), rng_before)
    assert torch.get_num_threads() == threads_before
    assert first.history == second.history
    assert first.state_dict.keys() == second.state_dict.keys()
    for name in first.state_dict:
        assert torch.equal(first.state_dict[name], second.state_dict[name]), name
    np.testing.assert_array_equal(first.example_tokens, second.example_tokens)


def test_different_seeds_differ():
    first, second = _short_run(seed=0), _short_run(seed=1)
    assert first.history.loss != second.history.loss
    assert not torch.equal(first.state_dict["readout.weight"], second.state_dict["readout.weight"])


def test_progress_is_called_with_step_total_loss_accuracy():
    calls = []
    result = _short_run(seed=0, progress=lambda *args: calls.append(args))
    assert len(calls) >= 3
    steps = [call[0] for call in calls]
    assert steps == sorted(steps) and steps[-1] == 30
    assert all(call[1] == 30 for call in calls)
    assert all(np.isfinite(call[2]) and 0.0 <= call[3] <= 1.0 for call in calls)
    assert steps == result.history.steps


def test_should_stop_ends_training_early():
    polls = []

    def should_stop():
        polls.append(1)
        return len(polls) > 5  # allow five steps

    result = _short_run(seed=0, should_stop=should_stop)
    assert result.stopped_early
    assert result.steps_run == 5
    assert all(step <= 5 for step in result.history.steps)
    assert 0.0 <= result.heldout_accuracy <= 1.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"task_name": "no_such_task"}, "no_such_task"),
        ({"task_name": "previous_token", "num_layers": 3}, "num_layers must be 1 or 2, got 3"),
        ({"task_name": "previous_token", "num_layers": 0}, "got 0"),
        ({"task_name": "previous_token", "steps": 0}, "steps must be an integer >= 1, got 0"),
        ({"task_name": "previous_token", "d_model": 30, "num_heads": 4}, "d_model=30 .* num_heads=4"),
        ({"task_name": "previous_token", "batch_size": 0}, "batch_size"),
        ({"task_name": "previous_token", "lr": 0.0}, "lr"),
        ({"task_name": "key_value_lookup", "vocab_size": 20}, "vocab_size=20"),
        ({"task_name": "induction", "vocab_size": 8}, "vocab_size=8"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_numbers(kwargs, message):
    kwargs = dict(kwargs)  # parametrize shares the dict between runs
    task_name = kwargs.pop("task_name")
    with pytest.raises(ValueError, match=message):
        train(task_name, **kwargs)


def test_explorer_module_rejects_a_missing_layer(trained):
    with pytest.raises(ValueError, match=r"layer must be in \[0, 1\), got 1"):
        explorer_module(trained["previous_token"], layer=1)


# --- the tasks themselves ------------------------------------------------------------------


def _batch(name, batch_size=32, seq_len=None, vocab_size=None, seed=0):
    task = TASKS[name]
    seq_len = seq_len or task.defaults.seq_len
    vocab_size = vocab_size or task.defaults.vocab_size
    return task.batch(torch.Generator().manual_seed(seed), batch_size, seq_len, vocab_size)


def test_previous_and_first_token_targets():
    batch = _batch("previous_token")
    assert not batch.scored[:, 0].any() and batch.scored[:, 1:].all()
    assert torch.equal(batch.targets[:, 1:], batch.tokens[:, :-1])
    batch = _batch("first_token")
    assert torch.equal(batch.targets[:, 1:], batch.tokens[:, :1].expand(-1, 15))
    assert torch.all(batch.attend_to[:, 1:] == 0)


def test_lookup_queries_find_their_pair():
    vocab_size = TASKS["key_value_lookup"].defaults.vocab_size
    batch = _batch("key_value_lookup")
    task = TASKS["key_value_lookup"]
    for row in range(4):
        labels = [task.label(int(token), vocab_size) for token in batch.tokens[row]]
        for t in range(6, 12):
            pair = labels[int(batch.attend_to[row, t])]
            assert pair[0] + "?" == labels[t]
            assert task.label(int(batch.targets[row, t]), vocab_size) == pair.split("=")[1]
        assert len({label[0] for label in labels[:6]}) == 6  # distinct keys
        assert len({label[0] for label in labels[6:]}) == 6  # distinct questions


def test_induction_targets_are_the_next_token_of_the_repeat():
    batch = _batch("induction", batch_size=64)
    tokens, targets, scored = batch.tokens, batch.targets, batch.scored
    lengths = scored.sum(dim=1)  # (b,): the repeated segment's length
    assert lengths.min() >= 4 and lengths.max() <= 8 and len(set(lengths.tolist())) > 1
    inside = scored[:, :-1]  # (b, T-1): scored positions whose next token exists
    assert torch.equal(targets[:, :-1][inside], tokens[:, 1:][inside])
    for row in range(8):
        first_copy = tokens[row, : 16 - int(lengths[row])]
        assert len(set(first_copy.tolist())) == len(first_copy)  # one earlier occurrence only


def test_pattern_score_on_hand_made_weights():
    tokens = torch.arange(6)  # (T,)
    on_previous = torch.zeros(6, 6)
    on_previous[0, 0] = 1.0
    on_previous[torch.arange(1, 6), torch.arange(5)] = 1.0  # (T, T): every query on key t-1
    uniform = torch.ones(6, 6).tril() / torch.arange(1, 7)[:, None]  # (T, T): causal uniform rows
    weights = torch.stack([on_previous, uniform])  # (h=2, T, T)
    scores = TASKS["previous_token"].pattern_score(weights, tokens)
    expected_uniform = np.mean([1 / (t + 1) for t in range(1, 6)])
    np.testing.assert_allclose(scores, [1.0, expected_uniform], rtol=1e-6)
    first_scores = TASKS["first_token"].pattern_score(weights.numpy(), tokens.numpy())  # arrays work too
    np.testing.assert_allclose(first_scores, [1 / 5, expected_uniform], rtol=1e-6)  # only query 1 has key 0 at t-1


def test_not_scored_marker_matches_scored_mask():
    batch = _batch("induction")
    assert torch.equal(batch.scored, batch.attend_to != NOT_SCORED)


def test_model_forward_shape():
    model = TinyAttentionModel(vocab_size=10, context_length=8, d_model=16, num_heads=4, num_layers=2)
    tokens = torch.randint(10, (3, 8), generator=torch.Generator().manual_seed(0))
    assert model(tokens).shape == (3, 8, 10)
    assert [w.shape for w in model.attention_weights(tokens)] == [(3, 4, 8, 8)] * 2


def test_the_server_sets_torchs_threads_once_and_training_leaves_them():
    """Thread pools are the process's: explorer.glue.frame.server_setup sets them at start-up; no run changes them."""
    from explorer.glue.frame import server_setup

    server_setup.configure_torch()  # the process's first call sets them; under xdist an earlier file may have made it
    torch.set_num_threads(7)  # so: what a later call does, from a count no setting would choose
    server_setup.configure_torch()
    assert torch.get_num_threads() == 7, "a second call changed the threads"
    torch.set_num_threads(server_setup.INTRA_OP_THREADS)
    assert server_setup.INTRA_OP_THREADS == 1
    torch.set_num_threads(2)  # as a notebook might
    server_setup.configure_torch()  # a second call (another page's import) changes nothing
    assert torch.get_num_threads() == 2
    _short_run(seed=5)
    assert torch.get_num_threads() == 2
    torch.set_num_threads(server_setup.INTRA_OP_THREADS)
