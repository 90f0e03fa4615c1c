"""Hostile input on every page, part 3 of 3: forged widget values, what a hand-made rerun message can send (a choice
a selectbox or radio does not offer, a number outside a widget's range). Each is answered with a notice and a value
in range, and the page keeps apptest_helpers.check_page's promises.
"""

from __future__ import annotations

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from streamlit.testing.v1 import AppTest

from explorer.glue.cached import real_circuits
from explorer.glue.frame.server_setup import MISTYPED_NOTICE
from explorer.glue.state import settings as cfg

from ..apptest_helpers import PAGES, ROOT, check_page, open_page
from . import fuzz_inputs as forge

# --- 4. forged widget values: what a hand-made rerun message can send -----------------------------------------------

FORGED_CHOICES = ("zzz", "../../etc/passwd")
CHOICE_KINDS = forge.CHOICE_KINDS


def _forge_string(widget, text: str) -> None:
    """Send ``text`` as the widget's value, as a hand-made rerun message would (string_value, any text)."""

    def forged_state(self) -> WidgetState:
        state = WidgetState()
        state.id = self.id
        state.string_value = text
        return state

    forged_class = type(f"Forged{type(widget).__name__}", (type(widget),), {"_widget_state": property(forged_state)})
    widget.__class__ = forged_class


def _name(key: str) -> str:
    return key.removeprefix("w_")


@pytest.mark.parametrize("forged", FORGED_CHOICES)
@pytest.mark.parametrize("page", PAGES)
def test_a_forged_choice_gets_the_default_and_a_notice(page, forged):
    """Every selectbox and radio of every page sent a string it does not offer (a KeyError in the settings check, or
    "invalid literal for int()" under Follow a token's token picker, before): each is answered with a notice."""
    at = open_page(page, {"model": "own"} if "Real_heads" in page else {})
    check_page(at, [], page)
    choices = [w for kind in CHOICE_KINDS for w in getattr(at, kind) if w.key]
    assert choices, f"{page} has no keyed selectbox or radio"  # the sidebar's device and dtype at least
    for widget in choices:
        _forge_string(widget, forged)
    at.run()
    check_page(at, [forged], f"{page} with {forged!r} in {[w.key for w in choices]}")
    warnings = " ".join(w.value for w in at.warning)
    for widget in choices:
        assert f"{_name(widget.key)}={cfg.quote(forged)} is not one of" in warnings, (widget.key, warnings[:600])


# Numbers a hand-made message can send, and what the strict parser makes of them (Streamlit put them back to the
# widget's first value without a word: seed 2⁶² became 0, d_in 1e12 became 1, steps 1e9 became 10).
FORGED_NUMBERS = [
    ("app.py", "number_input", "w_seed", 2**62, f"seed=`{2**62}` is outside 0–{cfg.MAX_SEED}; using {cfg.MAX_SEED}."),
    ("app.py", "number_input", "w_d_in", 10**12, f"d_in=`{10**12}` is outside 1–{cfg.MAX_D_IN}; using {cfg.MAX_D_IN}."),
    ("app.py", "number_input", "w_seed", -5, f"seed=`-5` is outside 0–{cfg.MAX_SEED}; using 0."),
    ("app.py", "slider", "w_num_tokens", 10**6, f"num_tokens=`{10**6}` is outside 1–{cfg.MAX_TOKENS}; using"),
    ("app.py", "slider", "w_num_heads", float("nan"), "num_heads=`nan` is not a whole number; using"),
    ("pages/5_Trained_heads.py", "number_input", "w_tr_steps", 10**9, "tr_steps=`1000000000` is outside 10–2000"),
    ("pages/7_Follow_a_token.py", "number_input", "follow_batch", 10**9, "follow_batch=`1000000000` is outside 0–1"),
]


@pytest.mark.parametrize(("page", "kind", "key", "value", "notice"), FORGED_NUMBERS)
def test_a_forged_number_is_clamped_and_the_notice_says_so(page, kind, key, value, notice):
    at = open_page(page, {})
    widget = getattr(at, kind)(key=key)
    widget.set_value(value)
    at.run()
    check_page(at, [], f"{page} {key}={value}")
    warnings = [w.value for w in at.warning]
    assert any(notice in w for w in warnings), warnings
    low, high = (widget.proto.min, widget.proto.max)
    assert low <= getattr(at, kind)(key=key).value <= high


# --- 5. forged first messages: values a new tab sends before it ever drew the widget --------------------------------


def _query(page: str) -> dict:
    return {"model": "own"} if "Real_heads" in page else {}


