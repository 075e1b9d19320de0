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

import functools
import os
import pickle
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeAlias, TypeVar

from autograd_lint.model.guard import fewer_collections, in_deep_stack, run_guarded, stage
from autograd_lint.model.locate import INDENT, line_matches
from autograd_lint.settings import Settings
from autograd_lint.model.source import (
    SourceError,
    SourceFile,
    decode_source,
    module_name,
    namespace_names,
    read_source_bytes,
)
from autograd_lint.model.targets import Target, iter_targets

if TYPE_CHECKING:
    import multiprocessing

    from autograd_lint.model.apply_sites import ApplySite, RunApply
    from autograd_lint.model.spec import FunctionSpec

    from autograd_lint.model.analysis import FileAnalysis, ModuleNeed
    from autograd_lint.model.op_spec import CustomOpModule, RunCustomOps
    from autograd_lint.model.result_cache import ResultCache

# The analysis (libcst and the model built on it), the specs and the apply sites are
# imported where a file is analysed or shows `.apply`: a run whose results all come from
# the cache, or whose files hold no Function, never imports them.

T = TypeVar("T")
# Runs in a worker: analyse one file and derive a picklable result from it.
FileJob = Callable[["FileAnalysis", Settings], T]
# What the job's rules look at outside the Function classes: the needs, or a function
# of the settings giving them (called where files are analysed), or None for every need.
Needs: TypeAlias = "frozenset[ModuleNeed] | Callable[[Settings], frozenset[ModuleNeed]] | None"
# A class header's base list, when it holds no parentheses of its own.
_BASE_LIST = re.compile(rf"{INDENT}class[ \t]+\w+[ \t]*\(([^)]*)\)")  # at line starts
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_AS_NAME = re.compile(r"[ \t]as[ \t]+([A-Za-z_]\w*)")
# Below this many files a process pool costs more than it saves.
_PARALLEL_THRESHOLD = 8
# How much source text (characters) of files waiting for the last round one process
# keeps parsed (libcst trees take about 35 bytes per character); files past it are
# parsed again in the last round.
_KEPT_CHARS = 8_000_000


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
    # For the result cache: the digest of the bytes analysed (when the round asks for it),
    # and the names of other files' Functions the analysis looked up (None: it listed them all).
    digest: bytes | None = None
    looked_up: frozenset[str] | None = frozenset()
    # Its uses of ``apply`` on imported names, analysed or not.
    apply_sites: tuple[ApplySite, ...] = ()
    # The names whose run ``apply`` counts its rules looked up (the last rounds only;
    # None: it listed them all).
    applies_read: frozenset[str] | None = frozenset()


@dataclass(frozen=True)
class _Round(Generic[T]):
    """What every task of one round shares; sent to each worker once."""

    known: Mapping[str, FunctionSpec]
    settings: Settings
    job: FileJob[T]
    needs: Needs = None
    # Round one: the gate for files that can define a Function by themselves.
    extra_words: re.Pattern[str] | None = None
    # Later rounds: names of the Functions found in the previous round.
    mention: re.Pattern[str] | None = None
    # The last round: the custom ops and registrations of every file.
    run_ops: RunCustomOps | None = None
    # The last rounds: the count each Function's ``apply`` calls in the run agree on.
    run_applies: Mapping[str, RunApply] | None = None
    # Give each result the digest of the bytes read (for the result cache).
    digests: bool = False


# A task: (path, explicit, analyse whatever the text says)
_Task = tuple[str, bool, bool]


V = TypeVar("V")


class _Lookups(Mapping[str, V]):
    """A mapping of facts from other files of the run (their Functions, the counts their
    ``apply`` calls agree on), recording which of them an analysis looks up: what its
    result depends on in other files (for the result cache)."""

    def __init__(self, facts: Mapping[str, V]) -> None:
        self._facts = facts
        self.names: set[str] | None = set()

    def __getitem__(self, name: str) -> V:
        if self.names is not None:
            self.names.add(name)
        return self._facts[name]

    def __iter__(self) -> Iterator[str]:
        self.names = None  # listing them all: depends on every one
        return iter(self._facts)

    def __len__(self) -> int:
        self.names = None
        return len(self._facts)

    def seen(self) -> frozenset[str] | None:
        return None if self.names is None else frozenset(self.names)


