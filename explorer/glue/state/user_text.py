"""User text made safe for a notice, in one place: settings, real_fit and the pages quote through ``quote``.

Its own module, below settings and real_fit, so that real_fit need not import settings back. No streamlit.
"""

from __future__ import annotations

import re


def quote(value: object, limit: int = 40) -> str:
    """User text made safe to show in a notice: a code span, truncated, no backticks or newlines."""
    text = str(value)
    text = text if len(text) <= limit else text[:limit] + "…"
    text = re.sub(r"[`\r\n\t]", " ", text)
    return f"`{text}`" if text.strip() else "`(empty)`"
