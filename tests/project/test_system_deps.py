"""README's test command without root: a missing HAProxy or Chromium is named and its tests skip; in CI they fail."""

from __future__ import annotations

import pytest

from .. import system_deps


@pytest.fixture
def nothing_installed(monkeypatch):
    """No program found and no apt-get: a machine without root."""
    monkeypatch.setattr(system_deps.shutil, "which", lambda name: None)
    monkeypatch.setattr(system_deps, "found", lambda program, path: False)


def test_without_root_the_command_goes_on_and_names_what_it_cannot_run(nothing_installed, monkeypatch, capsys):
    monkeypatch.delenv("CI", raising=False)
    assert system_deps.main() == 0
    said = capsys.readouterr().err
    assert "haproxy is missing" in said and "not run: tests/server/test_deploy.py" in said
    assert "chromium is missing" in said and "apt-get install -y chromium" in said


def test_in_ci_a_missing_haproxy_stops_the_command(nothing_installed, monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert system_deps.main() == 1


def test_a_missing_program_skips_its_test_here_and_fails_it_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not run here: no haproxy"):
        system_deps.unavailable("no haproxy")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no haproxy"):
        system_deps.unavailable("no haproxy")
