"""README and docs/ point at files that exist: README is short and sends the reader to docs/ for the rest."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")  # [text](target) and ![alt](target), the anchor dropped


def local_links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(path.read_text(encoding="utf-8")) if "://" not in m.group(1)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_local_link_points_at_a_file(doc):
    missing = [target for target in local_links(doc) if not (doc.parent / target).exists()]
    assert not missing, f"{doc.name} links to {missing}, which do not exist"


def test_the_link_reader_sees_links_and_pictures():
    """The oracle itself: README links every docs page it names and shows its screenshot."""
    found = local_links(ROOT / "README.md")
    assert "docs/testing.md" in found and "docs/explorer.png" in found


def test_readme_stays_a_front_door():
    """About 200 lines (issue 35): what the app is, the two commands, the pages, the library, where the rest is."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_the_testing_page_shows_readmes_test_command():
    """docs/testing.md repeats the command that CI reads from README (the line after the marker's fence)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    command = lines[lines.index("<!-- test-command -->") + 2]
    assert command.startswith("python -m pip install")
    assert command in (ROOT / "docs" / "testing.md").read_text(encoding="utf-8").splitlines()
