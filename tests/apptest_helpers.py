"""Shared helpers for AppTest page tests: find charts, decode plotly's base64 arrays."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from explorer.views.figures import decode_array as decode

ROOT = Path(__file__).resolve().parents[1]


def run_page(path: str, timeout: float = 120, **query: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=timeout)  # paths relative to the repo root
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def charts(at: AppTest) -> dict[str, dict]:
    """Figure JSON of every plotly chart, by its widget key less the "chart_" prefix (panel key)."""
    found = {}
    for element in at.get("plotly_chart"):
        key = element.proto.id.split("-", 2)[-1].removeprefix("chart_")
        found[key] = json.loads(element.proto.spec)
    return found


def head_matrices(figure: dict, role: str = "values") -> list[np.ndarray]:
    """The z matrix of every trace with meta.role == role, in head order."""
    traces = [t for t in figure["data"] if (t.get("meta") or {}).get("role") == role]
    traces.sort(key=lambda t: t["meta"].get("head", 0))
    return [decode(t["z"]) for t in traces]


def texts(at: AppTest) -> str:
    """All text a user can read on the page (markdown, captions, notices, code), joined."""
    parts = []
    for kind in ("markdown", "caption", "warning", "error", "success", "info", "code", "title", "header", "subheader"):
        parts += [str(element.value) for element in getattr(at, kind)]
    return "\n".join(parts)
