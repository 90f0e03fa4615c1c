"""Issue 13: no function over 60 lines and no module over 400 lines in the app and the code it runs on.

Checked with ``ast`` over app.py, pages/, explorer/, mha_core/, harness/ and deploy/. bench/ is left out: its
scripts are measurements, read one at a time.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("app.py", "pages", "explorer", "mha_core", "harness", "deploy")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400


def checked_files() -> list[Path]:
    files = []
    for name in CHECKED:
        path = ROOT / name
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method, nested ones too, longer than ``limit`` lines (def to last line)."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit
    ]


def body(lines: int, indent: str = "    ") -> str:
    return "".join(f"{indent}x{n} = {n}\n" for n in range(lines))


def test_the_checker_finds_a_long_function_and_passes_a_short_one():
    assert long_functions(f"def short():\n{body(59)}") == []  # 60 lines: allowed
    assert long_functions(f"def long():\n{body(60)}") == [("long", 61)]
    assert long_functions(f"class A:\n    async def m(self):\n{body(60, ' ' * 8)}") == [("m", 61)]
    nested = f"def outer():\n    def inner():\n{body(60, ' ' * 8)}"
    assert sorted(long_functions(nested)) == [("inner", 61), ("outer", 62)]


def test_the_checked_folders_hold_the_app():
    names = {path.relative_to(ROOT).as_posix() for path in checked_files()}
    assert {"app.py", "explorer/views/step_through.py", "mha_core/attention/modules.py", "harness/server.py"} <= names
    assert len(names) > 40


def test_no_function_over_60_lines():
    too_long = [
        f"{path.relative_to(ROOT)}:{name} ({lines} lines)"
        for path in checked_files()
        for name, lines in long_functions(path.read_text(encoding="utf-8"))
    ]
    assert not too_long, "split along its seams: " + ", ".join(too_long)


def test_no_module_over_400_lines():
    too_long = [
        f"{path.relative_to(ROOT)} ({n} lines)"
        for path in checked_files()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not too_long, "split by what the parts hold: " + ", ".join(too_long)
