"""Issue 10's repros, one test each: links a stranger can craft, and what they must not be able to do.

Each of these failed before the fix: a page locked by ``?step=--1``, a slider raising on a one-key range, a
trained link training for most of an hour or tracing 512 × 16 × 64² weights. The admission gate's repros are in
test_gated_jobs.py.
"""

from __future__ import annotations

import time

import pytest
import torch
from streamlit.testing.v1 import AppTest

from explorer.glue.cached import real_models, training_runs
from explorer.glue.memory import admission
from explorer.glue.state import settings as cfg
from explorer.glue.state import trained_link
from mha_core.gpt import training as gpt_training
from mha_core.toy import tasks, tiny_model, tiny_training

from ..apptest_helpers import chart_elements, check_page, open_page

BIG_EVAL_LINK = "previous_token.heads16.layers2.d16.vocab2.len64.steps1.batch1.lr1e-2.seed1.cpu.layer0"
LONG_TRAIN_LINK = "previous_token.heads16.layers1.d128.vocab256.len64.steps2000.batch256.lr1e-2.seed0.cpu.layer0"


# --- one strict parser ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["--1", "++2", "-+3", "٣", "1²", "１", "0x10", "1_000", "4.0", "", "0" * 13])
def test_one_strict_integer_parser_rejects_what_is_not_ascii_digits(raw):
    value, message = cfg.parse_int("step", raw, 1, 1, 12)
    assert value == 1 and message == f"step={cfg.quote(raw)} is not a whole number; using 1."


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("+4", 4), (" 7 ", 7), ("-1", 1), ("99", 12), ("012", 12), ("9" * 13, 12), ("-" + "9" * 40, 1), (str(2**62), 12)],
)
def test_the_strict_parser_clamps_numbers(raw, expected):
    """A number longer than any range is still a number: clamped and said (a seed of 2⁶² was "not a whole number")."""
    value, message = cfg.parse_int("step", raw, 1, 1, 12)
    assert value == expected
    assert (message is None) == (1 <= int(raw) <= 12)
    assert message is None or f"is outside 1–12; using {expected}." in message


def test_url_int_is_the_settings_parser(monkeypatch):
    """url.url_int has no parser of its own: the settings' parser answers for it."""
    seen = []
    real = cfg.parse_int
    monkeypatch.setattr(cfg, "parse_int", lambda *args: seen.append(args) or real(*args))
    at = open_page("pages/1_Step_through.py", {"step": "--1"})
    assert ("step", "--1", 1, 1, 12) in seen
    check_page(at, ["--1"], "Step_through?step=--1")


def test_step_double_minus_does_not_lock_the_page():
    at = open_page("pages/1_Step_through.py", {"step": "--1"})
    check_page(at, ["--1"], "Step_through?step=--1")
    assert "step=`--1` is not a whole number; using 1." in [w.value for w in at.warning]
    assert at.session_state.step_number == 1
    at.slider(key="step_number").set_value(5).run()  # the page answers its widgets again
    check_page(at, [], "after moving the step slider")
    assert at.session_state.step_number == 5


# --- widgets never raise ----------------------------------------------------------------------------------------


def test_sliding_window_with_one_key_draws_no_impossible_slider():
    at = open_page("pages/3_Masks_and_cross_attention.py", {"mask": "sliding window", "src_len": "1"})
    check_page(at, [], "Masks?mask=sliding window&src_len=1")
    assert "masks_window" not in [s.key for s in at.slider]
    assert any("the only value these settings allow" in c.value for c in at.caption)


def test_sliding_window_reached_by_the_widgets_with_one_key():
    at = open_page("pages/3_Masks_and_cross_attention.py", {"mask": "sliding window"})
    at.slider(key="masks_src").set_value(1).run()
    check_page(at, [], "src_len slider moved to 1")
    at.slider(key="masks_src").set_value(5).run()
    check_page(at, [], "src_len slider back to 5")
    assert at.slider(key="masks_window").max == 5


# --- the page boundary ------------------------------------------------------------------------------------------


def _boundary_script(kind: str) -> None:
    import streamlit as st
    from streamlit.errors import StreamlitAPIException

    from explorer.glue.frame import boundary

    def body() -> None:
        st.title("body")
        if kind == "api":
            raise StreamlitAPIException("a widget was given an impossible range")
        if kind == "stop":
            st.stop()
        if kind == "rerun" and not st.session_state.get("rerun_done"):
            st.session_state.rerun_done = True
            st.rerun()
        st.markdown("finished")

    boundary.run_page(body)


