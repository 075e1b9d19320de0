"""Baselines: the findings a project already has, recorded so that only new ones are reported.

A baseline file holds one entry per finding, keyed on what survives unrelated
edits: the file (relative to the baseline file's directory), the rule code, the
scope the finding is in (``Mul.backward``: enclosing classes and functions, by
indentation) and the finding's line with its whitespace collapsed and any
``# noqa`` comment removed.  Line numbers are not part of it, so code added
above a finding does not make it new.  Identical keys are counted: a baseline
entry with ``count: 2`` accepts two such findings, and a third is new.

Entries that no finding of a run matches, in files the run checked or in files
that no longer exist, are *stale* (the finding was fixed): they are reported so
that the file can be written again, smaller.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Iterable, Sequence

from autograd_lint import __version__
from autograd_lint.files import Refused, write_atomically
from autograd_lint.sidefiles import SideFileError, load_json
from autograd_lint.noqa import LINE_NOQA
from autograd_lint.model.diagnostic import Diagnostic

FORMAT = "autograd-lint-baseline"
VERSION = 1
MODULE_SCOPE = "<module>"
_SCOPE_HEADER = re.compile(r"(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)")
_WHITESPACE = re.compile(r"\s+")


class BaselineError(Exception):
    """A baseline file that cannot be used; ``str()`` is the one line to print."""


@dataclass(frozen=True, order=True)
class Fingerprint:
    """What identifies a finding across edits that do not touch it."""

    path: str  # POSIX, relative to the baseline file's directory
    code: str
    scope: str  # e.g. "Mul.backward"; MODULE_SCOPE outside any class or function
    snippet: str  # the finding's line, normalised


def normalised(line: str) -> str:
    """``line`` without its ``# noqa`` comment, with whitespace runs collapsed to one space."""
    match = LINE_NOQA.search(line)
    if match is not None:
        line = line[: match.start()]
    return _WHITESPACE.sub(" ", line).strip()


def enclosing_scope(lines: Sequence[str], number: int) -> str:
    """The dotted names of the classes and functions around line ``number`` (1-based), by indentation."""
    if not 0 < number <= len(lines):
        return MODULE_SCOPE
    target = lines[number - 1]
    indent = len(target) - len(target.lstrip())
    names: list[str] = []
    header = _SCOPE_HEADER.match(target.lstrip())
    if header:  # a finding on a `def` line belongs to that function
        names.append(header.group(1))
    for line in reversed(lines[: number - 1]):
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(stripped)
        if depth >= indent:
            continue
        header = _SCOPE_HEADER.match(stripped)
        if header:
            names.append(header.group(1))
            indent = depth
        if depth == 0:
            break
    return ".".join(reversed(names)) or MODULE_SCOPE


def relative_key(path: str, root: Path) -> str:
    """``path`` relative to ``root``, with ``/`` separators (absolute when on another drive)."""
    absolute = os.path.abspath(path)
    try:
        return Path(os.path.relpath(absolute, root)).as_posix()
    except ValueError:
        return Path(absolute).as_posix()


def fingerprint(diagnostic: Diagnostic, lines: Sequence[str], root: Path) -> Fingerprint:
    line = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
    return Fingerprint(
        relative_key(diagnostic.path, root), diagnostic.code, enclosing_scope(lines, diagnostic.line), normalised(line)
    )


def root_of(baseline_path: str) -> Path:
    """The directory that the paths of a baseline file are relative to: its own."""
    return Path(os.path.dirname(os.path.abspath(baseline_path)))


# The lines of a checked file, by the path its findings name.
LinesOf = Callable[[str], Sequence[str]]


def fingerprints(diagnostics: Iterable[Diagnostic], lines_of: LinesOf, root: Path) -> list[tuple[Diagnostic, Fingerprint]]:
    return [(d, fingerprint(d, lines_of(d.path), root)) for d in diagnostics]


def write_baseline(path: str, diagnostics: Iterable[Diagnostic], lines_of: LinesOf) -> int:
    """Write the baseline of ``diagnostics`` to ``path`` (atomically); return the number of findings in it."""
    counts = Counter(key for _, key in fingerprints(diagnostics, lines_of, root_of(path)))
    entries = [
        {"path": f.path, "code": f.code, "scope": f.scope, "snippet": f.snippet, "count": counts[f]}
        for f in sorted(counts)
    ]
    document = {"format": FORMAT, "version": VERSION, "generated-by": f"autograd-lint {__version__}", "entries": entries}
    _check_replaceable(path)
    write_atomically(path, (json.dumps(document, indent=2) + "\n").encode("utf-8"))
    return sum(counts.values())


def _check_replaceable(path: str) -> None:
    """Raise :class:`Refused` unless ``path`` is missing or holds a baseline (of any version).

    ``--write-baseline ops.py`` (a slip of the shell) must not replace a source file.
    """
    try:
        document = load_json(path, "a baseline file")
    except SideFileError as error:
        if error.missing:
            return
        raise Refused(path, f"holds something else than a baseline; not replaced ({error.problem})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise Refused(path, f"holds something else than a baseline (no \"format\": \"{FORMAT}\"); not replaced")


def read_baseline(path: str) -> Counter[Fingerprint]:
    """The entries of the baseline file ``path``; raises :class:`BaselineError` naming it and the problem."""
    try:
        document = load_json(path, "a baseline file")
    except SideFileError as error:
        raise BaselineError(str(error)) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BaselineError(f"{path}: not a baseline file (no \"format\": \"{FORMAT}\")")
    if document.get("version") != VERSION:
        raise BaselineError(
            f"{path}: baseline version {document.get('version')!r} is not supported by autograd-lint "
            f"{__version__} (it reads version {VERSION}); write it again with --write-baseline"
        )
    entries = document.get("entries")
    if not isinstance(entries, list):
        raise BaselineError(f"{path}: \"entries\" must be a list")
    counts: Counter[Fingerprint] = Counter()
    for index, entry in enumerate(entries):
        try:
            key = Fingerprint(*(entry[name] for name in ("path", "code", "scope", "snippet")))
            count = entry.get("count", 1)
        except (TypeError, KeyError, AttributeError):
            raise BaselineError(f"{path}: entry {index} needs \"path\", \"code\", \"scope\" and \"snippet\"") from None
        if not all(isinstance(value, str) for value in (key.path, key.code, key.scope, key.snippet)):
            raise BaselineError(f"{path}: entry {index}: \"path\", \"code\", \"scope\" and \"snippet\" must be strings")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise BaselineError(f"{path}: entry {index}: \"count\" must be a positive integer")
        counts[key] += count
    return counts


@dataclass(frozen=True)
class Comparison:
    """A run's findings against a baseline: those it does not hold, and its entries nothing matched."""

    new: list[Diagnostic]
    stale: list[Fingerprint]  # one per unmatched finding (an entry with count 2 may appear twice)


def compare(
    diagnostics: Iterable[Diagnostic],
    baseline: Counter[Fingerprint],
    lines_of: LinesOf,
    root: Path,
    checked: Collection[str],
) -> Comparison:
    """Match findings to baseline entries; ``checked`` are the paths (as keys) the run read fully.

    An unmatched entry is stale when its file was checked or no longer exists;
    entries for files outside the run are left alone.
    """
    remaining = Counter(baseline)
    new = []
    for diagnostic, key in fingerprints(diagnostics, lines_of, root):
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            new.append(diagnostic)
    stale = [
        key
        for key, count in sorted(remaining.items())
        for _ in range(count)
        if key.path in checked or not (root / key.path).exists()
    ]
    return Comparison(new, stale)
