"""The one strict parser of values from outside: URL values and widget values (``widget_guard``). No streamlit.

Each parser returns (value, notice or None) and never raises: anything that is not plainly a value in range gets the
default or the nearest bound, and the notice says which. User text is quoted through ``quote``, which cannot render
as HTML or markdown. ``settings`` re-exports them (``settings.parse_int`` is the name the pages know).
"""

from __future__ import annotations

import math
import re

from explorer.glue.state.user_text import quote

# ASCII digits only: ``\d`` and ``str.isdigit`` also accept other scripts' digits (``٣``, ``²``).
INT_PATTERN = re.compile(r"[+-]?[0-9]{1,12}")
LONG_INT_PATTERN = re.compile(r"[+-]?0*[1-9][0-9]{12,}")
FLOAT_PATTERN = re.compile(r"[+-]?([0-9]{1,20}(\.[0-9]{0,20})?|\.[0-9]{1,20})([eE][+-]?[0-9]{1,4})?")
# Trimmed around a value: ASCII spaces only. ``str.strip()`` also drops a no-break or ideographic space, which a
# parser that promises ASCII should refuse, not read.
ASCII_SPACE = " \t\r\n\f\v"


def parse_int(name: str, raw: object, default: int, low: int, high: int) -> tuple[int, str | None]:
    """The one strict integer parser for URL values: (value, notice or None); never raises.

    Only ``[+-]?[0-9]{1,12}`` after trimming ASCII spaces is a number; anything else gives ``default`` with a
    notice, and a number outside [low, high] is clamped with a notice.
    """
    text = str(raw).strip(ASCII_SPACE)
    if LONG_INT_PATTERN.fullmatch(text):  # more digits than any range here: clamped, without parsing all of them
        clamped = low if text.startswith("-") else high
        return clamped, f"{name}={quote(raw)} is outside {low}–{high}; using {clamped}."
    if not INT_PATTERN.fullmatch(text):
        return default, f"{name}={quote(raw)} is not a whole number; using {default}."
    value = int(text)
    if not low <= value <= high:
        clamped = min(max(value, low), high)
        return clamped, f"{name}={quote(raw)} is outside {low}–{high}; using {clamped}."
    return value, None


def parse_choice(name: str, raw: object, default: str, choices) -> tuple[str, str | None]:
    """The one strict choice parser: the value if it is exactly one of ``choices``, else the default, with a notice."""
    choices = [str(c) for c in choices]
    if isinstance(raw, str) and raw in choices:
        return raw, None
    listed = ", ".join(choices) if len(choices) <= 8 else f"its {len(choices)} choices"
    return default, f"{name}={quote(raw)} is not one of {listed}; using {default}."


def parse_float(name: str, raw: object, default: float, low: float, high: float) -> tuple[float, str | None]:
    """The one strict decimal parser: (value rounded to 2 places, notice or None); never raises.

    Anything but a plain finite decimal gives ``default`` with a notice; a number outside [low, high] is clamped.
    """
    text = str(raw).strip(ASCII_SPACE)
    if not FLOAT_PATTERN.fullmatch(text):
        return default, f"{name}={quote(raw)} is not a number; using {default}."
    value = float(text)
    if not math.isfinite(value):
        return default, f"{name}={quote(raw)} is not a finite number; using {default}."
    if not low <= value <= high:
        clamped = min(max(value, low), high)
        return clamped, f"{name}={quote(raw)} is outside {low}–{high}; using {clamped}."
    return round(value, 2), None
