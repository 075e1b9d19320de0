"""Running a command as another, unprivileged user, for the tests of permissions.

The suite runs as root on its machines, and root reads, lists and writes
anything: a permission test must drop to another user (``nobody``) to mean
anything.  Without ``setpriv`` or such a user the tests that need it are skipped.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

USER = "nobody"


def _uid_gid() -> tuple[int, int] | None:
    if shutil.which("setpriv") is None:
        return None
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def shared_directory() -> Iterator[Path]:
    """A fresh directory that both this user and ``nobody`` can use (mode 0777, outside root's tmp)."""
    directory = Path(tempfile.mkdtemp(prefix="autograd-lint-other-user-", dir="/tmp"))
    os.chmod(directory, 0o777)
    try:
        yield directory
    finally:
        for root, dirs, _ in os.walk(directory):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
        shutil.rmtree(directory, ignore_errors=True)


def run_as_other_user(
    args: list[str], cwd: Path, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m autograd_lint ARGS`` run by ``nobody``, or the test is skipped."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the command as another user")
    ids = _uid_gid()
    if ids is None:
        pytest.skip(f"needs setpriv and a user {USER!r}")
    uid, gid = ids
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all"]
    # An interpreter under root's home (a pyenv build with its libpython there) may not run for nobody.
    probe = subprocess.run([*prefix, sys.executable, "-c", "import autograd_lint"], cwd=cwd,
                           capture_output=True, text=True, timeout=timeout)
    if probe.returncode != 0:
        pytest.skip(f"{USER!r} cannot run this interpreter: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    command = [*prefix, sys.executable, "-m", "autograd_lint", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, input=input,
                          env={**os.environ, "HOME": str(cwd)})
