"""The Streamlit explorer, in two layers that the pages compose.

* ``explorer.views``: pure views, one module per page (named after it) plus the figure builders: a trace in,
  figures and text out. No streamlit.
* ``explorer.glue``: everything that touches Streamlit or the process: settings ⇄ URL, caches, the admission
  gate, the page boundary (``run_page``), idle clean-up.
"""
