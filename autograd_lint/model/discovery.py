"""Finding the files of a run and the Functions in them, across files and cores.

A run works in rounds.  Round one analyses every file that can hold a Function
(see :func:`autograd_lint.model.analysis.mentions_function`) in parallel.  A class whose
base is a Function defined in *another* file of the run is only recognised once
that file's Functions are known, so later rounds analyse again the files that
mention a Function found in the previous round, with those Functions known.  Runs
end after a round that finds nothing new.

The work done for each file is a :data:`FileJob`: discovery alone describes the
Functions; ``check`` also runs the rules in the same process, while the parsed
code is still at hand.  Files with custom ops are the exception: their rules need
every file's ops and registrations, so they run in a last round, in the process
that analysed the file and kept its analysis (the same worker processes serve
every round of a run).  So are files with a Function that another file applies with
a count its own file does not show: the rules learn, once every file is read, what
count all of the run's ``apply`` calls agree on (:mod:`autograd_lint.model.apply_sites`).
"""

from __future__ import annotations

import fnmatch
import gc
import multiprocessing
import os
import pickle
import re
import signal
import sys
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from autograd_lint.model.analysis import (
    EVERY_NEED,
    FileAnalysis,
    ModuleNeed,
    analyze,
    mentions_function,
)
from autograd_lint.model.apply_sites import ApplySite, RunApply, agreed_arities, apply_sites
from autograd_lint.model.custom_ops import CustomOpModule, RunCustomOps, link_custom_ops, mentions_custom_op
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.guard import in_deep_stack, run_guarded, stage
from autograd_lint.model.locate import INDENT, line_matches
from autograd_lint.settings import Settings
from autograd_lint.model.source import SourceError, SourceFile, namespace_names, read_source
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
# The cyclic garbage collector's thresholds during a run.  At Python's defaults its
# collections took 10% of a run over the torch tree: an analysis builds and drops
# trees of many objects, with little cyclic garbage among them (libcst nodes do not
# link to their parents).
_GC_THRESHOLDS = (10_000, 50, 100)
# How much source text (characters) of files waiting for the last round one process
# keeps parsed (libcst trees take about 35 bytes per character); files past it are
# parsed again in the last round.
_KEPT_CHARS = 8_000_000


@dataclass(frozen=True)
class Target:
    """A file to analyse; ``explicit`` when the user named it rather than a directory."""

    path: str
    explicit: bool


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
                            yield Target(full, explicit=False)
            yield from (_unlisted(error) for error in unlisted)
        elif os.path.lexists(path):
            if seen.first(path):
                yield Target(path, explicit=True)
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

    def first(self, path: str) -> bool:
        try:
            info = os.stat(path)
            key: tuple[int, int] | str = (info.st_dev, info.st_ino)
        except OSError:  # the reader will say what is wrong with it
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
    # The process (pid) that keeps this file's analysis for the last round, if one does.
    kept_by: int | None = None
    # Its uses of ``apply`` on imported names, analysed or not.
    apply_sites: tuple[ApplySite, ...] = ()


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
    # The last rounds: the count each Function's ``apply`` calls in the run agree on.
    run_applies: Mapping[str, RunApply] | None = None


# A task: (path, explicit, analyse whatever the text says)
_Task = tuple[str, bool, bool]


def _analyse(source: SourceFile, explicit: bool, state: _Round[T], mentions_ops: bool | None = None) -> FileResult[T]:
    analysis = analyze(
        source, state.known, state.settings, state.needs, run_ops=state.run_ops, mentions_ops=mentions_ops,
        compile_whole=explicit,
    )
    analysis.run_applies = state.run_applies
    sites = apply_sites(source.text, analysis.imports)
    if analysis.custom_ops is not None and state.run_ops is None:
        # The last round (_link_custom_ops) links the file's custom ops with those of the
        # whole run and runs the rules then: their result here would be dropped.
        kept_by = _kept.keep(analysis, state.known)
        return FileResult(
            source.path, analysis.functions, analysis.open_refs, custom_ops=analysis.custom_ops, kept_by=kept_by,
            base_names=_unresolved_base_names(source.text, analysis.functions), apply_sites=sites,
        )
    with stage(source.path, "running the rules"):
        result = state.job(analysis, state.settings)
    return FileResult(source.path, analysis.functions, analysis.open_refs, result, custom_ops=analysis.custom_ops,
                      base_names=_unresolved_base_names(source.text, analysis.functions), apply_sites=sites)