@pytest.mark.parametrize("kind", ["api", "stop", "rerun"])
def test_run_page_catches_streamlit_errors_but_not_its_control_flow(kind):
    at = AppTest.from_function(_boundary_script, args=(kind,), default_timeout=60).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    if kind == "api":
        assert errors == [
            "Something went wrong (StreamlitAPIException). Try smaller settings or reload the page; "
            "the error was logged."
        ]
    else:
        assert not errors  # st.stop and st.rerun did their job, unseen
        assert ("finished" in [m.value for m in at.markdown]) == (kind == "rerun")


# --- trained links ----------------------------------------------------------------------------------------------


def test_a_trained_link_is_clamped_to_what_the_page_offers_with_a_notice():
    s, notices = cfg.parse_query({"trained": LONG_TRAIN_LINK})
    config, layer = trained_link.parse_trained_spec(s.trained)
    defaults = tasks.TASKS["previous_token"].defaults
    assert (config.num_heads, config.d_model) == (max(cfg.TRAIN_HEAD_CHOICES), cfg.TRAIN_D_MODEL)
    assert (config.vocab_size, config.seq_len, config.batch_size) == (
        defaults.vocab_size,
        defaults.seq_len,
        defaults.batch_size,
    )
    assert config.steps == cfg.TRAIN_MAX_STEPS and layer == 0
    assert any("not one the Trained heads page trains" in n and "batch_size 256 → 64" in n for n in notices)
    assert s.num_tokens == defaults.seq_len and s.d_out == cfg.TRAIN_D_MODEL  # the explorer follows the clamp


def test_a_page_made_link_is_left_as_it_is():
    page_config = tiny_training.make_config("induction", num_heads=4, d_model=cfg.TRAIN_D_MODEL, steps=300, seed=9)
    spec = trained_link.format_trained_spec(page_config, 1)
    s, notices = cfg.parse_query({"trained": spec})
    assert s.trained == spec and not [n for n in notices if "not one the Trained heads page trains" in n]


def test_a_trained_link_costs_no_more_than_the_page(monkeypatch, fresh_caches):
    """The held-out evaluation runs in chunks; the link trains the clamped config, through the gate."""
    batches, configs = [], []
    real_weights, real_run = tiny_model.TinyAttentionModel.attention_weights, tiny_training.run

    def watched_weights(self, tokens):
        batches.append(tokens.shape[0])
        return real_weights(self, tokens)

    def watched_run(config, **kwargs):
        configs.append((config, kwargs.get("time_budget_s")))
        return real_run(config, **kwargs)

    monkeypatch.setattr(tiny_model.TinyAttentionModel, "attention_weights", watched_weights)
    monkeypatch.setattr(tiny_training, "run", watched_run)
    training_runs.result_store().clear()
    admitted = admission.GATE.admitted
    at = open_page("app.py", {"trained": BIG_EVAL_LINK})
    check_page(at, [], f"?trained={BIG_EVAL_LINK}")
    ((config, budget),) = configs
    assert config.num_heads == 8 and config.seq_len == 16 and config.batch_size == 64 and config.steps == 10
    assert budget == admission.TRAIN_TIME_BUDGET_S
    assert batches and max(batches) <= tiny_training.HELDOUT_CHUNK
    assert admission.GATE.admitted == admitted + 1
    assert any("not one the Trained heads page trains" in w.value for w in at.warning)


def test_chunked_evaluation_equals_one_batch():
    result = tiny_training.train("first_token", steps=30, seed=3)
    model = tiny_training.load_model(result)
    heldout = result.task.batch(torch.Generator().manual_seed(7), 200, 16, 16)
    accuracy, scores = tiny_training._evaluate(model, result.task, heldout, 16)
    with torch.no_grad():
        _, whole = tiny_training._scored_loss_and_accuracy(model(heldout.tokens), heldout)
    weights = model.attention_weights(heldout.tokens)
    assert accuracy == pytest.approx(float(whole), abs=1e-6)  # float32 means, summed in another order
    assert scores[0] == pytest.approx(result.task.pattern_score(weights[0], heldout.tokens), abs=1e-6)


def test_training_stops_at_its_time_budget():
    config = tiny_training.make_config("previous_token", steps=2000, seed=5)
    begin = time.monotonic()
    result = tiny_training.run(config, time_budget_s=0.3)
    assert result.stopped_early and result.steps_run < config.steps
    assert time.monotonic() - begin < 10


# --- the Attention variants page's own values (issue 33) ---------------------------------------------------------

