"""What the fuzz tests (test_fuzz_urls, test_fuzz_widgets, test_fuzz_forged) send: hostile strings, sentences, URL
keys and the Hypothesis strategies and budgets they draw from. Shared here so the three files, which pytest-xdist
hands to different workers (``--dist loadfile``), fuzz with the same inputs and the same example counts.

At least 300 examples run in total (more with more pages), counted in test_fuzz_urls.test_pages_are_discovered.
"""

from __future__ import annotations

import math
import re

from hypothesis import HealthCheck
from hypothesis import strategies as st

from explorer.glue.state import settings as cfg

from ..apptest_helpers import PAGES, ROOT

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


# What a hand-made first message of a new tab sends for each kind of widget (before the tab ever drew it): numbers
# the maths cannot take, a choice no widget offers, a value of the wrong kind. By AppTest's element names.
FORGED_FIRST_NUMBERS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "huge": 1e300}
FORGED_FIRST_CHOICE = "zzz"
NUMBER_KINDS = ("number_input",)
NUMBER_ARRAY_KINDS = ("slider",)
CHOICE_KINDS = ("selectbox", "radio")
CHOICE_ARRAY_KINDS = ("select_slider", "multiselect")
WRONG_KIND_KINDS = ("checkbox", "toggle", "text_input", "text_area")
