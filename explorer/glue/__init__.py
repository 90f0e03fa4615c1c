"""Streamlit glue: settings ⇄ URL, caches shared by sessions, the admission gate and the page boundary."""
