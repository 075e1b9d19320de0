"""Finding the files of a run and the Functions in them, across files and cores.

A run works in rounds.  Round one analyses every file that can hold a Function
(see :func:`autograd_lint.model.analysis.mentions_function`) in parallel.  A class whose
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
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from autograd_lint.model.analysis import (
    EVERY_NEED,
    FileAnalysis,
    ModuleNeed,
    analyze,
    mentions_function,
    syntax_check,
)
from autograd_lint.model.custom_ops import CustomOpModule, RunCustomOps, mentions_custom_op
from autograd_lint.model.guard import run_guarded, stage
from autograd_lint.model.locate import INDENT, line_matches
from autograd_lint.settings import Settings
from autograd_lint.model.source import SourceError, SourceFile, read_source
from autograd_lint.model.spec import FunctionSpec

T = TypeVar("T")
# Runs in a worker: analyse one file and derive a picklable result from it.
FileJob = Callable[[FileAnalysis, Settings], T]
# A class header's base list, when it holds no parentheses of its own.
_BASE_LIST = re.compile(rf"{INDENT}class[ \t]+\w+[ \t]*\(([^)]*)\)")  # at line starts
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_AS_NAME = re.compile(r"[ \t]as[ \t]+([A-Za-z_]\w*)")
# Below this many files a process pool costs more than it saves.
_PARALLEL_THRESHOLD = 8


@dataclass(frozen=True)
class Target:
    """A file to analyse; ``explicit`` when the user named it rather than a directory."""

    path: str
    explicit: bool


def iter_targets(paths: Sequence[str | os.PathLike[str]], settings: Settings) -> Iterator[Target | SourceError]:
    """The Python files under ``paths``, sorted per directory, skipping excluded ones."""
    excluded = _Excludes(settings.exclude + settings.extend_exclude)
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not excluded(os.path.join(root, d)))
                for name in sorted(files):
                    full = os.path.join(root, name)
                    if name.endswith((".py", ".pyi")) and not excluded(full):
                        yield Target(full, explicit=False)
        elif os.path.exists(path):
            yield Target(path, explicit=True)
        else:
            yield SourceError(path, "no such file or directory")


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


@dataclass
class FileResult(Generic[T]):
    """What a worker found in one file.

    ``analysed`` is false for a file that cannot define a Function by itself;
    ``base_names`` then holds the names its class headers derive from, which may
    turn out to be Functions of other files in a later round (``None``: names
    that can't be listed cheaply, so any later round looks at the file again).
    """

    path: str
    functions: list[FunctionSpec] = field(default_factory=list)
    open_refs: set[str] = field(default_factory=set)
    result: T | None = None
    error: SourceError | None = None
    analysed: bool = True
    base_names: frozenset[str] | None = frozenset()
    custom_ops: CustomOpModule | None = None


@dataclass(frozen=True)
class _Round(Generic[T]):
    """What every task of one round shares; sent to each worker once."""

    known: Mapping[str, FunctionSpec]
    settings: Settings
    job: FileJob[T]
    needs: frozenset[ModuleNeed] = EVERY_NEED
    # Round one: the gate for files that can define a Function by themselves.
    extra_words: re.Pattern[str] | None = None
    # Later rounds: names of the Functions found in the previous round.
    mention: re.Pattern[str] | None = None
    # The last round: the custom ops and registrations of every file.
    run_ops: RunCustomOps | None = None


# A task: (path, explicit, analyse whatever the text says)
_Task = tuple[str, bool, bool]


def _analyse(source: SourceFile, explicit: bool, state: _Round[T]) -> FileResult[T]:
    if explicit:
        syntax_check(source)
    analysis = analyze(source, state.known, state.settings, state.needs, run_ops=state.run_ops)
    if analysis.custom_ops is not None and state.run_ops is None:
        # The last round (_link_custom_ops) analyses the file again, with the custom ops
        # of the whole run known, and runs the rules then: their result here would be dropped.
        return FileResult(source.path, analysis.functions, analysis.open_refs, custom_ops=analysis.custom_ops)
    with stage(source.path, "running the rules"):
        result = state.job(analysis, state.settings)
    return FileResult(source.path, analysis.functions, analysis.open_refs, result, custom_ops=analysis.custom_ops)


def _run_task(task: _Task, state: _Round[T]) -> FileResult[T]:
    """Read one file and analyse it if it can hold a Function (workers do the reading too).

    Whatever goes wrong, in the file or in our code, becomes the file's one error
    (see :mod:`autograd_lint.model.guard`): one file never ends the run.
    """
    path = task[0]
    try:
        return run_guarded(path, "reading the file", lambda: _read_and_analyse(task, state))
    except SourceError as error:
        return FileResult(path, error=error)


def _read_and_analyse(task: _Task, state: _Round[T]) -> FileResult[T]:
    path, explicit, force = task
    source = read_source(path)
    with stage(path, "deciding whether the file can hold a Function"):
        if state.mention is not None:
            wanted = force or state.mention.search(source.text) is not None
        else:
            wanted = (
                force
                or explicit
                or mentions_function(path, source.text, state.extra_words)
                or mentions_custom_op(source.text)
            )
        if not wanted:
            return FileResult(path, analysed=False, base_names=_base_names(source.text))
    return _analyse(source, explicit, state)


# Set once per worker process, so that tasks do not pickle the round's state again.
_worker_round: list[_Round] = []  # type: ignore[type-arg]


def _init_worker(state: _Round[T]) -> None:
    _worker_round[:] = [state]


def _run_in_worker(task: _Task) -> FileResult:  # type: ignore[type-arg]
    return _run_task(task, _worker_round[0])


def _run_round(tasks: list[_Task], state: _Round[T]) -> list[FileResult[T]]:
    workers = state.settings.jobs or os.cpu_count() or 1
    if workers <= 1 or len(tasks) < _PARALLEL_THRESHOLD:
        return [_run_task(task, state) for task in tasks]
    # fork shares the already-imported libcst with the workers; elsewhere use the default.
    method = "fork" if sys.platform.startswith("linux") else None
    with ProcessPoolExecutor(
        min(workers, len(tasks)),
        mp_context=multiprocessing.get_context(method),
        initializer=_init_worker,
        initargs=(state,),
    ) as executor:
        chunk = max(1, min(32, len(tasks) // (4 * workers)))
        return list(executor.map(_run_in_worker, tasks, chunksize=chunk))


@dataclass
class Run(Generic[T]):
    """Everything a run found: per-file results in path order, and unreadable files."""

    results: list[FileResult[T]]
    errors: list[SourceError]
    files_seen: int = 0

    @property
    def functions(self) -> list[FunctionSpec]:
        return [f for r in self.results for f in r.functions]


def run(
    paths: Sequence[str | os.PathLike[str]],
    settings: Settings,
    job: FileJob[T],
    needs: frozenset[ModuleNeed] = EVERY_NEED,
) -> Run[T]:
    """Analyse every file under ``paths`` and apply ``job`` to each that holds a Function."""
    errors: list[SourceError] = []
    targets: dict[str, bool] = {}
    for target in iter_targets(paths, settings):
        if isinstance(target, SourceError):
            errors.append(target)
        else:
            targets.setdefault(target.path, target.explicit)
    extra = _words_pattern(name.rsplit(".", 1)[-1] for name in settings.extra_bases)
    state: _Round[T] = _Round({}, settings, job, needs, extra_words=extra)
    tasks: list[_Task] = [(path, explicit, False) for path, explicit in targets.items()]
    results: dict[str, FileResult[T]] = {}
    known: dict[str, FunctionSpec] = {}
    while tasks:
        for result in _run_round(tasks, state):
            results[result.path] = result
        new = {
            f.full_name: f for path, _, _ in tasks for f in results[path].functions if f.full_name not in known
        }
        if not new:
            break
        known.update(new)
        # A file refers to a Function of another module by its top-level name.
        top_names = {f.qualname.split(".", 1)[0] for f in new.values()}
        mention = _words_pattern(top_names)
        state = _Round(dict(known), settings, job, needs, mention=mention)
        tasks = [
            (path, targets[path], result.analysed)
            for path, result in results.items()
            if (result.analysed and result.open_refs & new.keys())
            or (not result.analysed and (result.base_names is None or result.base_names & top_names))
        ]
    _link_custom_ops(results, targets, state)
    errors.extend(r.error for r in results.values() if r.error is not None)
    ordered = [results[p] for p in sorted(results) if results[p].analysed and results[p].error is None]
    return Run(ordered, errors, files_seen=len(targets))


def _link_custom_ops(results: dict[str, FileResult[T]], targets: Mapping[str, bool], state: _Round[T]) -> None:
    """Analyse again, with every file's custom ops and registrations known, the files that have some.

    A registration may sit in another file than its op (``register_fake("ns::op")``
    in a ``fake_impls.py``), and whether an op has a fake kernel at all can only be
    said from the whole run.  Files with custom ops are few, so they are read twice.
    """
    holders = [path for path, result in results.items() if result.custom_ops is not None]
    if not holders:
        return
    modules = [results[path].custom_ops for path in holders]
    run_ops = RunCustomOps(
        ops=tuple(op for module in modules if module for op in module.ops),
        registrations=tuple(
            registration
            for module in modules
            if module
            for registration in [r for op in module.ops for r in op.registrations] + module.foreign
        ),
        has_unresolved_registration=any(module.has_unresolved_registration for module in modules if module),
    )
    last = _Round(state.known, state.settings, state.job, state.needs, run_ops=run_ops)
    for result in _run_round([(path, targets[path], True) for path in holders], last):
        results[result.path] = result


def _base_names(text: str) -> frozenset[str] | None:
    """The identifiers written in ``text``'s class base lists, or None if that is not enough.

    A base imported under another name (``from m import Fn as F``) is written as
    its alias, and a base list with parentheses inside is not captured whole:
    either makes the file one to search for every new Function's name.
    """
    names: set[str] = set()
    for match in line_matches(text, "class", _BASE_LIST):
        bases = match.group(1)
        if "(" in bases:
            return None
        names.update(_IDENTIFIER.findall(bases))
    if names and not names.isdisjoint(_import_aliases(text)):
        return None
    return frozenset(names)


def _import_aliases(text: str) -> set[str]:
    """Names bound with ``as`` (imports, with-statements, except clauses alike)."""
    aliases = set()
    position = text.find(" as ")
    while position != -1:
        match = _AS_NAME.match(text, position)
        if match:
            aliases.add(match.group(1))
        position = text.find(" as ", position + 4)
    return aliases


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
