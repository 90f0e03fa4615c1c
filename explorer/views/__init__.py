"""Pure views: traces and reports in, plotly figures and text out. Never imports streamlit or explorer.glue."""
