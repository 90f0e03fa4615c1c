"""Widget values from the browser, checked by the settings' strict parsers before Streamlit reads them.

A browser's slider or selectbox can only send what it offers, but a hand-made rerun message can send anything: a
selectbox's ``"zzz"`` (Streamlit hands an unknown string to the page as the value: a KeyError in the settings
check, or ``int("zzz")`` under Follow a token's token picker), a seed of 2⁶² (Streamlit silently puts an
out-of-range number back to the widget's first value: 0). Here each value is parsed as a URL value is
(``settings.parse_choice``, ``parse_int``, ``parse_float``): a value outside the widget's choices gets the widget's
default, a number outside its range is clamped, and each change is said in a notice. Pure: proto in, proto and
notices out; ``server_setup`` calls it before every rerun, and for a value sent before its widget was ever
drawn in the session (a new tab's first message), when the page's code first declares the widget.
"""

from __future__ import annotations

import math

from streamlit.proto.Slider_pb2 import Slider as SliderProto
from streamlit.proto.WidgetStates_pb2 import WidgetState

from explorer.glue.state import settings as cfg

_INT_TYPES = {SliderProto.INT}  # NumberInput's INT is the same number (1) as the slider's
_NUMBER_FIELDS = ("int_value", "double_value")
_UNBOUNDED = 2**53  # the widest integer a browser's number keeps exactly


def widget_name(widget_id: str) -> str:
    """A widget's user key without the settings' ``w_`` prefix (``$$ID-<hash>-w_seed`` → ``seed``)."""
    key = widget_id.rsplit("-", 1)[-1]
    return key.removeprefix("w_") if key and key != "None" else "a control"


def _serde(metadata):
    return getattr(getattr(metadata, "deserializer", None), "__self__", None)


def _choice(name: str, raw: str, serde) -> tuple[str, str | None]:
    """A selectbox's or radio's formatted option: one of its options, else its default option."""
    options = list(serde.formatted_options)
    if raw in serde.formatted_option_to_option_index or not options:
        return raw, None
    index = serde.default_option_index if serde.default_option_index is not None else 0
    return cfg.parse_choice(name, raw, options[min(index, len(options) - 1)], options)


def _number(name: str, raw: float, serde, default: object) -> tuple[float, str | None]:
    """A number inside the widget's [min, max], parsed as the URL's numbers are."""
    low = serde.min_value if serde.min_value is not None else -_UNBOUNDED  # a number_input without bounds
    high = serde.max_value if serde.max_value is not None else _UNBOUNDED
    if serde.data_type in _INT_TYPES:
        text = str(int(raw)) if isinstance(raw, float) and math.isfinite(raw) and raw.is_integer() else str(raw)
        fallback = int(default) if isinstance(default, (int, float)) and low <= default <= high else int(low)
        return cfg.parse_int(name, text, fallback, int(low), int(high))
    fallback = float(default) if isinstance(default, (int, float)) and low <= default <= high else float(low)
    return cfg.parse_float(name, repr(float(raw)), fallback, float(low), float(high))


def _checked_numbers(state: WidgetState, serde, name: str, notices: list[str]) -> None:
    kind = state.WhichOneof("value")
    if kind in _NUMBER_FIELDS:
        default = serde.value if not isinstance(serde.value, (list, tuple)) else None
        value, notice = _number(name, getattr(state, kind), serde, default)
        if notice:
            notices.append(notice)
            state.ClearField(kind)
            setattr(state, "int_value" if isinstance(value, int) else "double_value", value)
    elif kind in ("double_array_value", "int_array_value") and getattr(serde, "single_value", False):
        values = list(getattr(state, kind).data)
        defaults = list(serde.value) if isinstance(serde.value, (list, tuple)) else [serde.value]
        checked = []
        for raw, default in zip(values, defaults + [None] * len(values), strict=False):
            value, notice = _number(name, raw, serde, default)
            notices += [notice] if notice else []
            checked.append(value)
        if checked != values:
            del getattr(state, kind).data[:]
            getattr(state, kind).data.extend(checked)


def _checked_choices(state: WidgetState, serde, name: str, notices: list[str]) -> None:
    kind = state.WhichOneof("value")
    if kind == "string_value" and hasattr(serde, "formatted_option_to_option_index"):
        value, notice = _choice(name, state.string_value, serde)
        if notice:
            notices.append(notice)
            state.string_value = value
    elif kind == "string_array_value" and hasattr(serde, "formatted_option_to_option_index"):  # a multiselect
        offered = serde.formatted_option_to_option_index
        unknown = [raw for raw in state.string_array_value.data if raw not in offered]
        for raw in unknown:
            _, notice = cfg.parse_choice(name, raw, "", list(offered))
            notices.append(notice.rsplit(";", 1)[0] + "; left out.")
        if unknown:
            kept = [raw for raw in state.string_array_value.data if raw in offered]
            del state.string_array_value.data[:]
            state.string_array_value.data.extend(kept)
    elif kind == "string_array_value" and hasattr(serde, "formatted_option_to_index"):  # a select_slider
        options = list(serde.formatted_option_to_index)
        default = options[serde.default_indices[0]] if serde.default_indices and options else ""
        checked = []
        for raw in state.string_array_value.data:
            value, notice = cfg.parse_choice(name, raw, default, options)
            notices += [notice] if notice else []
            checked.append(value)
        if checked != list(state.string_array_value.data):
            del state.string_array_value.data[:]
            state.string_array_value.data.extend(checked)


def check_one(state: WidgetState, metadata) -> list[str]:
    """Put one widget's value inside what ``metadata`` (its widget, as the page's code declared it) offers."""
    holder = type("One", (), {"widgets": [state]})()
    return check_states(holder, {state.id: metadata})


def check_states(states, metadata) -> list[str]:
    """Put every widget value in ``states`` (changed in place) inside what its widget offers; the notices say what
    changed. A widget without metadata (not drawn yet), accept-new-options boxes and other kinds pass untouched."""
    notices: list[str] = []
    for state in states.widgets:
        serde = _serde(metadata.get(state.id))
        if serde is None or getattr(serde, "accept_new_options", False):
            continue
        name = widget_name(state.id)
        if hasattr(serde, "min_value") and hasattr(serde, "data_type"):
            if serde.data_type in (SliderProto.INT, SliderProto.FLOAT):  # not dates or times
                _checked_numbers(state, serde, name, notices)
        else:
            _checked_choices(state, serde, name, notices)
    return notices
