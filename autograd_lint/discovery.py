"""Finding the files of a run and the Functions in them, across files and cores.

A run works in rounds.  Round one analyses every file that can hold a Function
(see :func:`autograd_lint.analysis.mentions_function`) in parallel.  A class whose
base is a Function defined in *another* file of the run is only recognised once
that file's Functions are known, so later rounds analyse again the files that
mention a Function found in the previous round, with those Functions known.  Runs
end after a round that finds nothing new.

The work done for each file is a :data:`FileJob`: discovery alone describes the
Functions; ``check`` also runs the rules in the same process, while the parsed
code is still at hand.
"""

from __future__ import annotations

import fnmatch
import multiprocessing
import os
import re
import sys
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from autograd_lint.analysis import FileAnalysis, analyze, mentions_function, syntax_check
from autograd_lint.settings import Settings
from autograd_lint.source import SourceError, SourceFile, read_source
from autograd_lint.spec import FunctionSpec

T = TypeVar("T")
# Runs in a worker: analyse one file and derive a picklable result from it.
FileJob = Callable[[FileAnalysis, Settings], T]
_SUBCLASS_HEADER = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\(", re.MULTILINE)
# Below this many files a process pool costs more than it saves.
_PARALLEL_THRESHOLD = 8


@dataclass(frozen=True)
class Target:
    """A file to analyse; ``explicit`` when the user named it rather than a directory."""

    path: str
    explicit: bool


def iter_targets(paths: Sequence[str | os.PathLike[str]], settings: Settings) -> Iterator[Target | SourceError]:
    """The Python files under ``paths``, sorted per directory, skipping excluded ones."""
    patterns = settings.exclude + settings.extend_exclude
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not _excluded(os.path.join(root, d), patterns))
                for name in sorted(files):
                    full = os.path.join(root, name)
                    if name.endswith((".py", ".pyi")) and not _excluded(full, patterns):
                        yield Target(full, explicit=False)
        elif os.path.exists(path):
            yield Target(path, explicit=True)
        else:
            yield SourceError(path, "no such file or directory")


