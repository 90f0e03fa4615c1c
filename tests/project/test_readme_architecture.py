"""README's Architecture block and docs/architecture.md's folder table against the tree.

README's block is short (at most 25 lines): a path at the start of a line (``explorer/glue/``), indented sub-folders
below their parent (``  state/``), each with its subject. It must name every sub-package of the library, and
everything it names must exist. docs/architecture.md holds the details: a table with one row per package folder,
naming each of its modules in backticks; every module of the folder is named in its row, and every name at the top
level of a row (outside parentheses) is a module, sub-folder or file of that folder.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("mha_core", "explorer/glue", "explorer/views")  # every package under these has a row in the table
README_MAX_LINES = 25


def architecture_block() -> str:
    """The first fenced block under README's "## Architecture" heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```\n(.*?)```", section, re.S)
    assert match, "README's Architecture section has no fenced block"
    return match.group(1)


def block_paths() -> list[str]:
    """Each line's path column, sub-folders joined to the top-level entry above them (``explorer/glue/state/``)."""
    paths, parent = [], ""
    for line in architecture_block().splitlines():
        if not line.strip():
            continue
        column = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        if line[0].isspace():
            paths.append(parent + column)
        else:
            parent = column
            paths.extend(p.strip() for p in column.split(","))
    return paths


def packages() -> list[Path]:
    return sorted(p.parent for folder in LIBRARY for p in (ROOT / folder).rglob("__init__.py"))


def test_the_block_fits_on_one_screen():
    lines = architecture_block().splitlines()
    assert 10 <= len(lines) <= README_MAX_LINES, f"README's Architecture block has {len(lines)} lines"


def test_every_path_in_the_block_exists():
    missing = [p for p in block_paths() if not any(ROOT.glob(p.rstrip("/")))]
    assert not missing, f"README's Architecture block names what the tree does not have: {missing}"


def test_the_block_names_every_sub_package_of_the_library():
    named = set(block_paths())
    wanted = [f"{p.relative_to(ROOT)}/" for p in packages() if p.parent.name in ("mha_core", "glue")]
    assert len(wanted) >= 8, wanted  # the oracle: mha_core's and explorer/glue's sub-packages were found
    missing = [w for w in wanted if w not in named]
    assert not missing, f"README's Architecture block leaves out {missing}"


def folder_table() -> dict[str, str]:
    """docs/architecture.md's rows whose first cell is a folder: folder → the row's last cell (its modules)."""
    rows = {}
    for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        folder = cells[0].strip("`")
        if len(cells) == 3 and re.fullmatch(r"`[\w/]+/`", cells[0]) and folder.startswith(LIBRARY):
            rows.setdefault(folder, cells[2])
    return rows


def top_level_names(cell: str) -> list[str]:
    """Backticked names outside parentheses: what the row says its folder holds."""
    depth, outside = 0, []
    for char in cell:
        depth += char == "("
        outside.append(char if depth == 0 else " ")
        depth -= char == ")" and depth > 0
    return re.findall(r"`([^`]+)`", "".join(outside))


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_is_named_in_its_folders_row(package):
    folder = f"{package.relative_to(ROOT)}/"
    row = folder_table().get(folder)
    assert row is not None, f"docs/architecture.md's folder table has no row for {folder}"
    modules = sorted(p.stem for p in package.glob("*.py") if p.name != "__init__.py")
    unnamed = [m for m in modules if f"`{m}`" not in row]
    assert not unnamed, f"docs/architecture.md's row for {folder} leaves out {unnamed}"


@pytest.mark.parametrize("folder", sorted(folder_table()))
def test_every_name_in_a_row_is_in_its_folder(folder):
    names = top_level_names(folder_table()[folder])
    assert names, f"the row for {folder} names nothing"
    missing = [n for n in names if not (ROOT / folder / f"{n}.py").exists() and not (ROOT / folder / n).exists()]
    assert not missing, f"docs/architecture.md's row for {folder} names what the folder does not have: {missing}"


def test_the_parsers_see_the_names():
    """The oracles: a table or block whose names the parsers missed would pass the tests above vacuously."""
    assert "mha_core/gpt/" in block_paths() and "explorer/glue/state/" in block_paths()
    assert {"modules", "kernels", "masks"} <= set(top_level_names(folder_table()["mha_core/attention/"]))
    assert top_level_names("`a` (`b`, (`c`)) `d`") == ["a", "d"]
