"""Colours Streamlit fixes in its own code that fail WCAG 2.1 AA's contrast (4.5:1 for text) on this app's themes,
mended by CSS on every page (axe-core's colour-contrast rule: tests/browser/test_axe_*_browser.py).

- st.code's syntax colours are Streamlit's fixed palette, whatever the theme: a keyword's #1c83e1 on the light code
  background was 3.4:1, a boolean's #21c354 2.1:1, on the dark one 4.1:1. Each is mixed 45% towards the code's own
  text colour (``currentColor`` in ``color`` is the inherited one), which keeps its hue and gives 5.2:1 or more on
  both themes (light: #111 on #eef1f6; dark: #f5f5f5 on #1c2230).
- A primary button's text is white: 2.1:1 on the dark theme's #8ab4f8 (chosen for 9.2:1 as text on the page), 3.5:1
  on its hover colour. On the dark theme it takes the page's background colour (9.2:1, 5.5:1 on hover).
- A disabled widget's label is #a0a0a0 (2.6:1 on white): a darker grey that still reads as inactive (5.7:1).
"""

from __future__ import annotations

import streamlit as st

# Streamlit 1.67's code palette (its theme's colors.*), by the Prism token classes it colours with each.
CODE_TOKENS = {
    ".token.keyword, .token.tag, .token.function, .token.class-name, .token.selector": "#1c83e1",
    ".token.number, .token.regex": "#0068c9",
    ".token.boolean, .token.constant, .token.symbol, .token.inserted": "#21c354",
    ".token.string, .token.char, .token.attr-value": "#09ab3b",
    ".token.operator, .token.entity, .token.decorator, .token.atrule": "#ed6f13",
    ".token.comment, .token.prolog, .token.doctype, .token.cdata, .token.punctuation": "#808495",
    ".token.important, .token.deleted": "#ff4b4b",
    ".token.url": "#6d3fc0",
}
TOWARDS_INK = 45  # % of the code's text colour mixed in: the lowest whole 5% that gives every token 4.5:1 with room


def code_css() -> str:
    """One rule per token group, scoped to st.code's blocks."""
    rules = []
    for selector, colour in CODE_TOKENS.items():
        scoped = ", ".join(f"[data-testid='stCode'] {part.strip()}" for part in selector.split(","))
        mixed = f"color-mix(in srgb, {colour} {100 - TOWARDS_INK}%, currentColor)"
        rules.append(f"{scoped} {{ color: {mixed} !important; }}")
    return "\n".join(rules)


DISABLED_LABEL = {"light": "#5f6368", "dark": "#9aa0a6"}  # 6.0:1 on white, 7.3:1 on #0b0d12
DARK_BUTTON_TEXT = "#0b0d12"  # the dark theme's background (.streamlit/config.toml)


def contrast_css(theme: str) -> str:
    """The page's contrast fixes for ``theme`` ("light" or "dark": the browser's, as for the figures)."""
    label = DISABLED_LABEL["dark" if theme == "dark" else "light"]
    rules = [
        code_css(),
        f"[data-testid='stElementContainer']:has(input:disabled) [data-testid='stWidgetLabel'] p "
        f"{{ color: {label} !important; }}",
    ]
    if theme == "dark":
        rules.append(
            f"[data-testid='stBaseButton-primary'], [data-testid='stBaseButton-primary'] p "
            f"{{ color: {DARK_BUTTON_TEXT} !important; }}"
        )
    return "<style>" + "\n".join(rules) + "</style>"


def apply() -> None:
    """The contrast fixes for the visitor's theme, on the page being drawn (a constant: nothing from the user)."""
    st.html(contrast_css("dark" if st.context.theme.type == "dark" else "light"))
