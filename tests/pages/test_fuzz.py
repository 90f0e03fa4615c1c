"""Hostile input on every page: Hypothesis writes the URL, moves the widgets and types the sentence.

Pages are discovered (app.py and pages/*.py), so a page added later is fuzzed too; each page's own URL
parameters are read from its source (``url_int``, ``url_choice``, ``seed_int``, ``seed_choice``,
``sync_url(..., name=...)``). After every run, on every page:

* no exception reached Streamlit (the page boundary or the page itself must catch and explain);
* nothing from the URL or the sentence box can render as HTML: markdown-rendered text (markdown, captions,
  alerts, headings) holds no raw ``<script>``, ``<img>``, ``<iframe>``, ``<svg>`` or ``javascript:`` outside code
  spans, elements that allow HTML hold no user text at all, and no string in a figure's JSON holds such a tag;
* no NaN reaches the display unannounced: a NaN cell of a heatmap is covered by a "masked" or "nan" overlay
  (the figures' contract, see explorer.views.figures), and a printed "nan" comes with a notice that says NaN.

At least 300 examples run in total (more with more pages). Drawn sizes are bounded (b·h·T² ≤ 2²¹ attention cells),
so one example costs well under a second; the fixed set adds the largest link (2²⁷ cells in float64), which every
page fits to the byte budget; the peaks of the largest settings are tests/server/test_memory_budget.py's business.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from streamlit.proto.NumberInput_pb2 import NumberInput as NumberInputProto
from streamlit.proto.Slider_pb2 import Slider as SliderProto
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Selectbox

from explorer.glue import budget
from explorer.glue import settings as cfg
from mha_core.inputs import tokenize

from ..apptest_helpers import (
    CODE_SPANS,
    DANGEROUS,
    PAGES,
    ROOT,
    check_page,
    open_page,
    strings,
    unannounced_nan,
)

_PARAM_PATTERNS = [
    re.compile(r"url_(?:int|choice|int_or_none)\(\s*f?[\"']([A-Za-z_]\w*)"),
    re.compile(r"seed_(?:int|choice)\(\s*f?[\"'][^\"']*[\"']\s*,\s*f?[\"']([A-Za-z_]\w*)"),
]


def page_params(page: str) -> set[str]:
    """The URL parameters a page reads besides the settings, found in its source."""
    source = (ROOT / page).read_text()
    found = {m.group(1) for pattern in _PARAM_PATTERNS for m in pattern.finditer(source)}
    for call in re.finditer(r"sync_url\(\s*settings\s*,(.*?)\)\s*$", source, re.S | re.M):
        found |= set(re.findall(r"(\w+)\s*=", call.group(1)))
    return found


MARKER = "ZZPWN"  # in every hostile string, so a leak can be traced to the URL
HOSTILE = [
    "",
    " ",
    "NaN",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "1e309",
    "-1e309",
    "1e-400",
    "0x10",
    "1_000",
    "٣",
    "−3",
    "4.0",
    " 4 ",
    "+4",
    "-1",
    "0",
    "-0",
    "2147483648",
    "9" * 40,
    "-" + "9" * 40,
    "true",
    "yes",
    "None",
    f"<script>alert('{MARKER}')</script>",
    f"<img src=x onerror=alert('{MARKER}')>",
    f"<iframe src='javascript:alert(1)'>{MARKER}</iframe>",
    f"[{MARKER}](javascript:alert(1))",
    f"![{MARKER}](http://127.0.0.1:1/x.png)",
    f"**{MARKER}** `code` $x^2$ :red[{MARKER}]",
    f"{MARKER}\n\n# heading\n<svg onload=alert(1)>",
    f"`{MARKER}`` ``` ",
    "\u202e" + MARKER + "\u202c",
    "שלום עולם " + MARKER,
    "مرحبا بالعالم",
    "😀🔥👩‍👩‍👧" + MARKER,
    "\x00\x01\x7f",
    "%3Cscript%3E",
    "../../etc/passwd",
    "Z̷̢̛a̸l̴g̵o̶" + MARKER,
    MARKER * 2000,  # 10 kB
]
SENTENCES = [
    "",
    " ",
    "\n\t",
    "😀",
    "😀🔥👩‍👩‍👧 🇺🇦",
    "שלום עולם, מה שלומך?",
    "مرحبا بالعالم. كيف حالك؟",
    "\u202eevil text\u202c",
    "你好，世界。",
    "a" * (cfg.MAX_TEXT_CHARS + 1),
    "word " * 800,
    f"<script>alert('{MARKER}')</script>",
    f"**{MARKER}** [x](javascript:alert(1)) <img src=x onerror=alert(1)>",
    "NaN nan inf -inf 1e309",
    "\x00\x01",
    "Z̷̢̛a̸l̴g̵o̶ t̶e̵x̷t̸",
    "...",
    "$x$ $$y$$",
]
EXTRA_KEYS = ["", "unknown", "num_heads ", "NUM_HEADS", "num_heads[]", "page", "embed", "presenter", MARKER]
SIZE_KEYS = ("num_heads", "d_out", "num_tokens", "batch_size", "d_in", "context_length")
MAX_FUZZ_CELLS = 2**21  # b·h·T² of a drawn URL: 1 head × 1024² tokens × batch 2 at most, so an example stays cheap
# The largest link in float64 with dropout (2²⁷ cells asked for): every page fits it to its byte budget, with a notice.
WORST_LINK = dict(
    num_heads="16",
    d_out="1024",
    num_tokens="1024",
    batch_size="8",
    d_in="1024",
    dtype="float64",
    train="true",
    dropout="0.5",
    input="random",
)

# Examples in total: queries on each page, widgets, sentences. At least 300 whatever the number of pages.
QUERY_EXAMPLES = max(25, math.ceil(210 / len(PAGES)))
WIDGET_EXAMPLES = 100
SENTENCE_EXAMPLES = 50
FUZZ = dict(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
)

values = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(-(10**30), 10**30).map(str),
    st.integers(0, 40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(max_size=30),
)


def query_strategy(page: str):
    keys = st.sampled_from(sorted(set(cfg.FIELD_NAMES) | page_params(page) | set(EXTRA_KEYS)))
    return st.dictionaries(keys, st.one_of(values, st.lists(values, min_size=2, max_size=3)), max_size=6)


# --- the budget and the user's own strings (the checks are apptest_helpers.check_page) ----------------------------


def too_big(query: dict) -> bool:
    """True when the URL's settings would be bigger than the fuzz budget (parse_query is cheap and pure)."""
    params = {k: v for k, v in query.items() if k in cfg.FIELD_NAMES}
    s, _ = cfg.parse_query(params)
    return s.batch_size * s.num_heads * s.num_tokens**2 > MAX_FUZZ_CELLS


