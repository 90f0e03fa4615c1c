"""The two dependency files (requirements.txt for pip, Pipfile for Community Cloud) pin the same versions."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