def _forged_first_states(at: AppTest, number: float) -> tuple[WidgetStates, dict[str, str]]:
    """A first message forging every keyed widget ``at`` drew (ids are the same in every session): widget id ->
    the words its notice must hold."""
    states, said = WidgetStates(), {}

    def add(widget, field: str, value) -> None:
        state = states.widgets.add()
        state.id = widget.id
        if field.endswith("array_value"):
            getattr(state, field).data.extend(value)
        else:
            setattr(state, field, value)

    for widget in (w for kind in forge.NUMBER_KINDS for w in getattr(at, kind) if w.key):
        add(widget, "double_value", number)
        said[widget.id] = f"{_name(widget.key)}="
    for widget in (w for kind in forge.NUMBER_ARRAY_KINDS for w in getattr(at, kind) if w.key):
        add(widget, "double_array_value", [number] * len(widget.proto.default or [0]))
        said[widget.id] = f"{_name(widget.key)}="
    for widget in (w for kind in forge.CHOICE_KINDS for w in getattr(at, kind) if w.key):
        add(widget, "string_value", forge.FORGED_FIRST_CHOICE)
        said[widget.id] = f"{_name(widget.key)}={cfg.quote(forge.FORGED_FIRST_CHOICE)} is not one of"
    for widget in (w for kind in forge.CHOICE_ARRAY_KINDS for w in getattr(at, kind) if w.key):
        add(widget, "string_array_value", [forge.FORGED_FIRST_CHOICE])
        said[widget.id] = f"{_name(widget.key)}={cfg.quote(forge.FORGED_FIRST_CHOICE)} is not one of"
    for widget in (w for kind in forge.WRONG_KIND_KINDS for w in getattr(at, kind) if w.key):
        add(widget, "int_value" if kind_of(widget) != "number" else "string_value", 7)
        said[widget.id] = MISTYPED_NOTICE.split("(")[0]
    return states, said


def kind_of(widget) -> str:
    return "number" if type(widget).__name__ == "NumberInput" else "other"


def _drawn_ids(at: AppTest) -> set[str]:
    kinds = forge.NUMBER_KINDS + forge.NUMBER_ARRAY_KINDS + forge.CHOICE_KINDS + forge.CHOICE_ARRAY_KINDS
    return {w.id for kind in kinds + forge.WRONG_KIND_KINDS for w in getattr(at, kind)}


@pytest.mark.parametrize("number", list(forge.FORGED_FIRST_NUMBERS))
@pytest.mark.parametrize("page", PAGES)
def test_a_forged_first_message_gets_the_same_notices(page, number):
    """A new tab's first rerun message carries every widget of the page, forged, before the tab drew any: NaN, inf,
    -inf or 1e300 for numbers ("cannot convert float NaN to integer" and OverflowError on Real heads, before), a
    choice no widget offers, a value of the wrong kind. Each widget the page draws gets its notice, nothing fails."""
    learned = open_page(page, _query(page))  # another tab: the widgets' ids, which every session shares
    states, said = _forged_first_states(learned, forge.FORGED_FIRST_NUMBERS[number])
    assert said, f"{page} has no keyed widget"
    fresh = AppTest.from_file(str(ROOT / page), default_timeout=120)
    for key, value in _query(page).items():
        fresh.query_params[key] = value
    fresh._run(states)  # the first message: widget states for widgets this session never drew
    check_page(fresh, [forge.FORGED_FIRST_CHOICE], f"{page} first message with {number}")
    warnings = " ".join(w.value for w in fresh.warning)
    missing = {wid.rsplit("-", 1)[-1]: words for wid, words in said.items() if wid in _drawn_ids(fresh)}
    missing = {key: words for key, words in missing.items() if words not in warnings}
    assert not missing, (page, number, missing, warnings[:1500])


@pytest.mark.parametrize("temperature", [1e-40, 1e-38, 0.001])
def test_a_temperature_under_the_least_is_raised_to_it_with_a_notice(temperature):
    """Typed in the page, no forging: 1e-40 passed the widget's 0–2 range and the sampler failed ("Something went
    wrong (RuntimeError)"). The page writes at the least temperature and says so."""
    page = "pages/8_Real_heads.py"
    at = open_page(page, _query(page))
    at.number_input(key="w_rh_temperature").set_value(temperature)
    at.button(key="w_rh_continue").click().run()
    check_page(at, [], f"temperature {temperature}")
    least = f"{real_circuits.MIN_TEMPERATURE:g}"
    assert any(f"temperature={cfg.quote(temperature)}" in w.value and f"using {least}" in w.value for w in at.warning)
    assert any(f"sampled at temperature {least}" in m.value for m in at.markdown), [m.value for m in at.markdown]
