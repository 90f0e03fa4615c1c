"""User text made safe for a notice, in one place: settings, real_fit and the pages quote through ``quote``.

Its own module, below settings and real_fit, so that real_fit need not import settings back. No streamlit.
"""

from __future__ import annotations

from explorer.views.markdown_text import code_span


def quote(value: object, limit: int = 40) -> str:
    """User text made safe to show in a notice: a code span (explorer.views.markdown_text), truncated."""
    return code_span(value, limit)
