"""Hostile input on every page, part 2 of 3: Hypothesis moves the widgets and types the sentence, on pages drawn from
all of them. After every run the page keeps apptest_helpers.check_page's promises (no exception, no HTML from the user,
no NaN unannounced), and the settings stay within the cell and byte budgets. Inputs: fuzz_inputs.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.proto.NumberInput_pb2 import NumberInput as NumberInputProto
from streamlit.proto.Slider_pb2 import Slider as SliderProto
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Selectbox

from explorer.glue.memory import budget
from explorer.glue.state import settings as cfg
from mha_core.attention.inputs import tokenize

from ..apptest_helpers import PAGES, check_page, open_page
from .fuzz_inputs import FUZZ, SENTENCE_EXAMPLES, SENTENCES, WIDGET_EXAMPLES

# --- 2. the widgets ---------------------------------------------------------------------------------------------------

SMALL_QUERY = st.fixed_dictionaries(
    {},
    optional={
        "num_heads": st.integers(1, 4).map(str),
        "num_tokens": st.integers(1, 24).map(str),
        "input": st.sampled_from(["book", "random", "text"]),
        "batch_size": st.integers(1, 3).map(str),
    },
)
SIZE_WIDGETS = {"w_num_heads", "w_head_dim", "w_num_tokens", "w_batch_size", "w_context_length", "w_d_in"}


# A move is drawn before the page runs, so that what Hypothesis draws never depends on the page: (which widget,
# where in its range, inside or just outside the range, a text for text boxes). It is mapped onto the keyed
# widgets the page shows at run time.
MOVE = st.tuples(
    st.integers(0, 10**6),
    st.floats(0, 1),
    st.sampled_from(["in", "in", "in", "in", "below", "above"]),
    st.sampled_from(SENTENCES) | st.text(max_size=60),
)
ROUNDS = st.lists(st.lists(MOVE, min_size=1, max_size=4), min_size=2, max_size=2)
WIDGET_KINDS = ("slider", "number_input", "selectbox", "toggle", "checkbox", "text_input", "text_area", "select_slider")


def _number(low: float, high: float, where: float, side: str, integer: bool) -> float:
    if side == "below":
        return low - (1 if integer else 0.5)
    if side == "above":
        return high + (1 if integer else 0.5)
    value = low + where * (high - low)
    return int(round(value)) if integer else value


def widget_moves(at: AppTest, moves) -> list[tuple[object, object]]:
    """Map drawn moves onto the page's keyed widgets: (widget, value) pairs, at most one per widget."""
    widgets = sorted((w for kind in WIDGET_KINDS for w in getattr(at, kind) if w.key), key=lambda w: w.key)
    chosen: dict[str, tuple[object, object]] = {}
    for pick, where, side, text in moves:
        if not widgets:
            break
        widget = widgets[pick % len(widgets)]
        kind, proto = widget.type, widget.proto
        if kind == "slider" and not isinstance(widget.value, (list, tuple)):
            if proto.data_type not in (SliderProto.INT, SliderProto.FLOAT):
                continue
            integer = proto.data_type == SliderProto.INT
            high = min(proto.max, proto.min + 40) if widget.key in SIZE_WIDGETS else proto.max
            value = _number(proto.min, high, where, side, integer)
            if not integer and side == "in":
                step = proto.step or 0.01
                value = round(proto.min + round((value - proto.min) / step) * step, 6)
        elif kind == "number_input":
            integer = proto.data_type == NumberInputProto.INT
            low = proto.min if proto.has_min else -1000
            high = proto.max if proto.has_max else 1000
            if widget.key in SIZE_WIDGETS:
                high = min(high, low + 40)
            value = _number(low, high, where, side, integer)
        elif kind == "selectbox":
            if not widget.options:
                continue
            value = ("index", min(int(where * len(widget.options)), len(widget.options) - 1))
        elif kind in ("toggle", "checkbox"):
            value = where >= 0.5
        elif kind in ("text_input", "text_area"):
            value = text
        elif kind == "select_slider":
            numbers = [float(o) for o in widget.options if re.fullmatch(r"-?\d+(\.\d+)?", o)]
            if len(numbers) != len(widget.options) or not numbers:
                continue
            value = numbers[min(int(where * len(numbers)), len(numbers) - 1)]
            value = int(value) if value.is_integer() else value
        else:
            continue
        chosen[widget.key] = (widget, value)
    return list(chosen.values())


class _PickedSelectbox(Selectbox):
    """A selectbox set by its displayed label, which is what the browser sends.

    AppTest's own select_index stores the label as the value and formats it again, which fails for a selectbox
    with a format_func (the settings' input kinds, the training tasks).
    """

    picked_label: str

    @property
    def _widget_state(self) -> WidgetState:
        state = WidgetState()
        state.id = self.id
        state.string_value = self.picked_label
        return state


def apply(moves) -> None:
    for widget, value in moves:
        if isinstance(value, tuple) and value[0] == "index":
            widget.__class__ = _PickedSelectbox
            widget.picked_label = widget.options[value[1]]
        else:
            widget.set_value(value)


@settings(max_examples=WIDGET_EXAMPLES, **FUZZ)
@given(page=st.sampled_from(PAGES), query=SMALL_QUERY, rounds=ROUNDS)
def test_random_widget_values_render_safely(page, query, rounds):
    at = open_page(page, query)
    check_page(at, [], f"{page}?{query}")
    for number, drawn in enumerate(rounds):
        moves = widget_moves(at, drawn)
        apply(moves)
        at.run()
        texts = [str(v) for _, v in moves if isinstance(v, str)]
        check_page(at, texts, f"{page}?{query} after {[(w.key, v) for w, v in moves]} (round {number})"[:800])
        s = at.session_state.settings if "settings" in at.session_state else None
        if s is not None:
            assert s.batch_size * s.num_heads * s.num_tokens**2 <= cfg.MAX_ATTENTION_CELLS
            assert budget.need_bytes("explorer", s) <= budget.JOB_BYTES  # and the one budget in bytes


# --- 3. the sentence box ----------------------------------------------------------------------------------------------


@settings(max_examples=SENTENCE_EXAMPLES, **FUZZ)
@given(
    sentence=st.sampled_from(SENTENCES) | st.text(max_size=120) | st.text(min_size=2001, max_size=2050),
    typed=st.booleans(),
    page=st.sampled_from(PAGES),
)
def test_the_sentence_box_takes_anything(sentence, typed, page):
    at = open_page(page, {"input": "text", "num_heads": "2", "d_out": "4"})
    check_page(at, [], page)
    if "w_text" not in [w.key for w in at.text_input]:
        return  # a page without the settings sidebar has no sentence box (every page has it today)
    box = at.text_input(key="w_text")
    if typed:
        box.input(sentence)  # as typed in the browser: max_chars holds, a longer text is not sent
    else:
        box.set_value(sentence)  # as a crafted message could send it: no max_chars
    at.run()
    check_page(at, [sentence], f"{page} sentence {sentence[:80]!r}")
    s = at.session_state.settings
    assert len(s.text) <= cfg.MAX_TEXT_CHARS
    assert s.text.strip(), "an empty sentence must fall back to a sentence with words"
    kept = sentence[: cfg.MAX_TEXT_CHARS]
    if not typed and len(sentence) > cfg.MAX_TEXT_CHARS and tokenize(kept):
        # a crafted message: cut to its first characters (by the widget's max_chars or by reconcile's notice)
        assert s.text == kept, (len(s.text), s.text[:80])