def user_strings(query: dict) -> list[str]:
    found = []
    for value in query.values():
        found += value if isinstance(value, list) else [value]
    return [str(v) for v in found]


# --- 1. the URL -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
@settings(max_examples=QUERY_EXAMPLES, **FUZZ)
@given(data=st.data())
@example(data=None)  # the fixed hostile set below, on every page
def test_hostile_query_strings_render_safely_on_every_page(page, data):
    if data is None:
        queries = [
            {"seed": "1e309", "num_heads": "NaN", "d_in": "-inf", "num_tokens": "-5", "dropout": "1e309"},
            {"seed": "9" * 40, "batch_size": "-" + "9" * 40, "text": HOSTILE[27], "input": "text"},
            {"num_heads": ["1", "<script>alert(1)</script>"], "device": "cuda", "dtype": "bfloat16"},
            {name: f"<img src=x onerror=alert('{MARKER}')>" for name in sorted(page_params(page) | {"presenter"})},
            {"text": MARKER * 2000, "input": "text", MARKER: MARKER, "": ""},
            {"model": HOSTILE[27], "layer": "-1", "head": "٣", "text": HOSTILE[28]},  # a real model's link
            {"model": ["own", "gpt2"], "layer": "9" * 40, "head": "1e309", "text": HOSTILE[-1], "trained": "x"},
            WORST_LINK,  # over the fuzz budget: the page fits it to the byte budget, with a notice
        ]
    else:
        queries = [data.draw(query_strategy(page), label="query")]
    for query in queries:
        if data is not None:
            assume(not too_big(query))  # a drawn URL that is too big is redrawn (time); the fixed ones all run
        at = open_page(page, query)
        check_page(at, user_strings(query), f"{page}?{query}"[:500])
        at.run()  # the rerun after the URL was rewritten must hold too
        check_page(at, user_strings(query), f"{page} (rerun)")


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


def test_pages_are_discovered():
    assert PAGES[0] == "app.py"
    assert all((ROOT / page).is_file() for page in PAGES)
    assert QUERY_EXAMPLES * len(PAGES) + WIDGET_EXAMPLES + SENTENCE_EXAMPLES >= 300


def test_the_checks_catch_what_they_are_for():
    """The checker itself: a bare NaN, an unquoted tag, a tag in a figure; and no alarm on the safe forms."""
    from explorer.views import figures

    z = np.array([[[0.5, np.nan], [0.25, 0.75]]], dtype=np.float32)
    figure = json.loads(figures.heads_heatmap(z, ["a", "b"], ["a", "b"], title="t", kind="weights").to_json())
    assert unannounced_nan(figure) == []  # the NaN cell is covered by the magenta overlay, named in the legend
    bare = dict(figure, data=[t for t in figure["data"] if (t.get("meta") or {}).get("role") != "nan"])
    assert unannounced_nan(bare)
    assert not DANGEROUS.search(CODE_SPANS.sub("", "seed=`<script>alert(1)</script>` is not a whole number"))
    assert DANGEROUS.search(CODE_SPANS.sub("", "seed=<script>alert(1)</script> is not a whole number"))
    assert DANGEROUS.search(CODE_SPANS.sub("", "[x](javascript:alert(1))"))
    labels = json.loads(figures.heads_heatmap(z, ["<script>", "b"], ["a", "b"], title="t", kind="weights").to_json())
    assert not [s for s in strings(labels) if DANGEROUS.search(s)]  # token labels are escaped by the builders


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
