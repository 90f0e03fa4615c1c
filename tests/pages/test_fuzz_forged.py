"""Hostile input on every page, part 3 of 3: forged widget values, what a hand-made rerun message can send (a choice
a selectbox or radio does not offer, a number outside a widget's range). Each is answered with a notice and a value
in range, and the page keeps apptest_helpers.check_page's promises.
"""

from __future__ import annotations

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState

from explorer.glue.state import settings as cfg

from ..apptest_helpers import PAGES, check_page, open_page

# --- 4. forged widget values: what a hand-made rerun message can send -----------------------------------------------

FORGED_CHOICES = ("zzz", "../../etc/passwd")
CHOICE_KINDS = ("selectbox", "radio")


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
