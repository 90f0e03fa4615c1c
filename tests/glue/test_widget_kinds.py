"""Widget states are dropped only when their kind cannot be the widget's: a browser sends an integer number_input's
value as int_value although Streamlit registers it as double_value (found in Chromium: every seed change was
dropped, with a false notice); a string for a number is still refused."""

from types import SimpleNamespace

from streamlit.proto.WidgetStates_pb2 import WidgetStates

from explorer.glue.frame.server_setup import well_typed
from explorer.glue.state import widget_guard


def states(**values) -> WidgetStates:
    out = WidgetStates()
    for key, (field, value) in values.items():
        state = out.widgets.add()
        state.id = f"$$ID-abc-{key}"
        setattr(state, field, value)
    return out


def metadata(**value_types) -> dict:
    return {f"$$ID-abc-{key}": SimpleNamespace(value_type=kind) for key, kind in value_types.items()}


def test_an_integer_number_input_sent_as_int_value_is_kept():
    kept, dropped = well_typed(states(w_seed=("int_value", 7)), metadata(w_seed="double_value"))
    assert dropped == [] and [w.int_value for w in kept.widgets] == [7]


def test_a_string_for_a_number_is_dropped_and_named():
    sent = states(w_seed=("string_value", "not a number"), w_num_heads=("double_value", 3.0))
    kept, dropped = well_typed(sent, metadata(w_seed="double_value", w_num_heads="double_value"))
    assert dropped == ["w_seed"] and [w.id for w in kept.widgets] == ["$$ID-abc-w_num_heads"]


def test_other_kinds_must_match_exactly():
    kept, dropped = well_typed(states(w_text=("int_value", 3)), metadata(w_text="string_value"))
    assert dropped == ["w_text"] and not kept.widgets


# --- widget_guard: values of the right kind, put inside what their widget offers ------------------------------------


class _Serde:
    """A stand-in for a Streamlit serde: the guard reads its bounds or choices through ``deserializer.__self__``."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def deserialize(self, value):
        return value


def guarded(**widgets):
    """check_states over one state per widget: key=(field, value, serde fields)."""
    sent, metadata = WidgetStates(), {}
    for key, (field, value, serde) in widgets.items():
        state = sent.widgets.add()
        state.id = f"$$ID-abc-{key}"
        if field.endswith("array_value"):
            getattr(state, field).data.extend(value)
        else:
            setattr(state, field, value)
        metadata[state.id] = SimpleNamespace(deserializer=_Serde(**serde).deserialize)
    notices = widget_guard.check_states(sent, metadata)
    return {w.id.rsplit("-", 1)[-1]: w for w in sent.widgets}, notices


def test_numbers_are_clamped_by_the_strict_parser_and_said():
    bounds = dict(min_value=0, max_value=2**31 - 1, value=123, data_type=0)
    free = dict(min_value=None, max_value=None, value=0.0, data_type=1)  # a number_input without bounds
    slider = dict(min_value=1, max_value=1024, value=[1], data_type=0, single_value=True)
    states, notices = guarded(
        w_seed=("int_value", 2**62, bounds),
        w_free=("double_value", float("nan"), free),
        w_num_tokens=("double_array_value", [1e9], slider),
    )
    assert states["w_seed"].int_value == 2**31 - 1
    assert states["w_free"].double_value == 0.0
    assert list(states["w_num_tokens"].double_array_value.data) == [1024]
    assert notices == [
        f"seed=`{2**62}` is outside 0–2147483647; using 2147483647.",
        "free=`nan` is not a number; using 0.0.",
        "num_tokens=`1000000000` is outside 1–1024; using 1024.",
    ]


def test_choices_outside_the_options_get_the_default_and_values_inside_pass():
    box = dict(formatted_options=["book", "random", "text"], default_option_index=0)
    box["formatted_option_to_option_index"] = {o: i for i, o in enumerate(box["formatted_options"])}
    states, notices = guarded(w_input=("string_value", "../../etc/passwd", box), w_other=("string_value", "text", box))
    assert states["w_input"].string_value == "book" and states["w_other"].string_value == "text"
    assert notices == ["input=`../../etc/passwd` is not one of book, random, text; using book."]
