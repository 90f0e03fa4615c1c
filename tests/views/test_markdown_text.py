"""explorer.views.markdown_text: text escaped by it reads, once markdown renders it, exactly as it was given.

markdown-it-py (CommonMark, with GitHub's strike-through as Streamlit's remark-gfm has it) stands in for the browser's
renderer; ``$…$`` and ``:red[…]`` are Streamlit's own and are checked on the escaped source.
"""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from explorer.views.markdown_text import code_span, escape_markdown

RENDER = MarkdownIt("commonmark").enable("strikethrough")
HOSTILE = [
    "__init__",
    "built in __init__ and masked_fill_",
    "*args, **kwargs",
    "<|endoftext|>",
    "# heading? [link](http://x) ~gone~ `tick`",
    "1. not a list",
    "a\\b",
]


def rendered_text(markdown: str) -> str:
    """The text a reader sees: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", RENDER.render(markdown))).strip()


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_renders_as_typed(text):
    markdown = escape_markdown(text)
    assert rendered_text(markdown) == text
    assert not re.search(r"<(strong|em|s|del|h\d|a|ol|code)\b", RENDER.render(markdown))


def test_streamlit_directives_are_escaped():
    """Streamlit reads $…$ as maths and :red[…] as colour before markdown: both marks lose their meaning."""
    assert escape_markdown("$x$ :red[y]") == r"\$x\$ \:red\[y\]"


@pytest.mark.parametrize("text", HOSTILE)
def test_code_span_keeps_code_names_as_typed(text):
    markdown = code_span(text)
    assert RENDER.render(markdown).startswith("<p><code>")
    assert rendered_text(markdown) == text.replace("`", " ").strip()


def test_code_span_cuts_and_names_empty_text():
    assert code_span("x" * 50, limit=40) == "`" + "x" * 40 + "…`"
    assert code_span(" \n") == "`(empty)`"
