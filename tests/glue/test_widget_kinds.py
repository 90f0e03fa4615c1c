"""Widget states are dropped only when their kind cannot be the widget's: a browser sends an integer number_input's
value as int_value although Streamlit registers it as double_value (found in Chromium: every seed change was
dropped, with a false notice); a string for a number is still refused."""

from types import SimpleNamespace

from streamlit.proto.WidgetStates_pb2 import WidgetStates

from explorer.glue.server_setup import well_typed


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
