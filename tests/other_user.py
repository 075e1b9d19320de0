"""Running autograd-lint as another, unprivileged user (``nobody``), for the tests of permissions.

Root reads unreadable files, lists unlistable directories and writes into
read-only ones, and the suite runs as root on its machines and in CI: a
permission test drops to ``nobody`` (``setpriv``, else ``runuser``) to mean
anything, in a folder under ``/tmp`` that every user can enter (pytest's
``tmp_path`` is its owner's only).  Where root cannot drop privileges, or
``nobody`` cannot run this interpreter and checkout, the test is skipped
with the reason.  The one helper for the whole suite (issue 26).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

USER = "nobody"


def _ids() -> tuple[int, int]:
    """nobody's uid and gid (its own group, whatever the system names it); skips without such a user."""
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"running as root, and there is no user {USER!r} to drop privileges to")
    return entry.pw_uid, entry.pw_gid


def as_nobody() -> list[str]:
    """The command prefix that runs a program as nobody; empty when the tests do not run as root
    (their own user has no privilege to drop)."""
    if os.geteuid() != 0:
        return []
    uid, gid = _ids()
    if shutil.which("setpriv"):
        prefix = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all"]
    elif shutil.which("runuser"):
        prefix = ["runuser", "-u", USER, "--"]
    else:
        pytest.skip("running as root, and neither setpriv nor runuser is installed to drop privileges")
    # An interpreter under root's home (a pyenv build with its libpython there), or a checkout in a
    # private folder, may not run for nobody.
    probe = subprocess.run([*prefix, sys.executable, "-c", "import autograd_lint"], cwd="/",
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"user {USER!r} cannot import autograd_lint with this interpreter: {why}")
    return prefix


def as_other_user() -> list[str]:
    """:func:`as_nobody` for a test that needs a second user (a file owned by another), so root."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the command as another user")
    return as_nobody()


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A fresh folder under /tmp that every user can enter and write (mode 0777), removed afterwards
    with whatever a test locked inside it."""
    root = Path(tempfile.mkdtemp(prefix="autograd-lint-other-user-", dir="/tmp"))
    root.chmod(0o777)
    try:
        yield root
    finally:
        for folder, names, _ in os.walk(root):
            for name in names:
                os.chmod(os.path.join(folder, name), 0o755)
        shutil.rmtree(root, ignore_errors=True)


def hand_over(prefix: list[str], *paths: Path) -> None:
    """Make ``paths`` nobody's when the command runs as nobody."""
    if prefix:
        uid, gid = _ids()
        for path in paths:
            os.chown(path, uid, gid)


def autograd_lint(
    prefix: list[str], *args: str, cwd: Path, input: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m autograd_lint ARGS`` in ``cwd``, as the user of ``prefix`` (with its HOME there)."""
    env = {**os.environ, "HOME": str(cwd)} if prefix else None
    return subprocess.run([*prefix, sys.executable, "-m", "autograd_lint", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, input=input, env=env)
