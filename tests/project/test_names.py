"""Names say where things are: no module reaches into another's private names, and no module repeats its folder's name.

A name with a leading underscore is its module's own. When a second module needs it, it is shared, and shared names
are public and live where they belong (issue 45). Read from the source with ``ast``, so every file is checked.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("mha_core", "explorer", "harness", "bench", "tests")  # what "another module" can be
CHECKED = [
    ROOT / "app.py",
    *sorted(p for f in ("pages", "mha_core", "explorer", "harness", "bench") for p in (ROOT / f).rglob("*.py")),
]


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reaches(source: str, package: tuple[str, ...] = ()) -> list[str]:
    """Each ``from m import _x`` and ``m._x`` where m is a project module this source imported."""
    tree = ast.parse(source)
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            project = node.level > 0 or (node.module or "").split(".")[0] in PROJECT or package == ("bench",)
            for alias in node.names:
                if private(alias.name) and project:
                    found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
                elif project:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name.split(".")[0] in PROJECT}
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name)
        if attribute and node.value.id in modules:
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_uses_another_modules_private_names(path):
    package = path.relative_to(ROOT).parts[:-1]
    reaches = private_reaches(path.read_text(encoding="utf-8"), package)
    assert not reaches, f"{path.relative_to(ROOT)} uses another module's private names: {reaches}"


def test_the_private_name_reader_sees_both_forms():
    """The oracle: both ways of reaching in are caught; a module's own private names and a library's are not."""
    source = (
        "from mha_core.attention import modules\nfrom .style import _font, font\nimport sys\n"
        "modules._check_input(1)\nsys._getframe()\n_own = 1\n"
    )
    assert private_reaches(source) == ["line 2: from .style import _font", "line 4: modules._check_input"]


LIBRARY_FOLDERS = sorted(p.parent for f in ("mha_core", "explorer") for p in (ROOT / f).rglob("__init__.py"))


@pytest.mark.parametrize("folder", LIBRARY_FOLDERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_repeats_its_folders_name(folder):
    """``gpt/gpt_data.py`` says gpt twice: the folder is the subject, the module what it holds of it."""
    repeats = [p.name for p in folder.glob("*.py") if p.stem.startswith(folder.name)]
    assert not repeats, f"{folder.relative_to(ROOT)}/ holds {repeats}: a module's name need not repeat its folder's"


def test_the_library_is_grouped_into_folders():
    """A newcomer finds the GPT, the variants and the caches by folder: no folder is a long corridor again."""
    crowded = {
        str(folder.relative_to(ROOT)): n
        for folder in LIBRARY_FOLDERS
        if (n := len([p for p in folder.glob("*.py") if p.name != "__init__.py"])) > 20 and "views" not in folder.parts
    }  # explorer/views is one module per page, found by the page's name
    assert len(LIBRARY_FOLDERS) >= 12 and not crowded, crowded
