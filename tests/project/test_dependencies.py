"""The two dependency files (requirements.txt for pip, Pipfile for Community Cloud) pin the same versions, and
every package the app imports directly is pinned there."""

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s#]+)", line.strip())
        if match:
            pins[match[1].lower()] = match[2]
    return pins


def test_pipfile_pins_equal_requirements_and_take_torch_from_the_cpu_index():
    pipfile = tomllib.loads((ROOT / "Pipfile").read_text())
    packages = pipfile["packages"]
    pins = {}
    for name, spec in packages.items():
        version = spec if isinstance(spec, str) else spec["version"]
        pins[name.lower()] = version.removeprefix("==").split("+")[0]
    assert pins == requirement_pins()
    assert packages["torch"]["index"] == "pytorch-cpu"
    cpu_index = next(s for s in pipfile["source"] if s["name"] == "pytorch-cpu")
    assert cpu_index["url"] == "https://download.pytorch.org/whl/cpu"
    assert requirement_pins()["torch"] == "2.13.0"  # local installs take the CPU wheel of this exact release


APP_SOURCES = ["app.py", "pages", "explorer", "mha_core"]
DISTRIBUTIONS = {"sklearn": "scikit-learn", "PIL": "pillow", "yaml": "pyyaml"}  # import name -> pip name


def imported_top_level_packages() -> set[str]:
    """Top-level names the app's own code imports (absolute imports only), less the standard library's."""
    names = set()
    for entry in APP_SOURCES:
        path = ROOT / entry
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text())):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    local = {"explorer", "mha_core", "bench"}
    return {n for n in names if n not in sys.stdlib_module_names and n not in local}


def test_every_directly_imported_package_is_pinned():
    imported = imported_top_level_packages()
    assert {"streamlit", "torch", "plotly", "numpy", "pandas"} <= imported  # the scan sees the app's imports
    missing = {DISTRIBUTIONS.get(n, n).lower() for n in imported} - set(requirement_pins())
    assert not missing, f"imported but not in requirements.txt: {sorted(missing)}"
