"""Every test file is in the folder of its part of the tree, that folder is its marker, and `pytest -m fast` keeps to
the library and the views."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..markers import FAST_PARTS, NOT_FAST, PARTS, TESTS, markers_of, part_of

ROOT = Path(__file__).resolve().parents[2]
TEST_FILES = sorted(TESTS.rglob("test_*.py"))


def test_every_test_file_is_in_a_part_folder():
    unsorted = [str(p.relative_to(ROOT)) for p in TEST_FILES if part_of(p) is None]
    assert not unsorted, f"move {unsorted} into the tests/<part>/ folder of what it tests ({sorted(PARTS)})"


def test_every_folder_is_a_part_and_the_part_is_the_folder():
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    stray, missing = sorted(folders - set(PARTS)), sorted(set(PARTS) - folders)
    assert not stray and not missing, f"folders without a marker: {stray}, parts without a folder: {missing}"
    assert all(any((TESTS / part).glob("test_*.py")) for part in PARTS)
    assert part_of(TESTS / "views" / "test_figures.py") == "views"
    assert part_of(TESTS / "test_new.py") is None  # a new file in tests/ itself waits to be moved
    assert markers_of(TESTS / "mha_core" / "test_book.py") == ["mha_core", "fast"]
    assert markers_of(TESTS / "mha_core" / NOT_FAST[0]) == ["mha_core"]


def test_every_marker_is_registered():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {line.split(":")[0] for line in config["markers"]}
    assert {*PARTS, "fast"} <= registered


def test_fast_runs_no_page_server_or_browser():
    fast = [p for p in TEST_FILES if "fast" in markers_of(p)]
    assert len(fast) >= 5 and all(part_of(p) in FAST_PARTS for p in fast)
    assert not [p.name for p in fast if "apptest_helpers" in p.read_text() or "StreamlitServer" in p.read_text()]
    assert all((TESTS / "mha_core" / name).exists() for name in NOT_FAST)