class _Kept:
    """Analyses whose rules wait for the last round, kept in the process that made them,
    so that the last round does not read and parse those files again (parsed trees
    don't cross process boundaries).  Emptied at the start and end of every run.

    Each is kept with the Functions known when it was made, as the last round's check
    that no Function found since could change it.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[FileAnalysis, Mapping[str, FunctionSpec]]] = {}
        self._chars = 0

    def __bool__(self) -> bool:
        return bool(self._entries)

    def keep(self, analysis: FileAnalysis, known: Mapping[str, FunctionSpec]) -> int | None:
        """Keep ``analysis``; this process's id, or None past :data:`_KEPT_CHARS`."""
        self._drop(analysis.source.path)
        if self._chars + len(analysis.source.text) > _KEPT_CHARS:
            return None
        self._entries[analysis.source.path] = (analysis, known)
        self._chars += len(analysis.source.text)
        return os.getpid()

    def take(self, path: str, known: Mapping[str, FunctionSpec]) -> FileAnalysis | None:
        """The analysis kept for ``path``, if the Functions ``known`` now would not change it."""
        entry = self._drop(path)
        if entry is None:
            return None
        analysis, known_then = entry
        if _may_name(analysis, [name for name in known if name not in known_then]):
            return None
        return analysis

    def _drop(self, path: str) -> tuple[FileAnalysis, Mapping[str, FunctionSpec]] | None:
        entry = self._entries.pop(path, None)
        if entry is not None:
            self._chars -= len(entry[0].source.text)
        return entry

    def clear(self) -> None:
        self._entries.clear()
        self._chars = 0


_kept = _Kept()


def _may_name(analysis: FileAnalysis, names: list[str]) -> bool:
    """Whether a class base written in ``analysis``'s file may resolve to one of ``names``.

    An analysis reads the known Functions only through ``imports.resolve`` of a base:
    an imported name, or builtin, followed by the rest of a dotted name.  So a name
    can matter only if a prefix of it is imported and every part after that prefix
    is written in the text (a necessary condition, checked word by word).
    """
    imported = set(analysis.imports.aliases.values()) | {"builtins"}
    rests = []
    for name in names:
        parts = name.split(".")
        rests += [parts[end:] for end in range(1, len(parts) + 1) if ".".join(parts[:end]) in imported]
    if any(not rest for rest in rests):
        return True
    words = _words_pattern(word for rest in rests for word in rest)
    if words is None:
        return False
    written = set(words.findall(analysis.source.text))
    return any(written.issuperset(rest) for rest in rests)


def _finish_task(task: _Task, state: _Round[T]) -> FileResult[T]:
    """The last round for a file with custom ops: link them and run the rules on the
    analysis this process kept, or, without one, read and analyse the file again."""
    analysis = _kept.take(task[0], state.known)
    if analysis is None:
        return _run_task(task, state)
    try:
        return run_guarded(analysis.source.path, "running the rules", lambda: _finish(analysis, state))
    except SourceError as error:
        return FileResult(analysis.source.path, error=error)


def _finish(analysis: FileAnalysis, state: _Round[T]) -> FileResult[T]:
    assert analysis.custom_ops is not None and state.run_ops is not None
    path = analysis.source.path
    with stage(path, "describing custom ops"):
        link_custom_ops(analysis.custom_ops, state.run_ops)
    analysis.run_applies = state.run_applies
    with stage(path, "running the rules"):
        result = state.job(analysis, state.settings)
    return FileResult(path, analysis.functions, analysis.open_refs, result, custom_ops=analysis.custom_ops)


def _run_tasks(tasks: list[_Task], state: _Round[T]) -> list[FileResult[T]]:
    # One hand-over to the deep-stack thread for the whole batch; each file is guarded inside.
    return in_deep_stack(lambda: [_run_task(task, state) for task in tasks])


def _finish_tasks(tasks: list[_Task], state: _Round[T]) -> list[FileResult[T]]:
    return in_deep_stack(lambda: [_finish_task(task, state) for task in tasks])


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
    mentions_ops = None
    with stage(path, "deciding whether the file can hold a Function"):
        if state.mention is not None:
            wanted = force or state.mention.search(source.text) is not None
        else:
            # Asked of every file: analyze would ask it of each file it gets.
            mentions_ops = mentions_custom_op(source.text)
            wanted = force or explicit or mentions_ops or mentions_function(path, source.text, state.extra_words)
        if not wanted:
            return FileResult(path, analysed=False, base_names=_base_names(source.text), apply_sites=_apply_sites(source))
    return _analyse(source, explicit, state, mentions_ops)


