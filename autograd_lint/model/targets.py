"""Which files a run checks: the walk of the paths given, with the excludes applied.

Apart from :mod:`autograd_lint.model.discovery` (which analyses the files found here)
because a run whose report is replayed from the cache (``check`` over an unchanged
tree) walks the tree and needs nothing else of discovery and its imports.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from autograd_lint.model.source import SourceError
from autograd_lint.settings import Settings


@dataclass(frozen=True)
class Target:
    """A file to analyse; ``explicit`` when the user named it rather than a directory.

    ``info``: the file's ``stat`` as the walk took it (None: it could not be taken), so
    that a run replayed from the cache does not ``stat`` every file a second time.
    """

    path: str
    explicit: bool
    info: os.stat_result | None = field(default=None, compare=False, repr=False)


def iter_targets(paths: Sequence[str | os.PathLike[str]], settings: Settings) -> Iterator[Target | SourceError]:
    """The Python files under ``paths``, sorted per directory, skipping excluded ones."""
    excluded = _Excludes(settings.exclude + settings.extend_exclude)
    seen = _SeenFiles()
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            unlisted: list[OSError] = []
            for root, dirs, files in os.walk(path, onerror=unlisted.append):
                yield from (_unlisted(error) for error in unlisted)
                unlisted.clear()
                dirs[:] = sorted(d for d in dirs if not excluded(os.path.join(root, d)))
                for name in sorted(files):
                    if name.endswith((".py", ".pyi")):  # before the join: most files of a tree are not
                        full = os.path.join(root, name)
                        if not excluded(full) and seen.first(full):
                            yield Target(full, explicit=False, info=seen.info)
            yield from (_unlisted(error) for error in unlisted)
        elif os.path.lexists(path):
            if seen.first(path):
                yield Target(path, explicit=True, info=seen.info)
        else:
            yield SourceError(path, "no such file or directory")


def _unlisted(error: OSError) -> SourceError:
    """A directory the walk could not list: its files were not checked, and the run must say so."""
    path = error.filename if isinstance(error.filename, str) else "?"
    return SourceError(path, f"directory cannot be listed ({error.strerror or error}); its files were not checked")


class _SeenFiles:
    """Which files a run has listed already, by identity (device and inode), so that a
    file named twice (``a.py ./a.py``, a directory and a file in it) is checked once."""

    def __init__(self) -> None:
        self._seen: set[tuple[int, int] | str] = set()
        # The stat of the path last asked about.
        self.info: os.stat_result | None = None

    def first(self, path: str) -> bool:
        try:
            info = self.info = os.stat(path)
            key: tuple[int, int] | str = (info.st_dev, info.st_ino)
        except OSError:  # the reader will say what is wrong with it
            self.info = None
            key = os.path.normcase(os.path.abspath(path))
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


def force_excluded(path: str | os.PathLike[str], settings: Settings, root: Path) -> bool:
    """Whether ``path``, or a directory above it up to ``root``, matches an exclude glob.

    ruff's ``--force-exclude``: a path named on the command line (as pre-commit
    names every staged file) is checked even when excluded, unless this says so.
    Directories above ``root`` (the project's) are not looked at: a checkout under
    ``~/build/`` must not exclude itself.  A path outside ``root`` is judged by
    the parts it was given with.
    """
    excluded = _Excludes(settings.exclude + settings.extend_exclude)
    absolute = Path(os.path.abspath(path))
    try:
        given = absolute.relative_to(os.path.abspath(root))
    except ValueError:
        given = Path(path)
    return any(excluded(str(part)) for part in (given, *given.parents) if part.name not in ("", ".", ".."))


class _Excludes:
    """Whether a path's name, or the path itself, matches one of the exclude globs.

    The globs are compiled into two regular expressions once per run: matching
    each path against each glob with ``fnmatch`` took about 1 s of a 7 s run over
    the torch tree (3,300 paths, 17 globs).
    """

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self._name = _any_of(patterns)
        # Only globs with a "/" can match more than the name, anywhere below the root.
        self._path = _any_of(tuple(q for p in patterns if "/" in p for q in (p, f"*/{p}")))

    def __call__(self, path: str) -> bool:
        if self._name is not None and self._name.match(os.path.normcase(os.path.basename(path))):
            return True
        return self._path is not None and self._path.match(os.path.normcase(Path(path).as_posix())) is not None


def _any_of(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(os.path.normcase(p))})" for p in patterns))
