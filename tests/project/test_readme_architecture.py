"""README's Architecture block against the tree: what it names exists, and every library module is named there.

The block is a table of entries: a path at the start of a line (``explorer/glue/``), its description indented below.
A name with a slash (``pages/*.py``, ``tests/markers.py``) is a path from the root; a bare ``name.py`` or ``name/``
is found anywhere under its entry's folder (``figures/`` and its modules under ``explorer/views/``), else at the
root (``app.py``, ``tests/``).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mha_core", "explorer/glue", "explorer/views")  # every module under these must be named in the block
NAME = re.compile(r"(?<![\w./*-])([\w*]+(?:/[\w*.]+)*(?:\.py|/))(?![\w/])")


def architecture_block() -> str:
    """The first fenced block under README's "## Architecture" heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```\n(.*?)```", section, re.S)
    assert match, "README's Architecture section has no fenced block"
    return match.group(1)


def entries() -> dict[str, str]:
    """Each entry's path column (``explorer/glue/``) and its whole text, continuation lines included."""
    found: dict[str, str] = {}
    key = None
    for line in architecture_block().splitlines():
        if line and not line[0].isspace():
            key = re.split(r"\s{2,}", line, maxsplit=1)[0]
            found[key] = line
        elif key is not None:
            found[key] += "\n" + line
    return found


def folders_of(key: str) -> list[Path]:
    """The folders an entry's bare names are looked for under, before the root: the folders in its path column."""
    return [ROOT / p.strip() for p in key.split(",") if p.strip().endswith("/")]


def exists(name: str, folders: list[Path]) -> bool:
    if "/" in name.rstrip("/"):
        return any(ROOT.glob(name.rstrip("/")))
    want_dir = name.endswith("/")
    stem = name.rstrip("/")
    found = [p for folder in folders for p in folder.rglob(stem)] + [ROOT / stem]
    return any(p.exists() and p.is_dir() == want_dir for p in found)


def named_in(text: str) -> set[str]:
    return {m.group(1) for m in NAME.finditer(text)}


def test_the_block_has_an_entry_for_each_layer():
    keys = entries()
    for part in ("app.py, pages/*.py", "explorer/glue/", "explorer/views/", "mha_core/"):
        assert part in keys, f"README's Architecture block has no entry for {part}; it has {sorted(keys)}"


def test_every_name_in_the_block_exists():
    missing = sorted(
        f"{name} (under {key})"
        for key, text in entries().items()
        for name in named_in(text)
        if not exists(name, folders_of(key))
    )
    assert not missing, f"README's Architecture block names what the tree does not have: {missing}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_of_the_library_is_named_in_the_block(package):
    text = entries().get(f"{package}/", "")
    named = {Path(n.rstrip("/")).name for n in named_in(text)}
    modules = sorted(p for p in (ROOT / package).rglob("*.py") if p.name != "__init__.py")
    unnamed = [str(p.relative_to(ROOT)) for p in modules if p.name not in named]
    assert not unnamed, f"README's Architecture block leaves out {unnamed}: add each to the {package}/ entry"


def test_the_names_are_found():
    """The parser sees the names it checks: a block whose names it missed would pass the tests above vacuously."""
    assert {"settings.py", "figures/", "runs.py"} <= {n for t in entries().values() for n in named_in(t)}