def _excluded(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``path``'s name, or the path itself, matches one of the glob ``patterns``."""
    name = os.path.basename(path)
    if any(fnmatch.fnmatch(name, p) for p in patterns):
        return True
    nested = [p for p in patterns if "/" in p]  # only these can match more than the name
    if not nested:
        return False
    normalized = Path(path).as_posix()
    return any(fnmatch.fnmatch(normalized, p) or fnmatch.fnmatch(normalized, f"*/{p}") for p in nested)


@dataclass
class FileResult(Generic[T]):
    """A file's Functions and its job's result, or the error that stopped it."""

    path: str
    functions: list[FunctionSpec] = field(default_factory=list)
    open_refs: set[str] = field(default_factory=set)
    result: T | None = None
    error: SourceError | None = None


def _run_one(
    source: SourceFile, explicit: bool, known: Mapping[str, FunctionSpec], settings: Settings, job: FileJob[T]
) -> FileResult[T]:
    try:
        if explicit:
            syntax_check(source)
        analysis = analyze(source, known, settings)
        return FileResult(source.path, analysis.functions, analysis.open_refs, job(analysis, settings))
    except SourceError as error:
        return FileResult(source.path, error=error)


# Set once per worker process, so that each task does not pickle them again.
_worker_state: dict[str, object] = {}


def _init_worker(known: Mapping[str, FunctionSpec], settings: Settings, job: FileJob[T]) -> None:
    _worker_state.update(known=known, settings=settings, job=job)


def _run_in_worker(item: tuple[SourceFile, bool]) -> FileResult[T]:
    state = _worker_state
    return _run_one(item[0], item[1], state["known"], state["settings"], state["job"])  # type: ignore[arg-type]


def _executor(
    count: int, known: Mapping[str, FunctionSpec], settings: Settings, job: FileJob[T]
) -> Executor | None:
    workers = settings.jobs or os.cpu_count() or 1
    if workers <= 1 or count < _PARALLEL_THRESHOLD:
        return None
    # fork shares the already-imported libcst with the workers; elsewhere use the default.
    method = "fork" if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(
        min(workers, count),
        mp_context=multiprocessing.get_context(method),
        initializer=_init_worker,
        initargs=(known, settings, job),
    )


@dataclass
class Run(Generic[T]):
    """Everything a run found: per-file results in path order, and unreadable files."""

    results: list[FileResult[T]]
    errors: list[SourceError]
    files_seen: int = 0

    @property
    def functions(self) -> list[FunctionSpec]:
        return [f for r in self.results for f in r.functions]


def run(paths: Sequence[str | os.PathLike[str]], settings: Settings, job: FileJob[T]) -> Run[T]:
    """Analyse every file under ``paths`` and apply ``job`` to each that holds a Function."""
    errors: list[SourceError] = []
    sources: dict[str, tuple[SourceFile, bool]] = {}
    for target in iter_targets(paths, settings):
        if isinstance(target, SourceError):
            errors.append(target)
            continue
        if target.path in sources:
            continue
        try:
            sources[target.path] = (read_source(target.path), target.explicit)
        except SourceError as error:
            errors.append(error)
    extra = _words_pattern(name.rsplit(".", 1)[-1] for name in settings.extra_bases)
    pending = [p for p, (s, explicit) in sources.items() if explicit or mentions_function(p, s.text, extra)]
    results: dict[str, FileResult[T]] = {}
    known: dict[str, FunctionSpec] = {}
    while pending:
        for result in _analyse_all([sources[p] for p in pending], known, settings, job):
            results[result.path] = result
        new = {f.full_name: f for p in pending for f in results[p].functions if f.full_name not in known}
        if not new:
            break
        known.update(new)
        simple_names = {name.rsplit(".", 1)[-1] for name in new}
        mention = _words_pattern(simple_names)
        pending = [
            path
            for path, (source, _) in sources.items()
            if (path in results and results[path].open_refs & new.keys())
            or (
                path not in results
                and mention is not None
                and _has_subclass_header(source.text)
                and mention.search(source.text)
            )
        ]
    for path in sources:
        if path in results and results[path].error is not None:
            errors.append(results[path].error)  # type: ignore[arg-type]
    ordered = [results[p] for p in sorted(results) if results[p].error is None]
    return Run(ordered, errors, files_seen=len(sources))


def _analyse_all(
    items: list[tuple[SourceFile, bool]], known: Mapping[str, FunctionSpec], settings: Settings, job: FileJob[T]
) -> Iterable[FileResult[T]]:
    executor = _executor(len(items), known, settings, job)
    if executor is None:
        return [_run_one(source, explicit, known, settings, job) for source, explicit in items]
    with executor:
        # Largest first, so that one big file does not finish last on its own.
        items = sorted(items, key=lambda item: -len(item[0].text))
        return list(executor.map(_run_in_worker, items, chunksize=4))


def _has_subclass_header(text: str) -> bool:
    """Whether ``text`` defines a class with a base (which may be an imported Function)."""
    return _SUBCLASS_HEADER.search(text) is not None


def _words_pattern(words: Iterable[str]) -> re.Pattern[str] | None:
    """A regex for any of ``words`` as a whole word, or None for no words.

    The lookahead on first letters lets the engine skip most positions with one
    character test; a bare alternation of a hundred names is three times slower
    over the torch tree.
    """
    unique = sorted(set(words))
    if not unique:
        return None
    first_letters = "".join(sorted({re.escape(word[0]) for word in unique}))
    return re.compile(rf"(?=[{first_letters}])\b(?:" + "|".join(map(re.escape, unique)) + r")\b")


def _functions_only(analysis: FileAnalysis, settings: Settings) -> None:
    return None


def discover_functions(
    paths: Sequence[str | os.PathLike[str]], settings: Settings | None = None
) -> list[FunctionSpec]:
    """Every autograd.Function under ``paths``, found without importing anything.

    Files that can't be read or parsed are skipped; use :func:`run` to see why.
    """
    return run(paths, settings or Settings(), _functions_only).functions
