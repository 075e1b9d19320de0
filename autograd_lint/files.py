"""Writing files the one safe way, for every command that writes (``--fix``, ``gen-tests``,
``pragma``, recordings).

A write goes to a temporary file in the target's own directory, then replaces the
target in one ``os.replace``: a reader sees the old file or the new one, never a
part, and a failure leaves the old file in place.  A symlink is followed, so the
file it points at is replaced and the link stays a link.
"""

from __future__ import annotations

import os
import stat
import tempfile

# The mode of a file that did not exist before, before the umask applies (as open() does).
_NEW_FILE_MODE = 0o666


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: str, data: bytes) -> None:
    """Replace (or create) the file at ``path`` by ``data``, keeping its mode.

    ``path`` may be a symlink: the file it points at is replaced.  A new file gets
    the mode ``open()`` would give it; missing parent directories are created.
    """
    target = os.path.realpath(path)
    directory, name = os.path.split(target)
    os.makedirs(directory, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = _NEW_FILE_MODE & ~_umask()
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        # mkstemp creates the file private (0600); give it the mode of the file it replaces.
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
