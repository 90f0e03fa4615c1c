"""Streamlit's own share of a slider move: the Explorer's settings sidebar, title and shape line, and no figure.
(No page links: they link the app's pages, and this script is not that app.)

bench/browser_timing.py moves this page's num_tokens slider beside the app's, in the same run: what is left of the
app's move past this and plotly's own react is the app's (its server work and the elements it draws).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st  # noqa: E402

from explorer.glue.frame import sidebar  # noqa: E402

st.set_page_config(page_title="Streamlit floor", layout="wide")
sidebar.presenter_toggle()
settings = sidebar.settings_sidebar()
st.title("Multi-Head Attention Explorer")
st.markdown(
    f"`attn_weights` · shape (b, h, T, T) = "
    f"({settings.batch_size}, {settings.num_heads}, {settings.num_tokens}, {settings.num_tokens})"
)
