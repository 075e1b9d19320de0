"""Reading and writing the user's files the one safe way, for every command.

Reading (:func:`read_regular`): only a regular file is opened for its bytes.  A
FIFO, a socket or a device named ``*.py`` would block a read for ever or never
end, so the file is opened without blocking and checked before anything is read;
a file larger than the caller's limit is refused before it is read.

Writing (:func:`write_atomically`, for ``--fix``, ``--add-noqa``, baselines,
``gen-tests``, ``pragma``, recordings): a write goes to a temporary file in the
target's own directory, then replaces the target in one ``os.replace``: a reader
sees the old file or the new one, never a part, and a failure leaves the old file
in place.  A symlink is followed, so the file it points at is replaced and the
link stays a link.  A rename gives the path a new file, so the writer refuses
what a rename would damage rather than what the user asked for: a file that is
not a regular file, a read-only file, a file with other names (hard links, which
would keep the old text), a file whose owner the new one could not keep, a file
that changed since the caller read it, and a second output to a path one run
already wrote (:class:`Outputs`).  Every refusal is a :class:`Refused`, an
``OSError`` whose text is the reason.
"""

from __future__ import annotations

import errno
import os
import stat

# The mode of a file that did not exist before, before the umask applies (as open() does).
_NEW_FILE_MODE = 0o666
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


class Refused(OSError):
    """A read or write that was not done, and why (``str()`` is the reason, one line)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return self.reason

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (Refused, (self.path, self.reason))


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words ("a FIFO"), for one-line messages."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises :class:`Refused` for anything that is not a regular file (opened
    without blocking, so a FIFO with no writer does not hang the run) and for a
    file over ``limit`` bytes (checked before reading, and again while reading,
    for a file that grows); other ``OSError``s as ``open`` raises them.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    descriptor = os.open(path, flags)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
            raise Refused(path, f"not a regular file ({kind_of(info.st_mode)}); not read")
        if info.st_size > limit:
            raise Refused(path, _too_large(info.st_size, limit))
        chunks = []
        size = 0
        while True:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise Refused(path, _too_large(size, limit))
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def _too_large(size: int, limit: int) -> str:
    return f"too large ({_bytes(size)}; the limit is {_bytes(limit)}); not read"


def _bytes(count: int) -> str:
    return f"{count / (1 << 20):.1f} MiB" if count >= 1 << 20 else f"{count} bytes"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class Outputs:
    """The paths one run has written, so that two of its outputs never go to one path.

    A second :meth:`claim` of a path (the same file, by its real path) for another
    output raises :class:`Refused` naming the first: writing it would silently
    lose the first output.
    """

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}

    def claim(self, path: str, what: str) -> None:
        """Reserve ``path`` for the output ``what`` (e.g. the source it was made from)."""
        key = os.path.normcase(os.path.realpath(path))
        owner = self._owners.setdefault(key, what)
        if owner != what:
            raise Refused(path, f"would also hold the output for {owner}; not written (two outputs, one path)")


def write_atomically(path: str, data: bytes, *, replacing: bytes | None = None) -> None:
    """Replace (or create) the file at ``path`` by ``data``, keeping its mode and owner.

    ``path`` may be a symlink: the file it points at is replaced.  A new file gets
    the mode ``open()`` would give it; missing parent directories are created.
    With ``replacing``, the file must still hold exactly those bytes (what the
    caller read): a file changed since is left alone.  Raises :class:`Refused`
    for what must not be replaced (see the module's docstring), ``OSError`` when
    the write fails.
    """
    target = os.path.realpath(path)
    directory, name = os.path.split(target)
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None:
        _check_replaceable(path, target, info, replacing)
        mode = stat.S_IMODE(info.st_mode)
    else:
        if replacing is not None:
            raise Refused(path, "was removed while it was being rewritten; not written")
        os.makedirs(directory, exist_ok=True)
        mode = _NEW_FILE_MODE & ~_umask()
    import tempfile  # here: it imports shutil, random and the compressors, which a run that writes nothing needn't

    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        # mkstemp creates the file private (0600) and ours; give it the mode and owner of the file it replaces.
        os.chmod(temporary, mode)
        if info is not None:
            _keep_owner(path, temporary, info)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def _check_replaceable(path: str, target: str, info: os.stat_result, replacing: bytes | None) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise Refused(path, f"is {kind_of(info.st_mode)}, not a regular file; not replaced")
    # Root may write anything, and a rename ignores the mode: the write bits are the owner's wish.
    if not info.st_mode & 0o222 or not os.access(target, os.W_OK):
        raise Refused(path, f"is read-only (mode {stat.S_IMODE(info.st_mode):04o}); not replaced")
    if info.st_nlink > 1:
        raise Refused(
            path,
            f"has {info.st_nlink} names (hard links); not replaced: its other names would keep the old text",
        )
    if replacing is not None:
        try:
            current = read_regular(target, len(replacing))
        except Refused:
            current = None
        if current != replacing:
            raise Refused(path, "changed while it was being rewritten; not written")


def _keep_owner(path: str, temporary: str, info: os.stat_result) -> None:
    """Give ``temporary`` the owner and group of the file it replaces, or refuse the write."""
    if not hasattr(os, "chown"):
        return
    mine = os.stat(temporary)
    if (mine.st_uid, mine.st_gid) == (info.st_uid, info.st_gid):
        return
    try:
        os.chown(temporary, info.st_uid, info.st_gid)
    except PermissionError:
        raise Refused(
            path, "belongs to another user or group; not replaced: the new file would change its owner"
        ) from None
