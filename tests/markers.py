"""Which part of the tree each test file tests: the folder it is in, tests/<part>/, is its pytest marker (registered
in pyproject.toml, set by conftest). ``pytest -m views`` runs the view tests, ``pytest -m fast`` the library and view
tests that run no server, no AppTest and no training.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
PARTS = ("mha_core", "views", "glue", "pages", "server", "browser", "project")  # described in pyproject.toml
FAST_PARTS = ("mha_core", "views")
# Library tests that train models, left out of `fast`: 58 s and 29 s here (2 CPUs shared), the rest of fast ~30 s.
NOT_FAST = ("test_training.py", "test_gpt_training.py")


def part_of(path: Path) -> str | None:
    """The marker of a test file: its folder under tests/; None for a file outside every part's folder."""
    try:
        folders = Path(path).resolve().relative_to(TESTS).parts[:-1]
    except ValueError:
        return None
    return folders[0] if folders and folders[0] in PARTS else None


def markers_of(path: Path) -> list[str]:
    part = part_of(path)
    if part is None:
        return []
    return [part, "fast"] if part in FAST_PARTS and Path(path).name not in NOT_FAST else [part]
