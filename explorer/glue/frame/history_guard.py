"""The browser history's guard: a page opened by a link is one entry, so Back returns to the page before it
(history_guard.js says how). A hidden element in the sidebar; its script runs once per browser tab."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

HISTORY_JS = Path(__file__).with_name("history_guard.js").read_text(encoding="utf-8")
KEY = "mha_history_guard"
HIDDEN_CSS = f".st-key-{KEY} {{ display: none !important; }}"  # no box, no gap in the sidebar

_guard = st.components.v2.component("mha_history_guard", js=HISTORY_JS, css=HIDDEN_CSS, isolate_styles=False)


def install_history_guard() -> None:
    """Mount the guard in the sidebar (every page draws the sidebar's links, so every page installs it)."""
    with st.sidebar:
        _guard(key=KEY)