def _recorded_applies(state: _Round[T]) -> _Lookups[RunApply] | None:
    """The round's agreed ``apply`` counts, recording which an analysis reads (None before the last rounds)."""
    return None if state.run_applies is None else _Lookups(state.run_applies)


def _read(applies: _Lookups[RunApply] | None) -> frozenset[str] | None:
    """The names whose counts an analysis read through :func:`_recorded_applies`."""
    return frozenset() if applies is None else applies.seen()


def _analyse(
    source: SourceFile, explicit: bool, state: _Round[T], mentions_ops: bool | None = None, digest: bytes | None = None
) -> FileResult[T]:
    from autograd_lint.model.analysis import analyze
    from autograd_lint.model.apply_sites import apply_sites

    known: _Lookups[FunctionSpec] = _Lookups(state.known)
    analysis = analyze(
        source, known, state.settings, _needs_of(state), run_ops=state.run_ops, mentions_ops=mentions_ops,
        compile_whole=explicit,
    )
    applies = analysis.run_applies = _recorded_applies(state)
    sites = apply_sites(source.text, analysis.imports)
    if analysis.custom_ops is not None and state.run_ops is None:
        # The last round (_link_custom_ops) links the file's custom ops with those of the
        # whole run and runs the rules then: their result here would be dropped.
        kept_by = _kept.keep(analysis, state.known, known.seen())
        return FileResult(
            source.path, analysis.functions, analysis.open_refs, custom_ops=analysis.custom_ops, kept_by=kept_by,
            base_names=_unresolved_base_names(source.text, analysis.functions), digest=digest,
            looked_up=known.seen(), apply_sites=sites,
        )
    with stage(source.path, "running the rules"):
        result = state.job(analysis, state.settings)
    return FileResult(source.path, analysis.functions, analysis.open_refs, result, custom_ops=analysis.custom_ops,
                      base_names=_unresolved_base_names(source.text, analysis.functions), digest=digest,
                      looked_up=known.seen(), apply_sites=sites, applies_read=_read(applies))


def _needs_of(state: _Round[T]) -> frozenset[ModuleNeed] | Callable[[], frozenset[ModuleNeed]]:
    """The round's needs, as :func:`analyze` takes them (a function: worked out only if asked)."""
    if state.needs is None:
        from autograd_lint.model.analysis import EVERY_NEED

        return EVERY_NEED
    if isinstance(state.needs, frozenset):
        return state.needs
    return functools.partial(state.needs, state.settings)


