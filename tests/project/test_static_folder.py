"""The app's static folder is in the repository (issue 42, item 6): with ``server.enableStaticServing`` on and no
folder, Streamlit printed "Static file serving is enabled, but no static folder found" at every fresh start (the
server fills the folder only after Streamlit has looked for it)."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_static_folder_is_tracked_where_static_serving_is_on():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["enableStaticServing"] is True
    tracked = subprocess.run(
        ["git", "ls-files", "--", "static"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "static/README.md" in tracked, tracked


def test_what_the_server_copies_into_it_stays_untracked():
    """plotly.js and deploy.md are copies made at start-up: ignored, so a server never leaves the tree dirty."""
    for name in ("plotly-1.0.0.0.min.js", "deploy.md"):
        ignored = subprocess.run(["git", "check-ignore", "-q", f"static/{name}"], cwd=ROOT, check=False)
        assert ignored.returncode == 0, name
