"""The running coverage's data, through coverage.py's public data API.

Adding evidence: only files coverage already measures get evidence, so
coverage's own ``source``/``include``/``omit`` settings decide what is in
scope.  A data file holds either lines or arcs, never both: arcs are added
when coverage measures branches, their lines otherwise.

Reading what other processes of the run measured: a process started with
``multiprocessing`` (``[run] concurrency = multiprocessing``) measures itself
and saves its own parallel data file (``.coverage.<host>.<pid>.<random>``)
beside the main one when it ends; ``coverage combine`` (or pytest-cov) joins
them only after the tests.
"""

from __future__ import annotations

import glob
import os
import sqlite3
import stat
from typing import Any, Mapping

from autograd_lint.coverage.compile_recorder import Arc, arcs_to_lines


def add_evidence(store: Mapping[str, Mapping[str, set[Arc]]], suffix: str) -> int | None:
    """Add ``store`` (label -> file -> arcs) to ``coverage.Coverage.current()``'s data.

    Each label's evidence goes under the dynamic context ``label + suffix``
    (just ``suffix`` without its leading ``|`` for the empty label).  Returns
    how many (context, file) records were added, or None when coverage is
    not running.
    """
    try:
        import coverage
    except ImportError:
        return None
    cov = coverage.Coverage.current()
    if cov is None:
        return None
    data = cov.get_data()
    measured = {os.path.realpath(f): f for f in data.measured_files()}
    branch = bool(cov.get_option("run:branch"))
    added = 0
    for label, files in store.items():
        records = {
            measured[real]: arcs
            for real, arcs in ((os.path.realpath(f), a) for f, a in files.items())
            if real in measured and arcs
        }
        if not records:
            continue
        previous = data.set_context(label + suffix if label else suffix.lstrip("|"))
        try:
            if branch:
                data.add_arcs({f: sorted(a) for f, a in records.items()})
            else:
                data.add_lines({f: sorted(arcs_to_lines(a)) for f, a in records.items()})
        finally:
            data.set_context(previous)
        added += len(records)
    return added


# A parallel data file's identity at a moment: (mtime in ns, size).
Stamp = tuple[int, int]


def _running() -> Any:
    """``coverage.Coverage.current()``, or None when coverage is not installed or not running."""
    try:
        import coverage
    except ImportError:
        return None
    return coverage.Coverage.current()


def parallel_files() -> dict[str, Stamp]:
    """The parallel data files beside the running coverage's data file, with their stamps ({} without coverage).

    Those are the files ``coverage combine`` would join: what child processes,
    and earlier parallel runs that were never combined, saved.
    """
    cov = _running()
    if cov is None:
        return {}
    # From the option, not from cov.get_data(): getting the data flushes it, and with nothing
    # to flush yet coverage goes on to record the unexecuted source files, too early.
    base = os.path.abspath(cov.get_option("run:data_file"))
    found = {}
    for path in sorted(glob.glob(glob.escape(base) + ".*")):
        # SQLite's side files of a data file being written are not data files.
        if path.endswith(("-journal", "-wal", "-shm")):
            continue
        try:
            info = os.stat(path)
        except OSError:  # gone since it was listed, or a dangling link
            continue
        if stat.S_ISREG(info.st_mode):
            found[path] = (info.st_mtime_ns, info.st_size)
    return found


def lines_saved_since(before: Mapping[str, Stamp]) -> dict[str, set[int]]:
    """The lines other processes saved as run since ``before`` (a :func:`parallel_files` snapshot),
    per real path: the data files that are new or changed since then.

    A file that was there unchanged before is another run's, never this one's.
    A file that can't be read (being written, not a data file) is left out:
    its lines are unknown, so they count as not run, never as run.
    """
    cov = _running()
    if cov is None:  # the report runs without coverage installed too
        return {}
    import coverage

    own = cov.get_data().data_filename()  # this process's data is read from memory, not from disk
    lines: dict[str, set[int]] = {}
    for path, stamp in parallel_files().items():
        if before.get(path) == stamp or path == own:
            continue
        data = coverage.CoverageData(basename=path)
        try:
            data.read()
            for measured in data.measured_files():
                lines.setdefault(os.path.realpath(measured), set()).update(data.lines(measured) or ())
        except (coverage.CoverageException, sqlite3.Error, OSError):
            continue
    return lines