VARIANTS_PAGE = "pages/9_Attention_variants.py"
HOSTILE_VARIANTS = [  # (query, what a notice says)
    ({"num_heads": "4", "d_out": "16", "kv_groups": "3"}, "kv_groups=3 does not divide num_heads=4; using 2."),
    ({"kv_groups": "<script>alert(1)</script>"}, "kv_groups=`<script>alert(1)</script>` is not a whole number"),
    ({"latent": "1e309"}, "latent=`1e309` is not a whole number"),
    ({"window": "-3", "context_length": "9", "num_tokens": "9"}, "window=`-3` is outside 1–9; using 1."),
    ({"section": "decode", "step": "99"}, "step=`99` is outside 0–48; using 48."),
    ({"section": "decode", "source": "<img src=x>"}, "is not one of gpt, variant"),
    ({"section": "bytes", "config": "ZZPWN"}, "is not one of"),
]


@pytest.mark.parametrize(("query", "said"), HOSTILE_VARIANTS, ids=lambda v: str(v)[:40])
def test_hostile_variant_links_are_clamped_with_a_notice(query, said):
    at = open_page(VARIANTS_PAGE, query)
    check_page(at, [str(v) for v in query.values()], f"{VARIANTS_PAGE}?{query}")
    assert chart_elements(at), f"{query}: no chart"
    assert any(said in alert.value for alert in at.warning), [alert.value for alert in at.warning]


# --- real-model links (?model=&layer=&head=&text=) -------------------------------------------------------------

REAL_LINK_PAGES = ("app.py", "pages/7_Follow_a_token.py", "pages/8_Real_heads.py")
# A bad ?layer= is every page's news: Real heads opens its "Open any head" box on the link's layer.head (it ignored
# ``/Real_heads?model=own&layer=5&head=77`` without a word).
HOSTILE_REAL = [  # (query, what the notice says, the pages that say it)
    ({"model": "<script>alert(1)</script>", "layer": "0"}, "is not one of own, gpt2; using own", REAL_LINK_PAGES),
    ({"model": "own", "layer": "-1"}, "layer=`-1` is outside", REAL_LINK_PAGES),
    ({"model": "own", "layer": "99"}, "does not exist in the shipped model", REAL_LINK_PAGES),
    ({"model": "own", "layer": "1e309"}, "is not a whole number", REAL_LINK_PAGES),
    ({"model": "own", "text": ""}, "has no tokens; using the book's sentence", REAL_LINK_PAGES),
    ({"model": "own", "text": "word " * 400}, "tokens long", REAL_LINK_PAGES),
    ({"model": "gpt2", "layer": "3"}, "GPT-2 needs about", REAL_LINK_PAGES),
]


@pytest.mark.parametrize(("query", "said", "pages"), HOSTILE_REAL, ids=lambda v: str(v)[:40])
@pytest.mark.parametrize("page", REAL_LINK_PAGES)
def test_hostile_real_model_links_are_clamped_with_a_notice(page, query, said, pages, tmp_path, monkeypatch):
    monkeypatch.setenv("MHA_GPT2_DIR", str(tmp_path))
    at = open_page(page, query | {"head": "<b>9</b>"})
    check_page(at, [str(v) for v in query.values()], f"{page}?{query}")
    assert chart_elements(at), f"{page}?{query}: no chart"
    shown = " ".join(alert.value for alert in [*at.warning, *at.info])
    assert (said in shown) == (page in pages), f"{page}?{query}: {shown[:500]}"
    settings = at.session_state.settings
    assert settings.model in ("own", "") and settings.layer >= 0 and settings.num_tokens <= real_models.TOKEN_CAP["own"]


def test_real_heads_says_what_it_changed_in_a_head_link():
    at = open_page("pages/8_Real_heads.py", {"model": "own", "layer": "5", "head": "77"})
    check_page(at, [], "Real heads?layer=5&head=77")
    warnings = [w.value for w in at.warning]
    last = gpt_training.load_record()["config"]["n_layers"] - 1
    assert f"layer=5 does not exist in the shipped model (layers 0–{last}); using {last}." in warnings, warnings
    assert "head=`77` is outside 0–3; using 3." in warnings, warnings
    assert at.selectbox(key="w_rh_head").value == f"L{last} H3"  # the link's head, clamped, is the one offered to open


def test_a_real_model_link_survives_its_rerun_and_a_page_switch():
    at = open_page("app.py", {"model": "own", "layer": "1", "head": "2", "text": "Your journey starts"})
    at.run()
    check_page(at, [], "rerun")
    before = at.session_state.settings
    at.switch_page("pages/5_Trained_heads.py").run()  # its own ?layer= must not move the real model's layer
    at.run()
    at.switch_page("app.py").run()
    check_page(at, [], "back on the explorer")
    assert at.session_state.settings == before
