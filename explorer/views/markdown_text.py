"""Code names and user text inside markdown, in one place: every page, view and notice that puts a code name
(``__init__``) or a visitor's text into a markdown string passes it through here, so markdown never reads it as markup.

Streamlit's markdown reads ``__init__`` as bold "init", ``$x$`` as maths, ``:red[x]`` as colour and ``~x~`` as struck
out; a backslash before each punctuation mark, or a code span, keeps the text as typed. No streamlit: views use it too.
"""

from __future__ import annotations

import re

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$:=^&%])")


def escape_markdown(value: object) -> str:
    """Plain text (a token, a name, a sentence) inside markdown: every ASCII punctuation mark that markdown or
    Streamlit's directives read is backslash-escaped, so the text shows exactly as given, in body type."""
    return _PUNCTUATION.sub(r"\\\1", str(value))


def code_span(value: object, limit: int | None = None) -> str:
    """Code or user text as a code span (monospace, never read as markup), cut to ``limit`` characters; a backtick or
    line break inside would end the span or the paragraph, so each becomes a space. Empty text reads ``(empty)``."""
    text = str(value)
    text = text if limit is None or len(text) <= limit else text[:limit] + "…"
    text = re.sub(r"[`\r\n\t]", " ", text)
    return f"`{text}`" if text.strip() else "`(empty)`"
