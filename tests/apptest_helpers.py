"""The one set of AppTest helpers: open a page as a link opens it, check what it shows, read its charts and text.

``check_page`` holds the promises every page keeps under any input (the fuzz tests', used by test_faults and
test_hostile_links too): no exception, no error box, a chart where the page draws one, no HTML from the user,
no NaN unannounced.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from explorer.glue.frame.chart import CARTESIAN_TRACES, ELEMENT, figure_of, is_chart, key_of
from explorer.views.figures import decode_array as decode

ROOT = Path(__file__).resolve().parents[1]


# boundary.printed's box: a tensor as torch prints it, HTML-escaped.
PRINTED_BOX = re.compile(r'<pre class="mha-printed[^"]*"><code>(.*?)</code></pre>', re.S)


def printed(at: AppTest) -> list[str]:
    """Every tensor the page prints: st.code's text and boundary.printed's boxes, as the reader sees them."""
    boxes = [html.unescape(text) for element in at.get("html") for text in PRINTED_BOX.findall(element.proto.body)]
    return [code.value for code in at.code] + boxes


def discover_pages() -> list[str]:
    """app.py and every pages/*.py, relative to the repository root."""
    return ["app.py"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py"))


PAGES = discover_pages()


def open_page(path: str, query: Mapping[str, object] | None = None, timeout: float = 120) -> AppTest:
    """The page alone (path relative to the repository root), as a link opens it: its query first, then one run."""
    at = AppTest.from_file(str(ROOT / path), default_timeout=timeout)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    return at.run()


def run_page(path: str, timeout: float = 120, **query: str) -> AppTest:
    """open_page with the query as keywords."""
    return open_page(path, query, timeout)


def chart_elements(at: AppTest) -> list:
    """The page's chart elements: every component element but the sidebar's history guard (history_guard.py)."""
    return [element for element in at.get(ELEMENT) if is_chart(element.proto)]


def charts(at: AppTest) -> dict[str, dict]:
    """Figure JSON of every plotly chart, by its widget key less the "chart_" prefix (panel key)."""
    found = {}
    for element in chart_elements(at):
        key = key_of(element.proto).removeprefix("chart_")
        found[key] = figure_of(element.proto)
    return found


def chart_places(at: AppTest) -> dict[str, tuple[int, ...]]:
    """Where each chart sits in the page's tree (its index in each block down from the main area), by panel key.

    Streamlit's browser side matches blocks to the last run's by place: a chart whose place changed between two runs
    is drawn afresh, not updated (url.show_notices)."""
    found = {}

    def walk(node, place: tuple[int, ...]) -> None:
        for index, child in getattr(node, "children", {}).items():
            if child.type == ELEMENT:
                found[key_of(child.proto).removeprefix("chart_")] = (*place, index)
            walk(child, (*place, index))

    walk(at.main, ())
    return found


def head_matrices(figure: dict, role: str = "values") -> list[np.ndarray]:
    """The z matrix of every trace with meta.role == role, in head order."""
    traces = [t for t in figure["data"] if (t.get("meta") or {}).get("role") == role]
    traces.sort(key=lambda t: t["meta"].get("head", 0))
    return [decode(t["z"]) for t in traces]


def texts(at: AppTest) -> str:
    """All text a user can read on the page (markdown, captions, notices, code), joined."""
    parts = []
    for kind in ("markdown", "caption", "warning", "error", "success", "info", "code", "title", "header", "subheader"):
        parts += [str(element.value) for element in getattr(at, kind)]
    return "\n".join(parts)


# --- the promises every page keeps ---------------------------------------------------------------------------------

CODE_SPANS = re.compile(r"(`+)(?:(?!\1).)*?\1", re.S)
DANGEROUS = re.compile(r"<\s*/?\s*(script|img|iframe|svg|object|embed)\b|javascript\s*:", re.I)


