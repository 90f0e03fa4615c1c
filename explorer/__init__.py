"""Streamlit explorer: figure builders (pure plotly) and the Streamlit glue used by the pages."""