# A message to a worker: a new round's state (pickled once for all workers), tasks to run,
# files to finish, or the end.
_Message = tuple[str, object]


# What a worker sends back: its process id and the results of one message.
_Batch = tuple[int, list[FileResult]]  # type: ignore[type-arg]


def _serve(inbox: "multiprocessing.SimpleQueue[_Message]", outbox: "multiprocessing.SimpleQueue[_Batch]",
           state: _Round) -> None:  # type: ignore[type-arg]
    """A worker's loop: it lives for the whole run, so that the analyses it keeps
    (:data:`_kept`) are still there for the last round."""
    # Ctrl-C reaches the whole process group: the parent stops the run and ends the
    # workers; a worker's own KeyboardInterrupt would only print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        kind, payload = inbox.get()
        if kind == "round":
            state = pickle.loads(payload)  # type: ignore[arg-type]
        elif kind == "tasks":
            outbox.put((os.getpid(), _run_tasks(payload, state)))  # type: ignore[arg-type]
        elif kind == "finish":
            outbox.put((os.getpid(), _finish_tasks(payload, state)))  # type: ignore[arg-type]
        else:
            return


class _Workers:
    """Worker processes that serve every round of one run.

    Unlike a process pool, tasks can be sent to a chosen worker: a file's last
    round goes to the process that kept its analysis.  Each worker is handed a
    few tasks at a time, more as it returns results; a worker that dies ends the
    run with ``BrokenProcessPool``, as a pool would.
    """

    def __init__(self, count: int, state: _Round[T]) -> None:
        # fork shares the already-imported libcst and the first round's state with the
        # workers; elsewhere use the default.
        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
        self._outbox: multiprocessing.SimpleQueue[_Batch] = context.SimpleQueue()
        self._inboxes: list[multiprocessing.SimpleQueue[_Message]] = []
        self._processes: list[multiprocessing.process.BaseProcess] = []
        for _ in range(count):
            inbox: multiprocessing.SimpleQueue[_Message] = context.SimpleQueue()
            process = context.Process(target=_serve, args=(inbox, self._outbox, state), daemon=True)
            process.start()
            self._inboxes.append(inbox)
            self._processes.append(process)
        self.pids = [process.pid for process in self._processes]
        self._state = state

    def _share(self, state: _Round[T]) -> None:
        """Send ``state`` to every worker, unless they have it."""
        if state is not self._state:
            payload = pickle.dumps(state)  # once, not once per worker
            for inbox in self._inboxes:
                inbox.put(("round", payload))
            self._state = state

    def run(self, tasks: list[_Task], state: _Round[T]) -> list[FileResult[T]]:
        """Run ``tasks`` on whichever worker is free, with ``state``."""
        self._share(state)
        pending = list(reversed(tasks))
        workers = len(self._processes)

        def next_chunk() -> list[_Task]:
            # Chunks shrink towards the end of the round, so that the workers finish together;
            # at most 16 files, as a worker holds two (one waiting): with 32, one worker was
            # still on two large chunks 0.1 s after the other had run out, on torch.
            size = max(1, min(16, len(pending) // (4 * workers)))
            return [pending.pop() for _ in range(min(size, len(pending)))]

        sent = 0
        # Two chunks per worker: one to work on, one waiting, so that none waits for the parent.
        for _ in range(2):
            for inbox in self._inboxes:
                if pending:
                    inbox.put(("tasks", next_chunk()))
                    sent += 1
        results: list[FileResult[T]] = []
        while sent:
            index, batch = self._receive()
            sent -= 1
            results.extend(batch)
            if pending:
                self._inboxes[index].put(("tasks", next_chunk()))
                sent += 1
        return results

    def finish(self, tasks_by_worker: Mapping[int, list[_Task]], state: _Round[T]) -> list[FileResult[T]]:
        """Finish on each worker the files whose analyses it kept (:func:`_finish_task`)."""
        self._share(state)
        sent = 0
        for index, tasks in tasks_by_worker.items():
            self._inboxes[index].put(("finish", tasks))
            sent += 1
        results: list[FileResult[T]] = []
        while sent:
            results.extend(self._receive()[1])
            sent -= 1
        return results

    def _receive(self) -> tuple[int, list[FileResult[T]]]:
        """The next batch of results, and the index of the worker that sent it."""
        reader = self._outbox._reader  # type: ignore[attr-defined]
        if reader not in wait([reader, *(process.sentinel for process in self._processes)]):
            raise BrokenProcessPool("a worker process ended while analysing files")
        pid, batch = self._outbox.get()
        return self.pids.index(pid), batch

    def close(self) -> None:
        for inbox in self._inboxes:
            inbox.put(("stop", None))
        for process in self._processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()


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
    roots = _import_roots(paths)
    state: _Round[T] = _Round({}, settings, job, needs, extra_words=extra)
    tasks: list[_Task] = [(path, explicit, False) for path, explicit in targets.items()]
    results: dict[str, FileResult[T]] = {}
    known: dict[str, FunctionSpec] = {}
    rounds = _Rounds(settings.jobs or os.cpu_count() or 1)
    _kept.clear()
    thresholds = gc.get_threshold()
    # The workers forked below inherit this.
    gc.set_threshold(*(max(now, run_long) for now, run_long in zip(thresholds, _GC_THRESHOLDS)))
    try:
        while tasks:
            for result in rounds.run(tasks, state):
                results[result.path] = result
            fresh = [f for path, _, _ in tasks for f in results[path].functions if f.full_name not in known]
            if not fresh:
                break
            new = {f.full_name: f for f in fresh}
            new.update(_namespace_aliases(fresh, roots, {**known, **new}))
            known.update(new)
            # A file refers to a Function of another module by its top-level name.
            top_names = {f.qualname.split(".", 1)[0] for f in new.values()}
            mention = _words_pattern(top_names)
            state = _Round(dict(known), settings, job, needs, mention=mention)
            tasks = [
                (path, targets[path], result.analysed)
                for path, result in results.items()
                if (result.analysed and result.open_refs & new.keys())
                or _may_derive_from(result, top_names)
            ]
        applies = agreed_arities(((r.path, site) for r in results.values() for site in r.apply_sites), known)
        state = _Round(state.known, settings, job, needs, run_applies=applies)
        _apply_across_files(results, targets, state, rounds)
        _link_custom_ops(results, targets, state, rounds)
    finally:
        rounds.close()
        _kept.clear()
        gc.set_threshold(*thresholds)
    errors.extend(r.error for r in results.values() if r.error is not None)
    ordered = [results[p] for p in sorted(results) if results[p].analysed and results[p].error is None]
    return Run(ordered, errors, files_seen=len(targets))


def _import_roots(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Where imports of the checked code are resolved from, in order: each checked
    directory (a checked file's own directory), then the working directory."""
    roots: list[str] = []
    for raw in paths:
        path = os.path.abspath(os.fspath(raw))
        root = path if os.path.isdir(path) else os.path.dirname(path)
        if root not in roots:
            roots.append(root)
    if os.getcwd() not in roots:
        roots.append(os.getcwd())
    return roots


def _namespace_aliases(
    functions: Iterable[FunctionSpec], roots: Sequence[str], known: Mapping[str, FunctionSpec]
) -> dict[str, FunctionSpec]:
    """The Functions of ``functions`` under the names their files import as through
    namespace packages (:func:`namespace_names`), so that ``from models.base import
    Base`` finds ``models/base.py``'s ``Base`` in a tree without ``__init__.py`` files.
    A name two files would take (or one a Function already has) names neither: an
    ambiguous import is left unresolved, as an import from outside the run is."""
    claims: dict[str, list[FunctionSpec]] = {}
    for function in functions:
        for module in namespace_names(function.path, roots):
            claims.setdefault(f"{module}.{function.qualname}", []).append(function)
    return {name: found[0] for name, found in claims.items() if len(found) == 1 and name not in known}


class _Rounds:
    """Runs the rounds of one run: in this process, or on workers started for the
    first round that needs them and kept until the run ends."""

    def __init__(self, jobs: int) -> None:
        self._jobs = jobs
        self._workers: _Workers | None = None

    def run(self, tasks: list[_Task], state: _Round[T]) -> list[FileResult[T]]:
        if self._jobs <= 1 or len(tasks) < _PARALLEL_THRESHOLD:
            return _run_tasks(tasks, state)
        if self._workers is None:
            self._workers = _Workers(min(self._jobs, len(tasks)), state)
        return self._workers.run(tasks, state)

    def finish(self, holders: list[FileResult[T]], targets: Mapping[str, bool], state: _Round[T]) -> list[FileResult[T]]:
        """The last round of ``holders``: each in the process that kept its analysis,
        or (none kept) analysed again in the usual way."""
        here = os.getpid()
        by_worker: dict[int, list[_Task]] = {}
        again: list[_Task] = []
        kept_here: list[_Task] = []
        for holder in holders:
            task = (holder.path, targets[holder.path], True)
            if holder.kept_by == here:
                kept_here.append(task)
            elif self._workers is not None and holder.kept_by in self._workers.pids:
                by_worker.setdefault(self._workers.pids.index(holder.kept_by), []).append(task)
            else:
                again.append(task)
        results = _finish_tasks(kept_here, state) if kept_here else []
        if by_worker:
            assert self._workers is not None
            results.extend(self._workers.finish(by_worker, state))
        if again:
            results.extend(self.run(again, state))
        return results

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None


def _link_custom_ops(
    results: dict[str, FileResult[T]], targets: Mapping[str, bool], state: _Round[T], rounds: _Rounds
) -> None:
    """Finish, with every file's custom ops and registrations known, the files that have some.

    A registration may sit in another file than its op (``register_fake("ns::op")``
    in a ``fake_impls.py``), and whether an op has a fake kernel at all can only be
    said from the whole run.  A file's analysis is kept where it was made, for this
    round (:data:`_kept`); a file whose analysis wasn't kept is read and parsed again.
    """
    holders = [result for result in results.values() if result.custom_ops is not None]
    if not holders:
        return
    # Copies, as a worker receives them: linking a kept module adds the other files'
    # registrations to its ops, which must not show through the run's ops when this
    # process keeps some of the modules itself.
    modules = pickle.loads(pickle.dumps([holder.custom_ops for holder in holders]))
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
    last = _Round(state.known, state.settings, state.job, state.needs, run_ops=run_ops, run_applies=state.run_applies)
    for result in rounds.finish(holders, targets, last):
        results[result.path] = result


def _apply_sites(source: SourceFile) -> tuple[ApplySite, ...]:
    """The uses of ``apply`` on imported names in a file that is not analysed."""
    if ".apply" not in source.text:
        return ()
    imports = ImportMap.from_text(source.text, source.module, source.path.endswith("__init__.py"))
    return apply_sites(source.text, imports)


def _apply_across_files(
    results: dict[str, FileResult[T]], targets: Mapping[str, bool], state: _Round[T], rounds: _Rounds
) -> None:
    """Run the rules again, with ``state.run_applies``, on the files whose Functions other
    files apply with an agreed count, where that count could matter: a combined-style
    forward with a defaulted input, which its own file may not show passed.  Files with
    custom ops get the counts in their last round (:func:`_link_custom_ops`)."""
    applies = state.run_applies or {}
    tasks: list[_Task] = [
        (path, targets[path], True)
        for path, result in results.items()
        if result.analysed
        and result.error is None
        and result.custom_ops is None
        and any(f.full_name in applies and _has_defaulted_input(f) for f in result.functions)
    ]
    if tasks:
        for result in rounds.run(tasks, state):
            results[result.path] = result


def _has_defaulted_input(function: FunctionSpec) -> bool:
    """Whether a combined-style forward has an input with a default (``apply`` may leave it out)."""
    inputs = function.forward_inputs
    return function.is_split_style is False and inputs is not None and any(p.default is not None for p in inputs)


def _may_derive_from(result: FileResult[T], top_names: set[str]) -> bool:
    """Whether a class header of ``result``'s file may name one of the Functions just found.

    An analysed file needs this as much as one that was not: a class whose base is a
    Function of another file is no candidate until that Function is known, so it
    leaves no open reference (``class Derived(Base)`` beside a Function of its own).
    Names of the file's own Functions don't count: it resolved those itself.  A file
    whose base names can't be listed cheaply (``None``) is looked at again only if it
    was not analysed: 22 of torch's analysed files are such, and analysing them again
    for every run would cost a tenth of a run over torch, for a case (an aliased or
    parenthesised base of another file's Function, beside a Function of its own) seen
    nowhere.
    """
    if result.base_names is None:
        return not result.analysed
    own = {f.qualname.split(".", 1)[0] for f in result.functions}
    return not result.base_names.isdisjoint(top_names - own)


def _unresolved_base_names(text: str, functions: Sequence[FunctionSpec]) -> frozenset[str] | None:
    """The base names of ``text``'s class headers, less those its Functions already derive from.

    ``class Fn(Function)`` names torch's ``Function`` (itself a Function of a run over
    torch): a file of Functions needs no second look for that name, only for a base
    none of its Functions resolved.
    """
    names = _base_names(text)
    if names is None:
        return None
    return names - {part for function in functions for base in function.bases for part in base.split(".")}


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
