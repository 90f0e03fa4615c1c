"""Install the system programs the tests drive, where they are missing: Debian's Chromium and HAProxy.

The second step of README's test command, so that one command passes every test on a fresh machine. On Debian or
Ubuntu as root it runs ``apt-get install``; elsewhere it prints what to install. A missing Chromium is not fatal
here (the browser fixture falls back to Playwright's own); a missing HAProxy is, since nothing else can stand in.

    python tests/system_deps.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES = {  # program -> (Debian packages, where Debian puts it, required)
    "chromium": (["chromium", "fonts-dejavu-core"], "/usr/bin/chromium", False),
    "haproxy": (["haproxy"], "/usr/sbin/haproxy", True),
}


def found(program: str, path: str) -> bool:
    return shutil.which(program) is not None or Path(path).exists()


def main() -> int:
    missing = [name for name, (_, path, _) in PACKAGES.items() if not found(name, path)]
    if not missing:
        return 0
    packages = [package for name in missing for package in PACKAGES[name][0]]
    can_apt = shutil.which("apt-get") is not None and hasattr(os, "geteuid") and os.geteuid() == 0
    if can_apt:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], check=True, env=env)
        missing = [name for name in missing if not found(name, PACKAGES[name][1])]
    for name in missing:
        print(
            f"{name} is missing: install it (Debian/Ubuntu: apt-get install -y {' '.join(PACKAGES[name][0])}; "
            f"macOS: brew install {name})",
            file=sys.stderr,
        )
    return 1 if any(PACKAGES[name][2] for name in missing) else 0


if __name__ == "__main__":
    sys.exit(main())
