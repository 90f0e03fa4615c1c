"""Every test file has its part of the tree as a marker, and `pytest -m fast` keeps to the library and the views."""

from __future__ import annotations

import tomllib
from pathlib import Path

from .markers import FAST_PARTS, PARTS, markers_of, part_of

ROOT = Path(__file__).resolve().parents[1]
TEST_FILES = sorted((ROOT / "tests").rglob("test_*.py"))


def test_every_test_file_has_a_part():
    unsorted = [str(p.relative_to(ROOT)) for p in TEST_FILES if part_of(p) is None]
    assert not unsorted, f"add {unsorted} to PARTS in tests/markers.py"


def test_every_listed_file_exists_once():
    listed = [name for names in PARTS.values() for name in names]
    assert sorted(set(listed)) == sorted(listed)
    assert set(listed) <= {p.name for p in TEST_FILES}


def test_every_marker_is_registered():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {line.split(":")[0] for line in config["markers"]}
    assert {*PARTS, "browser", "fast"} <= registered


def test_fast_runs_no_page_server_or_browser():
    fast = [p for p in TEST_FILES if "fast" in markers_of(p)]
    assert len(fast) >= 5 and all(part_of(p) in FAST_PARTS for p in fast)
    assert not [p.name for p in fast if "apptest_helpers" in p.read_text() or "StreamlitServer" in p.read_text()]
