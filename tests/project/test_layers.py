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
    """A view takes a run (mha_core.runs.forward) and draws it: no forward pass happens in a view."""
    imported = {n.rsplit(".", 1)[-1] for n in imports_of(module)}
    used = names_used(module) | imported
    wrong = sorted((used & RUNS_A_MODEL) | {n for n in imported if n.startswith("run_")})
    assert not wrong, f"{module.name} uses {wrong}: the run belongs in mha_core, called from explorer.glue"


@pytest.mark.parametrize("module", files("mha_core"), ids=lambda p: p.name)
def test_the_core_knows_nothing_above_it(module):
    wrong = sorted(n for n in imports_of(module) if n.split(".")[0] in ("streamlit", "plotly", "explorer", "pandas"))
    assert not wrong, f"{module.name} imports {wrong}: mha_core is torch only"


def module_name(path: Path) -> str:
    """The dotted name a file is imported by (a package is its ``__init__``); pages get theirs from their path."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(paths: list[Path]) -> dict[str, set[str]]:
    """Module → the modules of this set it imports anywhere in its source: at the top, in a function, or under
    TYPE_CHECKING. ``from a import b`` is an import of a.b when that is a module, else of a (its ``__init__``)."""
    names = {module_name(p): p for p in paths}

    def owner(name: str) -> str | None:
        parts = name.split(".")
        return next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in names), None)

    def imported(path: Path) -> set[str | None]:
        package = module_name(path).split(".")[: None if path.stem == "__init__" else -1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {owner(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
                found |= {f"{module}.{a.name}" if f"{module}.{a.name}" in names else owner(module) for a in node.names}
        return found

    return {name: imported(path) - {None, name} for name, path in names.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path a → … → a for every module that reaches itself, each circle once (found by depth-first search)."""
    found, seen_sets = [], set()

    def walk(path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                key = frozenset(path)
                if key not in seen_sets:
                    seen_sets.add(key)
                    found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:  # each circle is walked from its smallest name only
                walk([*path, nxt])

    for start in sorted(graph):
        walk([start])
    return found


def test_the_circle_finder_finds_circles_of_any_length():
    """The oracle itself, on made-up graphs: a two-step circle, a three-step one, and none in a chain."""
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"b"}, "e": {"a"}}
    assert circles(graph) == [["a", "b", "a"], ["b", "c", "d", "b"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_import_graph_sees_imports_inside_functions():
    """settings imports real_fit inside ``_fit_model`` (it loads streamlit): the graph must still hold that arrow."""
    graph = import_graph(files("explorer"))
    assert "explorer.glue.state.real_fit" in graph["explorer.glue.state.settings"]
    assert "explorer.glue.cached.real_models" in graph["explorer.glue.state.real_fit"]


def test_no_module_imports_itself_back():
    """No import circle in the app: not at the top, not inside a function, not under TYPE_CHECKING.

    A circle works only in the order Python happens to import the modules, and says two layers are one.
    """
    graph = import_graph([*PAGES, *files("explorer", "mha_core")])
    found = [" → ".join(circle) for circle in circles(graph)]
    assert found == [], f"import circles: {found}"


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
    found = imports_of(ROOT / "explorer" / "views" / "attention_explorer.py")
    assert "explorer.views.figures" in found and "mha_core.attention.listing.init_line" in found


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