def strings(node):
    """Every string in a figure's JSON, however deep."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def unannounced_nan(figure: dict) -> list[str]:
    """Heatmap cells that are NaN in a values trace and covered by no masked/nan overlay of the same head."""
    traces: dict[object, dict[str, list[np.ndarray]]] = defaultdict(lambda: {"values": [], "cover": []})
    problems = []
    for trace in figure.get("data", []):
        if trace.get("type") != "heatmap" or "z" not in trace:
            continue
        meta = trace.get("meta") or {}
        role = meta.get("role") if isinstance(meta, dict) else None
        z = decode(trace["z"])
        if role in ("masked", "nan"):
            traces[meta.get("head", 0)]["cover"].append(z)
        elif role == "values":
            traces[meta.get("head", 0)]["values"].append(z)
        elif z.dtype.kind == "f" and np.isnan(z).any() and "text" in trace:
            # a diagram (the reshape figure) leaves blank cells as NaN: only a NaN cell with a label is data
            labels = np.asarray(trace["text"], dtype=object)
            if labels.shape == z.shape:
                labelled = np.isnan(z) & (labels != "")
                if labelled.any():
                    problems.append(f"a heatmap without overlays has {int(labelled.sum())} labelled NaN cells")
        if role not in ("masked", "nan"):  # an overlay's "NaN" label is the announcement itself
            for label in strings(trace.get("text", [])):
                if re.fullmatch(r"\s*[-+]?nan\s*", label, re.I):
                    problems.append(f"a cell prints {label!r}")
    for head, found in traces.items():
        for z in found["values"]:
            if z.dtype.kind != "f" or not np.isnan(z).any():
                continue
            covered = np.zeros(z.shape, dtype=bool)
            for cover in found["cover"]:
                if cover.shape == z.shape:
                    covered |= cover == 1
            bare = np.isnan(z) & ~covered
            if bare.any():
                problems.append(f"head {head}: {int(bare.sum())} NaN cells with no overlay")
    return problems


# Pages that draw at least one chart on every run (the others draw theirs after a Train or Measure click).
CHART_PAGES = {"app.py", *(p for p in PAGES if p.split("/")[-1][:2] in ("1_", "2_", "3_", "4_", "7_", "8_", "9_"))}


def page_of(at: AppTest) -> str:
    """The page an AppTest runs, relative to the repository root."""
    return str(Path(at._script_path).resolve().relative_to(ROOT))


# Python's own exception texts: a notice in these words passed an exception's message to the page.
PYTHON_WORDS = re.compile(
    r"invalid literal for|could not convert|cannot convert float|with base 10|object is not|unsupported operand|"
    r"out of range for|not supported between|Traceback \(most recent"
)


def check_page(at: AppTest, user_text: list[str], where: str, errors_expected: bool = False) -> None:
    """The promises: no exception, no error box (a bad value gets a warning and a corrected value, and
    run_page turns exceptions into st.error, so an error box is a failure the page hid), a chart where the
    page draws one, no HTML from the user, no NaN unannounced."""
    assert not at.exception, f"{where}: " + "; ".join(f"{e.value}" for e in at.exception)[:3000]
    if not errors_expected:
        assert not at.error, f"{where}: the page shows an error: " + "; ".join(e.value for e in at.error)[:3000]
        if page_of(at) in CHART_PAGES:
            assert chart_elements(at), f"{where}: {page_of(at)} drew no chart"
    notices = [alert.value for alert in [*at.warning, *at.error, *at.info]]
    python_words = [n for n in notices if PYTHON_WORDS.search(n)]
    assert not python_words, f"{where}: a notice in Python's words: {python_words[0][:300]!r}"
    rendered = [
        *at.markdown,
        *at.caption,
        *at.warning,
        *at.error,
        *at.info,
        *at.success,
        *at.title,
        *at.header,
        *at.subheader,
    ]
    for element in rendered:
        body = element.proto.body
        outside_code = CODE_SPANS.sub("", body)
        assert not DANGEROUS.search(outside_code), f"{where}: markup outside code spans in {body[:300]!r}"
        if getattr(element.proto, "allow_html", False):
            leaked = [text for text in user_text if len(text) >= 6 and text in body]
            assert not leaked and "<script" not in body.lower(), f"{where}: user text in HTML {body[:300]!r}"
    for element in at.get("html"):
        # HTML the app builds (a chart's "Show as table") escapes every label: user text with markup in it must not
        # stand there raw. Plain words may (escaping leaves them as they are: "starts" is the book's own token too).
        body = element.proto.body
        raw = [t for t in user_text if len(t) >= 6 and t in body and set(t) & set("<>&\"'")]
        assert "<script" not in body.lower() and not raw, f"{where}: user text unescaped in HTML {raw[:3]}"
    announced = any("NaN" in alert.value for alert in [*at.warning, *at.error, *at.info])
    for text in printed(at):
        if re.search(r"\bnan\b", text, re.I):
            assert announced, f"{where}: NaN printed without a notice: {text[:300]!r}"
    for chart in chart_elements(at):
        figure = figure_of(chart.proto)
        bad = [s for s in strings(figure) if DANGEROUS.search(s)]
        assert not bad, f"{where}: markup in a figure: {bad[0][:300]!r}"
        missing = {trace.get("type", "scatter") for trace in figure["data"]} - CARTESIAN_TRACES
        assert not missing, f"{where}: {chart.proto.id}: trace types {missing} are not in the charts' plotly.js bundle"
        problems = unannounced_nan(figure)
        assert not problems, f"{where}: {chart.proto.id}: {problems[:3]}"
