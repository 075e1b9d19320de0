"""Running the real command as an unprivileged user, for tests of permission errors.

Root reads unreadable files and writes into read-only directories, and CI runs as root:
such a test then runs the command as user ``nobody`` (``setpriv``, else ``runuser``), in a
folder nobody can reach (pytest's ``tmp_path`` is readable by its owner only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def as_nobody() -> list[str]:
    """The command prefix that runs a program as user nobody; empty when not root.

    Skips the test where root cannot drop privileges (no setpriv or runuser) or where
    nobody cannot import this checkout (a checkout under a private home folder)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    elif shutil.which("runuser"):
        prefix = ["runuser", "-u", "nobody", "--"]
    else:
        pytest.skip("running as root, and neither setpriv nor runuser is installed to drop privileges")
    probe = subprocess.run([*prefix, sys.executable, "-c", "import autograd_lint"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"user nobody cannot import autograd_lint from this checkout: {probe.stderr.strip()[-200:]}")
    return prefix


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A temporary folder that every user can enter (``hand_over`` then gives it to nobody)."""
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        root.chmod(0o755)
        yield root


def hand_over(prefix: list[str], *paths: Path) -> None:
    """Make ``paths`` belong to nobody when the command runs as nobody."""
    if prefix:
        for path in paths:
            shutil.chown(path, "nobody", "nogroup")


def check(prefix: list[str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``autograd-lint check ARGS`` in ``cwd``, as the user of ``prefix``."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "autograd_lint", "check", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )
