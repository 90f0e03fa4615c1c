"""Install the system programs the tests drive, where they are missing: Debian's Chromium and HAProxy.

The second step of README's test command. On Debian or Ubuntu as root it runs ``apt-get install``; elsewhere it
prints what to install. In CI (``CI=true``, which ``.ci/run`` sets) a missing HAProxy stops the command, so the deploy
tests can never be skipped there; anywhere else it is named, the command goes on, and the tests that need it are
skipped, each saying what to install (``unavailable``; pytest's ``-ra`` summary lists them). A missing Chromium is
never fatal here: the browser fixture falls back to Playwright's own, and goes through ``unavailable`` if that fails.

    python tests/system_deps.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = {  # program -> (Debian packages, where Debian puts it, required in CI, the tests that need it)
    "chromium": (["chromium", "fonts-dejavu-core"], "/usr/bin/chromium", False, "tests/browser"),
    "haproxy": (["haproxy"], "/usr/sbin/haproxy", True, "tests/server/test_deploy.py (the HAProxy tests)"),
}


def in_ci() -> bool:
    """CI must run every browser and deploy test: there a missing program fails instead of skipping."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """A test that cannot run here for want of a system program: fails in CI, skips (naming ``reason``) elsewhere."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: required here)")
    pytest.skip(f"not run here: {reason}")


def found(program: str, path: str) -> bool:
    return shutil.which(program) is not None or Path(path).exists()


def install_help(name: str) -> str:
    return f"Debian/Ubuntu: apt-get install -y {' '.join(PACKAGES[name][0])}; macOS: brew install {name}"


def _apt_install(packages: list[str]) -> None:
    """apt-get as root; outside CI a failed install (no network, say) is reported below instead of stopping."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(["apt-get", "update"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], check=True, env=env)
    except subprocess.CalledProcessError:
        if in_ci():
            raise


def main() -> int:
    missing = [name for name, (_, path, _, _) in PACKAGES.items() if not found(name, path)]
    if not missing:
        return 0
    can_apt = shutil.which("apt-get") is not None and hasattr(os, "geteuid") and os.geteuid() == 0
    if can_apt:
        _apt_install([package for name in missing for package in PACKAGES[name][0]])
        missing = [name for name in missing if not found(name, PACKAGES[name][1])]
    for name in missing:
        then = "the fixture tries Playwright's own" if name == "chromium" else f"not run: {PACKAGES[name][3]}"
        print(f"{name} is missing ({then}): install it ({install_help(name)})", file=sys.stderr)
    return 1 if in_ci() and any(PACKAGES[name][2] for name in missing) else 0


if __name__ == "__main__":
    sys.exit(main())
