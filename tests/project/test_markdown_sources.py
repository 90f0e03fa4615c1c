"""Markdown built from code names or user text goes through explorer.views.markdown_text, checked in the source.

Streamlit's markdown read Step through's "built in __init__" as "built in **init**": a word that starts or ends with
an underscore opens or closes emphasis, ``$…$`` is maths and ``~x~`` strikes out. These tests read every string the
pages, views and glue write and fail on such text outside a code span, and on user text put into a notice raw.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "explorer").rglob("*.py")])
CODE_SPAN = re.compile(r"`[^`]*`")
# A word that opens or closes underscore emphasis (__init__, _private, masked_fill_), maths, strike-through.
MARKUP = re.compile(r"(?<![\w\\])_+[A-Za-z]|[A-Za-z0-9]_+(?![\w{])|\$[^$\s][^$]*\$|(?<!~)~[^~\s][^~]*~(?!~)")
NOT_MARKDOWN = re.compile(r"[{;]\s*$|^\s*[\[<.]|\{[^}]*:[^}]*;")  # CSS rules, HTML, selectors
# Calls whose string argument Streamlit renders as markdown.
MARKDOWN_CALLS = {"markdown", "caption", "info", "warning", "error", "success", "subheader", "header", "title", "write"}
# Names that hold a visitor's text or token text: interpolated into markdown, each must pass through a helper.
USER_TEXT = re.compile(r"\b(labels?|text|sentence|shown|written|corpus)\b")
HELPERS = ("escape_markdown", "code_span", "quote")


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
    }


def _strings(path: Path):
    """(line, text) of every string that is not a docstring; an f-string as one text, each value standing as "x"."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(part) for part in node.values)
            parts = [p.value if isinstance(p, ast.Constant) else "x" for p in node.values]
            yield node.lineno, "".join(str(p) for p in parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def test_no_code_name_reads_as_markup_outside_a_code_span():
    """``__init__``, ``masked_fill_``, ``$x$``: in a code span (`…`) or escaped, never bare in a shown string."""
    found = []
    for path in SOURCES:
        for line, text in _strings(path):
            if " " not in text.strip() or NOT_MARKDOWN.search(text):
                continue  # a key, an identifier, a CSS or HTML fragment: no markdown reads it
            bare = MARKUP.search(CODE_SPAN.sub("", text))
            if bare:
                found.append(f"{path.relative_to(ROOT)}:{line}: {bare.group()!r} in {text[:80]!r}")
    assert not found, "\n".join(found)


def _bare_user_text(call: ast.Call) -> list[str]:
    found = []
    for arg in call.args[:1]:
        for part in ast.walk(arg):
            if not isinstance(part, ast.FormattedValue):
                continue
            source = ast.unparse(part.value)
            counted = re.sub(r"len\([^)]*\)", "", source)  # a count of labels is a number, not their text
            if USER_TEXT.search(counted) and not any(helper in source for helper in HELPERS):
                found.append(source)
    return found


def test_user_text_in_a_notice_passes_through_a_helper():
    """An f-string shown as markdown that puts token or visitor text in ({label}, {text}) escapes it or quotes it."""
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            is_markdown = isinstance(node, ast.Call) and getattr(node.func, "attr", None) in MARKDOWN_CALLS
            for source in _bare_user_text(node) if is_markdown else []:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {{{source}}}")
    assert not found, "\n".join(found)


def test_the_rules_catch_what_they_name():
    """The patterns fire on the bugs they exist for and stay quiet on the fixed forms."""
    assert MARKUP.search("built in __init__ (line 10)")
    assert MARKUP.search("and masked_fill_ writes")
    assert MARKUP.search("costs $5 or $6")
    assert not MARKUP.search(CODE_SPAN.sub("", "built in `__init__` and `masked_fill_`"))
    assert not MARKUP.search("head_dim = d_out // num_heads, W_QK and x_i")
    call = ast.parse('st.markdown(f"rows are {label} and {escape_markdown(text)}")').body[0].value
    assert _bare_user_text(call) == ["label"]
