"""The layers import downwards only: pages → explorer.glue / explorer.views → mha_core, and no two modules share a name.

Read from the source (ast), not by importing, so a forbidden import fails here even on a path no test runs.
"""

import ast
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STDLIB_OK = {"__future__", "time", "typing", "urllib", "collections", "dataclasses", "functools", "math"}


def imports_of(path: Path) -> set[str]:
    """Absolute dotted names this file imports; relative imports resolved against its package."""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


PAGES = [ROOT / "app.py", *files("pages")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_import_only_streamlit_the_standard_library_and_explorer(page):
    allowed = ("streamlit", "explorer.glue", "explorer.views")
    wrong = sorted(
        name
        for name in imports_of(page)
        if name.split(".")[0] not in STDLIB_OK and not name.startswith(allowed) and name != "explorer"
    )
    assert not wrong, f"{page.name} imports {wrong}: pages lay out what explorer hands them"


@pytest.mark.parametrize("module", files("explorer/views"), ids=lambda p: p.name)
def test_views_are_pure(module):
    wrong = sorted(n for n in imports_of(module) if n.startswith(("streamlit", "explorer.glue")))
    assert not wrong, f"{module.name} imports {wrong}: views turn traces into figures, without Streamlit"


RUNS_A_MODEL = {"trace_forward", "run_trace", "separate_heads", "entropy_sweep", "build_module", "run_cross"}


def names_used(path: Path) -> set[str]:
    """Every plain name and attribute name the file reads, imported or called."""
    tree = ast.parse(path.read_text())
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }


@pytest.mark.parametrize("module", files("explorer/views"), ids=lambda p: p.name)
def test_views_never_run_a_model(module):
    """A view takes a run (mha_core.runs) and draws it: no forward pass happens in a view."""
    imported = {n.rsplit(".", 1)[-1] for n in imports_of(module)}
    used = names_used(module) | imported
    wrong = sorted((used & RUNS_A_MODEL) | {n for n in imported if n.startswith("run_")})
    assert not wrong, f"{module.name} uses {wrong}: the run belongs in mha_core, called from explorer.glue"


@pytest.mark.parametrize("module", files("mha_core"), ids=lambda p: p.name)
def test_the_core_knows_nothing_above_it(module):
    wrong = sorted(n for n in imports_of(module) if n.split(".")[0] in ("streamlit", "plotly", "explorer", "pandas"))
    assert not wrong, f"{module.name} imports {wrong}: mha_core is torch only"


def test_the_core_has_no_import_circle():
    """Read from the source, TYPE_CHECKING imports included: a module never imports one that imports it back."""
    core = {p.stem: p for p in files("mha_core") if p.stem != "__init__"}
    graph = {
        name: {n.split(".")[1] for n in imports_of(path) if n.startswith("mha_core.")} & set(core)
        for name, path in core.items()
    }

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start])

    circles = {name for name in graph if reaches(name, name, {name})}
    # Left: gpt imports gpt2_weights and gpt_training lazily (at call time), and they import gpt back.
    known = {"gpt", "gpt2_weights", "gpt_training"}
    assert circles <= known, f"{sorted(circles - known)} import themselves back through mha_core"


def test_no_two_modules_share_a_name():
    product = [ROOT / "app.py", *files("pages", "explorer", "mha_core", "harness", "bench", "deploy", "tests")]
    names = Counter(p.stem for p in product if p.stem not in ("__init__", "conftest"))
    assert [name for name, count in names.items() if count > 1] == []


@pytest.mark.parametrize("module", [*PAGES, *files("explorer", "mha_core")], ids=lambda p: p.name)
def test_the_app_never_imports_the_test_and_bench_harness(module):
    wrong = sorted(n for n in imports_of(module) if n.split(".")[0] in ("harness", "bench", "tests", "deploy"))
    assert not wrong, f"{module.name} imports {wrong}: harness/, bench/ and tests/ look at the app from outside"


def test_the_import_reader_sees_relative_and_absolute_imports():
    """The oracle itself: a view's relative import of glue would be caught."""
    found = imports_of(ROOT / "explorer" / "glue" / "teaching_cache.py")
    assert "explorer.views.step_through" in found and "explorer.glue.caches" in found


def defined_names(path: Path) -> set[str]:
    """The names a module defines at its top level (assignments, functions, classes), not those it imports."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def explorer_names_read(page: Path) -> list[tuple[str, str]]:
    """(explorer module, name) for each name a page takes from an explorer module: imported or read as attribute."""
    tree = ast.parse(page.read_text())
    modules, read = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("explorer"):
            for alias in node.names:
                if (ROOT / node.module.replace(".", "/") / f"{alias.name}.py").exists():
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                else:
                    read.append((node.module, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            read.append((modules[node.value.id], node.attr))
    return read


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_read_no_re_exported_name(page):
    """A page takes from explorer only what explorer defines: no view hands on an mha_core name it merely imports."""
    wrong = sorted(
        f"{module}.{name}"
        for module, name in explorer_names_read(page)
        if name not in defined_names(ROOT / (module.replace(".", "/") + ".py"))
    )
    assert not wrong, f"{page.name} reads {wrong}, which those modules only import"


@pytest.mark.parametrize("module", [*PAGES, *files("explorer", "mha_core")], ids=lambda p: p.name)
def test_an_import_inside_a_function_says_why(module):
    """Imports are at the top unless a cycle or a measured cost says otherwise, in a comment on the import's line."""
    lines = module.read_text().splitlines()
    inner = {
        node.lineno
        for function in ast.walk(ast.parse(module.read_text()))
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    }
    silent = [f"line {n}: {lines[n - 1].strip()}" for n in sorted(inner) if "#" not in lines[n - 1]]
    assert not silent, f"{module.name} imports inside a function without saying why: {silent}"