class _Kept:
    """Analyses whose rules wait for the last round, kept in the process that made them,
    so that the last round does not read and parse those files again (parsed trees
    don't cross process boundaries).  Emptied at the start and end of every run.

    Each is kept with the Functions known when it was made, as the last round's check
    that no Function found since could change it.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[FileAnalysis, Mapping[str, FunctionSpec], frozenset[str] | None]] = {}
        self._chars = 0

    def __bool__(self) -> bool:
        return bool(self._entries)

    def keep(
        self, analysis: FileAnalysis, known: Mapping[str, FunctionSpec], looked_up: frozenset[str] | None
    ) -> int | None:
        """Keep ``analysis`` (which looked up ``looked_up`` in ``known``); this process's
        id, or None past :data:`_KEPT_CHARS`."""
        self._drop(analysis.source.path)
        if self._chars + len(analysis.source.text) > _KEPT_CHARS:
            return None
        self._entries[analysis.source.path] = (analysis, known, looked_up)
        self._chars += len(analysis.source.text)
        return os.getpid()

    def take(self, path: str, known: Mapping[str, FunctionSpec]) -> tuple[FileAnalysis, frozenset[str] | None] | None:
        """The analysis kept for ``path`` and the names it looked up, if the Functions
        ``known`` now would not change it."""
        entry = self._drop(path)
        if entry is None:
            return None
        analysis, known_then, looked_up = entry
        if _may_name(analysis, [name for name in known if name not in known_then]):
            return None
        return analysis, looked_up

    def _drop(self, path: str) -> tuple[FileAnalysis, Mapping[str, FunctionSpec], frozenset[str] | None] | None:
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
    kept = _kept.take(task[0], state.known)
    if kept is None:
        return _run_task(task, state)
    analysis, looked_up = kept
    try:
        result = run_guarded(analysis.source.path, "running the rules", lambda: _finish(analysis, state))
    except SourceError as error:
        return FileResult(analysis.source.path, error=error)
    result.looked_up = looked_up
    return result


def _finish(analysis: FileAnalysis, state: _Round[T]) -> FileResult[T]:
    from autograd_lint.model.custom_ops import link_custom_ops

    assert analysis.custom_ops is not None and state.run_ops is not None
    path = analysis.source.path
    with stage(path, "describing custom ops"):
        link_custom_ops(analysis.custom_ops, state.run_ops)
    applies = analysis.run_applies = _recorded_applies(state)
    with stage(path, "running the rules"):
        result = state.job(analysis, state.settings)
    return FileResult(
        path, analysis.functions, analysis.open_refs, result, custom_ops=analysis.custom_ops,
        applies_read=_read(applies),
    )


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
    data = read_source_bytes(path)
    digest = _content_digest(data) if state.digests else None
    source = SourceFile(path=path, text=decode_source(data, path), module=module_name(path))
    mentions_ops = None
    from autograd_lint.model.locate import mentions_custom_op, mentions_function

    with stage(path, "deciding whether the file can hold a Function"):
        if state.mention is not None:
            wanted = force or state.mention.search(source.text) is not None
        else:
            # Asked of every file: analyze would ask it of each file it gets.
            mentions_ops = mentions_custom_op(source.text)
            wanted = force or explicit or mentions_ops or mentions_function(path, source.text, state.extra_words)
        if not wanted:
            return FileResult(path, analysed=False, base_names=_base_names(source.text), digest=digest,
                              apply_sites=_apply_sites(source))
    return _analyse(source, explicit, state, mentions_ops, digest)


def _content_digest(data: bytes) -> bytes:
    from autograd_lint.model.result_cache import content_digest

    return content_digest(data)


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
        import multiprocessing  # here: a run of a few files starts no worker

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
        from concurrent.futures.process import BrokenProcessPool
        from multiprocessing.connection import wait

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
    needs: Needs = None,
    cache: ResultCache | None = None,
    walked: Sequence[Target | SourceError] | None = None,
) -> Run[T]:
    """Analyse every file under ``paths`` and apply ``job`` to each that holds a Function.

    With ``cache`` (from :func:`open_cache` for the same settings, job and needs),
    a file's result is taken from the cache when nothing it depends on changed, and
    what is computed is stored there; the run is the same as without (see :class:`_Memo`).
    ``walked``: what :func:`iter_targets` gave for ``paths``, when the caller walked them already.
    """
    errors: list[SourceError] = []
    targets: dict[str, bool] = {}
    infos: dict[str, os.stat_result] = {}
    for target in iter_targets(paths, settings) if walked is None else walked:
        if isinstance(target, SourceError):
            errors.append(target)
        else:
            targets.setdefault(target.path, target.explicit)
            if target.info is not None:
                infos.setdefault(target.path, target.info)
    extra = _words_pattern(name.rsplit(".", 1)[-1] for name in settings.extra_bases)
    roots = _import_roots(paths)
    digests = cache is not None
    state: _Round[T] = _Round({}, settings, job, needs, extra_words=extra, digests=digests)
    tasks: list[_Task] = [(path, explicit, False) for path, explicit in targets.items()]
    results: dict[str, FileResult[T]] = {}
    known: dict[str, FunctionSpec] = {}
    rounds: _Rounds | _Memo = _Rounds(settings.jobs or os.cpu_count() or 1)
    if cache is not None:
        rounds = _Memo(rounds, cache, infos)
    _kept.clear()
    with fewer_collections():  # the workers forked below inherit it
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
                state = _Round(dict(known), settings, job, needs, mention=mention, digests=digests)
                tasks = [
                    (path, targets[path], result.analysed)
                    for path, result in results.items()
                    if (result.analysed and result.open_refs & new.keys())
                    or _may_derive_from(result, top_names)
                ]
            from autograd_lint.model.apply_sites import agreed_arities

            applies = agreed_arities(((r.path, site) for r in results.values() for site in r.apply_sites), known)
            state = _Round(state.known, settings, job, needs, run_applies=applies, digests=digests)
            _apply_across_files(results, targets, state, rounds)
            _link_custom_ops(results, targets, state, rounds)
        finally:
            rounds.close()
            _kept.clear()
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
    results: dict[str, FileResult[T]], targets: Mapping[str, bool], state: _Round[T], rounds: _Rounds | _Memo
) -> None:
    """Finish, with every file's custom ops and registrations known, the files that have some.

    A registration may sit in another file than its op (``register_fake("ns::op")``
    in a ``fake_impls.py``), and whether an op has a fake kernel at all can only be
    said from the whole run.  A file's analysis is kept where it was made, for this
    round (:data:`_kept`); a file whose analysis wasn't kept is read and parsed again.
    """
    # In the order of the run's files, whichever worker finished first: the run's ops are
    # listed in this order, and a key two files' ops share names the last one's.
    holders = [results[path] for path in targets if path in results and results[path].custom_ops is not None]
    if not holders:
        return
    # Copies, as a worker receives them: linking a kept module adds the other files'
    # registrations to its ops, which must not show through the run's ops when this
    # process keeps some of the modules itself.
    from autograd_lint.model.op_spec import RunCustomOps

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
    last = _Round(
        state.known, state.settings, state.job, state.needs, run_ops=run_ops, run_applies=state.run_applies,
        digests=state.digests,
    )
    for result in rounds.finish(holders, targets, last):
        results[result.path] = result


def _apply_sites(source: SourceFile) -> tuple[ApplySite, ...]:
    """The uses of ``apply`` on imported names in a file that is not analysed."""
    if ".apply" not in source.text:
        return ()
    from autograd_lint.model.apply_sites import apply_sites
    from autograd_lint.model.imports import ImportMap

    imports = ImportMap.from_text(source.text, source.module, source.path.endswith("__init__.py"))
    return apply_sites(source.text, imports)


def _apply_across_files(
    results: dict[str, FileResult[T]], targets: Mapping[str, bool], state: _Round[T], rounds: _Rounds | _Memo
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


class _Memo:
    """The rounds of a run with a result cache: each file's task is looked up first, and
    only the misses are run (by :class:`_Rounds`) and stored.

    A task's result is a function of what its key names and of what its analysis looked
    up in the facts of other files (:class:`_Lookups`): their Functions, and, in the
    last rounds, the counts the run's ``apply`` calls agree on:

    * the key: the file's path, module name (which depends on ``__init__.py`` files
      around it), whether it was named on the command line, whether the round forces
      its analysis, the digest of its bytes, the round's gate (the names of the
      Functions just found, or the round that gives the rules the run's ``apply``
      counts), and, in the last round, the part of the run's custom ops
      and registrations that :func:`link_custom_ops` reads for this file (its own ops'
      registrations in other files, the other files' ops it registers on, every
      registered (kind, op), and whether some registration can't be followed);
    * the dependencies: for each Function name looked up, a digest of the spec found
      (or of its absence); for each Function whose run ``apply`` count the rules read,
      a digest of that count (or of its absence).  A stored result is taken only if
      every one is unchanged.  A result also keeps the file's ``apply`` sites, from
      which the next run's counts are agreed.

    The settings, the job, the needs and the tool's own code name the store itself
    (:func:`open_cache`).  A result that is an error is not stored (it may come from
    the machine: a file that can't be read, memory).  The rounds then go as without
    a cache, so the run's output is the one a fresh run gives.
    """

    def __init__(self, rounds: _Rounds, cache: ResultCache, infos: Mapping[str, os.stat_result]) -> None:
        self._rounds = rounds
        self._cache = cache
        self._infos = infos  # each file's stat as the walk took it
        self._specs: dict[int, tuple[FunctionSpec, bytes]] = {}

    def run(self, tasks: list[_Task], state: _Round[T]) -> list[FileResult[T]]:
        results: list[FileResult[T]] = []
        misses: list[_Task] = []
        from autograd_lint.model.result_cache import fingerprint

        gate = fingerprint(
            state.mention.pattern if state.mention is not None else ("extra", state.extra_words),
            state.run_applies is not None,  # the round that gives the rules the run's apply counts
        )
        for task in tasks:
            digest = self._content(task[0])
            found = None if digest is None else self._get(self._key("round", task, digest, gate), task[0], state)
            if found is None:
                misses.append(task)
            else:
                results.append(found)
        computed = self._rounds.run(misses, state) if misses else []
        by_path = {task[0]: task for task in misses}
        for result in computed:
            if result.digest is not None:
                self._put(self._key("round", by_path[result.path], result.digest, gate), result, state)
        return _in_order_of(tasks, results + computed)

    def finish(self, holders: list[FileResult[T]], targets: Mapping[str, bool], state: _Round[T]) -> list[FileResult[T]]:
        from autograd_lint.model.result_cache import fingerprint

        assert state.run_ops is not None
        results: list[FileResult[T]] = []
        misses: list[FileResult[T]] = []
        keys: dict[str, bytes] = {}
        for holder in holders:
            if holder.digest is None or holder.custom_ops is None:
                misses.append(holder)
                continue
            part = fingerprint(_run_ops_read(state.run_ops, holder.custom_ops, holder.path))
            keys[holder.path] = self._key("final", (holder.path, targets[holder.path], True), holder.digest, part)
            found = self._get(keys[holder.path], holder.path, state)
            if found is None:
                misses.append(holder)
            else:
                results.append(found)
        computed = self._rounds.finish(misses, targets, state) if misses else []
        digests = {holder.path: holder.digest for holder in misses}
        for result in computed:
            # A file read again must still be the one whose ops made the key.
            if result.path in keys and result.digest in (None, digests[result.path]):
                self._put(keys[result.path], result, state)
        return _in_order_of([(h.path, True, True) for h in holders], results + computed)

    def close(self) -> None:
        self._rounds.close()

    def _content(self, path: str) -> bytes | None:
        """The digest of the file's bytes: remembered by its ``stat`` signature, else read."""
        walked = self._infos.get(path)
        if walked is not None:
            # The walk's stat, if it is one the store knows: no second stat of every file. That
            # signature was trusted when it was stored, so its times lie far enough back now too.
            digest = self._cache.known_content(path, walked)
            if digest is not None:
                self._cache.read(path, walked, digest, time.time_ns())
                return digest
        try:
            taken = time.time_ns()
            info = os.stat(path)
            digest = self._cache.known_content(path, info)
            if digest is None:
                digest = _content_digest(read_source_bytes(path))
                self._cache.hashed(path, info, digest, taken)
            self._cache.read(path, info, digest, taken)
            return digest
        except (OSError, SourceError):
            return None  # the task says what is wrong with it

    def _key(self, kind: str, task: _Task, digest: bytes, part: bytes) -> bytes:
        """The key of ``task``'s result, given its content ``digest`` and the digest of the rest (``part``)."""
        from autograd_lint.model.result_cache import key

        path, explicit, force = task
        return key(kind, path, module_name(path) or "", "e" if explicit else "", "f" if force else "", digest, part)

    def _get(self, key: bytes, path: str, state: _Round[T]) -> FileResult[T] | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        dependencies, result = entry
        if dependencies and dependencies != self._dependencies(
            frozenset(n for k, n, _ in dependencies if k == "f"),  # type: ignore[attr-defined]
            frozenset(n for k, n, _ in dependencies if k == "a"),  # type: ignore[attr-defined]
            state,
        ):
            return None
        if isinstance(result, tuple):  # see _put
            analysed, base_names, open_refs, value, sites = result
            value = None if value is None else []  # a fresh list: the stored one is shared
            from autograd_lint.model.apply_sites import ApplySite

            return FileResult(
                path, open_refs=set(open_refs), result=value, analysed=analysed, base_names=base_names,
                apply_sites=tuple(ApplySite(*site) for site in sites),
            )
        return result  # type: ignore[no-any-return]

    def _put(self, key: bytes, result: FileResult[T], state: _Round[T]) -> None:
        if result.error is not None or result.looked_up is None or result.applies_read is None:
            return
        dependencies = self._dependencies(result.looked_up, result.applies_read, state)
        if dependencies is None:
            return
        if not result.functions and result.custom_ops is None and result.result in (None, []):
            # Most files: passed over, or analysed and found to hold nothing. Kept as plain
            # values, which the store reads with itself (unpickling each took most of a warm run).
            sites = tuple((site.target, site.arguments, site.line) for site in result.apply_sites)
            plain = (result.analysed, result.base_names, frozenset(result.open_refs), result.result, sites)
            self._cache.put(key, dependencies, plain, plain=True)
        else:
            self._cache.put(key, dependencies, FileResult(**{**result.__dict__, "kept_by": None}))

    def _dependencies(
        self, names: frozenset[str], applies: frozenset[str], state: _Round[T]
    ) -> tuple[tuple[str, str, bytes | None], ...] | None:
        """Each Function name (kind "f") with the digest of the Function it names now, and
        each name whose run ``apply`` count was read (kind "a") with the digest of that
        count now (None: none)."""
        from autograd_lint.model.result_cache import fingerprint

        found: list[tuple[str, str, bytes | None]] = []
        for name in sorted(names):
            spec = state.known.get(name)
            if spec is None:
                found.append(("f", name, None))
                continue
            memo = self._specs.get(id(spec))
            if memo is None or memo[0] is not spec:
                try:
                    memo = self._specs[id(spec)] = (spec, fingerprint(spec))
                except TypeError:
                    return None
            found.append(("f", name, memo[1]))
        run = state.run_applies or {}
        for name in sorted(applies):
            count = run.get(name)
            found.append(("a", name, None if count is None else fingerprint(count)))
        return tuple(found)


def _in_order_of(tasks: list[_Task], results: list[FileResult[T]]) -> list[FileResult[T]]:
    by_path = {result.path: result for result in results}
    return [by_path[task[0]] for task in tasks if task[0] in by_path]


def _run_ops_read(run: RunCustomOps, module: CustomOpModule, path: str) -> object:
    """What :func:`link_custom_ops` reads of ``run`` for ``module`` (the file ``path``'s ops)."""
    own = {key for op in module.ops for key in op.keys}
    elsewhere = {key: op for op in run.ops if op.path != path for key in op.keys}
    return (
        run.has_unresolved_registration,
        frozenset((r.kind, r.target) for r in run.registrations),
        tuple(r for r in run.registrations if r.target in own and r.path != path),
        tuple(elsewhere.get(r.target) for r in module.foreign),
    )


def open_cache(directory: str, settings: Settings, job: FileJob[Any], needs: Needs) -> ResultCache:
    """The result cache under ``directory`` for runs of ``job`` with these settings and needs."""
    from autograd_lint.model.result_cache import ResultCache, job_context

    return ResultCache(directory, job_context(settings, job, needs))


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
