"""Running the work done for one file so that nothing in it can end the run.

Every per-file stage (gate, text scans, parse, model, rules, fixes, gen-tests
analysis) runs inside :func:`run_guarded`, and names itself with :func:`stage`.
Any exception, ``RecursionError`` and ``MemoryError`` included, becomes one
:class:`~autograd_lint.model.source.SourceError` naming the file and the stage:
the front ends print it as one line, skip that file, report every other file and
exit 2.

Valid code can be deep: CPython 3.11 compiles expressions nested about 2,990
deep (a ``return`` summing 2,990 terms, 2,989 chained attributes), and libcst's
parser, its code generator and position provider and our own tree walks recurse
once or more per level.  So the work runs in a thread with a large stack (one per process, reused) and a
raised recursion limit, both measured (see ``docs/robustness.md``): with
:data:`RECURSION_LIMIT` every expression CPython compiles at its default limit
is analysed, fixed and given positions, and :data:`STACK_BYTES` leaves many times
the C stack those frames need.  The stack is address space, not memory: only
the pages a deep file touches are used.

The same work runs with the cyclic collector's thresholds raised
(:func:`fewer_collections`): its resources, like the stack's, are set for the
analysis of files and put back after.
"""

from __future__ import annotations

import ast
import gc
import os
import queue
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from autograd_lint.model import statements
from autograd_lint.model.source import SourceError, keep_python_tree

T = TypeVar("T")

# The deepest expression CPython 3.11 compiles (about 2,990 levels) needs about
# 6,100 frames to be checked and fixed (worst shape measured; see docs/robustness.md).
RECURSION_LIMIT = 20_000
# libcst's native parser needs up to 6.6 kB of C stack per nesting level (nested
# calls), Python frames that pass through C about 1 kB: 512 MiB covers the limit
# above with a wide margin, and the parser's depth check (see analysis) the rest.
STACK_BYTES = 512 * 1024 * 1024
# CPython's default recursion limit: code it compiles at that limit is what must be analysed.
CPYTHON_RECURSION_LIMIT = 1000
# How much of an exception's own message goes into the line printed for it.
_MESSAGE_CHARS = 160
# The most text handed to CPython's parser, and the most syntax nodes handed on to
# libcst's.  libcst's parser needs 2.8 to 4.7 kB per node at its peak (measured:
# 100,000 list elements 448 MB; 100,000 lines of calls, 1.7 million nodes, 4.8 GB)
# and aborts the whole process when memory runs out; CPython's about 1 kB per node
# (a 3 MB list of 1,000,000 elements: 0.96 GB).  The largest file of torch has
# 162,000 nodes in 1.4 MB (see docs/robustness.md).
MAX_PARSED_CHARS = 4_000_000
MAX_PARSED_NODES = 300_000
# Python 3.10's parser builds a tree of any depth (a 20,000-deep attribute chain);
# only its compiler stops, about 2,980 levels deep, where 3.11 and later stop in
# the parser already (measured on 3.10.13, 3.11.7, 3.12.1, 3.13.0).  So on 3.10 the
# text is also compiled to code, which is what ``python`` does with a file (compiling
# the tree instead stops at 996 levels: converting it back counts every level).
_AST_ONLY_ACCEPTS_DEEPER = sys.version_info < (3, 11)
# A node takes at least half a character (``0,``): shorter texts are not counted.
_UNCOUNTED_CHARS = MAX_PARSED_NODES // 2

_state = threading.local()


@contextmanager
def stage(path: str, name: str) -> Iterator[None]:
    """Name the stage of the work on ``path`` that runs inside this block.

    An exception raised inside becomes a :class:`SourceError` that says so; a
    ``SourceError`` (a problem of the file, already described) passes unchanged.
    """
    try:
        yield
    except SourceError:
        raise
    except Exception as error:  # RecursionError and MemoryError are Exceptions too
        raise SourceError(path, describe(error, name)) from None


def describe(error: BaseException, stage_name: str) -> str:
    """One line saying what went wrong in ``stage_name``, whatever ``error`` holds."""
    if isinstance(error, RecursionError):
        return f"too deeply nested to analyse (recursion limit reached while {stage_name})"
    if isinstance(error, MemoryError):
        return f"ran out of memory while {stage_name}"
    return f"internal error while {stage_name}, please report it: {type(error).__name__}{_message(error)}"


def _message(error: BaseException) -> str:
    # A KeyError's message is the repr of its key, which for a libcst node is
    # dozens of lines (and can itself recurse too deep): name such arguments by type.
    if not all(isinstance(arg, (str, int, float)) for arg in error.args):
        text = ", ".join(
            repr(arg) if isinstance(arg, (str, int, float)) else f"<{type(arg).__name__}>" for arg in error.args
        )
    else:
        try:
            text = str(error)
        except Exception:
            text = ""
    lines = text.strip().splitlines()
    if not lines:
        return ""
    first = lines[0]
    if len(first) > _MESSAGE_CHARS or len(lines) > 1:
        first = first[:_MESSAGE_CHARS] + " ..."
    return f": {first}"


# The cyclic garbage collector's thresholds while files are analysed.  At Python's defaults
# its collections took 10% of a run over the torch tree, and 40% of a check of a large
# buffer in the server (0.66 of 1.63 s on test_custom_ops.py: the parts of earlier versions
# kept for the next parse are traversed again and again): an analysis builds and drops
# trees of many objects, with little cyclic garbage among them (libcst nodes do not link
# to their parents).
_GC_THRESHOLDS = (10_000, 50, 100)


_collections_lock = threading.Lock()
_raised_for = 0  # how many bodies of fewer_collections run now, in any thread
_thresholds_before: tuple[int, ...] = ()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with the collector's thresholds raised to :data:`_GC_THRESHOLDS` (never
    lowered), and put them back when the last body that runs ends.

    Counted, not saved per call: the server's threads check two documents at once when
    no deep-stack worker could be started, and a per-call save could restore the raised
    values for good.
    """
    global _raised_for, _thresholds_before
    with _collections_lock:
        if _raised_for == 0:
            _thresholds_before = gc.get_threshold()
            gc.set_threshold(*(max(now, analysing) for now, analysing in zip(_thresholds_before, _GC_THRESHOLDS)))
        _raised_for += 1
    try:
        yield
    finally:
        with _collections_lock:
            _raised_for -= 1
            if _raised_for == 0:
                gc.set_threshold(*_thresholds_before)


def run_guarded(path: str, stage_name: str, work: Callable[[], T]) -> T:
    """``work()``, run with room for deep code; raises :class:`SourceError` for any failure.

    ``stage_name`` names what ``work`` does where no inner :func:`stage` says more.
    Calls nest: inside a guarded call (or :func:`in_deep_stack`), ``work`` runs directly.
    """

    def guarded() -> T:
        with stage(path, stage_name):
            return work()

    return in_deep_stack(guarded)


def in_deep_stack(work: Callable[[], T]) -> T:
    """``work()`` on this process's large-stack thread with the raised recursion limit,
    re-raising here whatever it raises; :func:`run_guarded` calls inside run directly.

    Run a whole batch of files through one call, each guarded by :func:`run_guarded`
    inside: handing each file to the thread and back cost about 0.1 ms, 0.2 s of a
    serial run over the torch tree.
    """
    if getattr(_state, "active", False):
        return work()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        _state.active = True
        try:
            outcome.append(work())
        except BaseException as error:  # re-raised in the caller's thread
            failure.append(error)
        finally:
            _state.active = False

    worker = _worker()
    if worker is None:  # no thread with a large stack could be made: go on with what there is
        target()
    else:
        worker.run(target)
    if failure:
        raise failure[0]
    return outcome[0]


class _DeepStackWorker:
    """A long-lived thread with a large stack that runs this process's guarded work.

    One thread serves every file: starting a thread per file cost about 0.3 ms,
    0.75 s of a serial run over the torch tree.  Callers hand it one piece of
    work at a time and wait for it (the recursion limit it raises is the
    interpreter's, so two pieces must not overlap).
    """

    def __init__(self) -> None:
        self.pid = os.getpid()  # a forked child has the object but not the thread
        self._requests: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]] = queue.SimpleQueue()
        self._turn = threading.Lock()
        thread = threading.Thread(target=self._serve, name="autograd-lint deep stack", daemon=True)
        thread.start()

    def _serve(self) -> None:
        while True:
            work, done = self._requests.get()
            try:
                work()  # catches everything itself (run_guarded's target)
            finally:
                done.set()

    def run(self, target: Callable[[], None]) -> None:
        done = threading.Event()
        with self._turn:
            self._requests.put((_with_limit(target, sys.getrecursionlimit()), done))
            done.wait()


_worker_lock = threading.Lock()
_current: _DeepStackWorker | None = None


def _worker() -> _DeepStackWorker | None:
    """This process's deep-stack worker, started on first use; None when no such thread can be made."""
    global _current
    with _worker_lock:
        if _current is None or _current.pid != os.getpid():
            try:
                previous_size = threading.stack_size(STACK_BYTES)
            except (ValueError, RuntimeError):
                return None
            try:
                _current = _DeepStackWorker()
            except (RuntimeError, MemoryError):
                return None
            finally:
                threading.stack_size(previous_size)
        return _current


def _with_limit(target: Callable[[], None], previous: int) -> Callable[[], None]:
    # The limit is the interpreter's, not the thread's: raised only while the
    # caller waits for this thread, and put back afterwards.
    def run() -> None:
        sys.setrecursionlimit(max(previous, RECURSION_LIMIT))
        try:
            target()
        finally:
            sys.setrecursionlimit(previous)

    return run


class TooLarge(Exception):
    """Code too large for its parse to stay within the memory bound of one file; ``str()`` says why."""


def compile_like_cpython(text: str, path: str) -> None:
    """Parse ``text`` with CPython as ``python`` would, at its default recursion limit.

    Raises what ``compile`` raises: ``SyntaxError`` (and its subclasses),
    ``ValueError`` for NUL bytes, ``RecursionError`` or ``MemoryError`` for code
    nested deeper than CPython accepts; and :class:`TooLarge` for a text that
    libcst (or CPython) could not parse within one file's memory bound
    (:data:`MAX_PARSED_CHARS`, :data:`MAX_PARSED_NODES`).  Called before any libcst parse: libcst's
    native parser takes time and memory that grow faster than the depth (a
    20,000-term sum runs for minutes, 4,000 nested calls take 1.8 GB) and
    overflows its stack further on, where CPython stops with an error.  Within the
    raised limit of :func:`run_guarded` CPython would accept far deeper code, so
    the limit is lowered to the default, counted from the current depth, for the call.
    """
    if len(text) > MAX_PARSED_CHARS:
        raise TooLarge(f"too large to analyse ({len(text):,} characters; the limit is {MAX_PARSED_CHARS:,})")
    rewritten = "\r" in text
    if rewritten:
        # ``python`` and ``import`` read a file with universal newlines; given the text
        # as it is, 3.10 and 3.11 compile a backslash before a final "\r\n" that they
        # refuse in a file (3.12 and later refuse it either way).
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    frames = 0
    frame = sys._getframe()
    while frame is not None:
        frames += 1
        frame = frame.f_back
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(CPYTHON_RECURSION_LIMIT + frames)
    try:
        tree = compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        if _AST_ONLY_ACCEPTS_DEEPER:
            try:
                compile(text, path, "exec", dont_inherit=True)
            except SyntaxError:
                # This compile is here for its depth limit only (RecursionError).  The
                # errors the compiler finds after parsing (``nonlocal`` at module level)
                # go on as on 3.11+, where the parse alone is the check, so every
                # interpreter reports the same code the same way.
                pass
    finally:
        sys.setrecursionlimit(previous)
    if not rewritten:
        statements.remember(text, tree)
    if len(text) > _UNCOUNTED_CHARS:
        nodes = statements.node_count(text, tree)
        if nodes > MAX_PARSED_NODES:
            raise TooLarge(
                f"too large to analyse ({nodes:,} syntax nodes in one parse; the limit is {MAX_PARSED_NODES:,}, "
                "about 1.4 GB for libcst's parser)"
            )
    if not rewritten:
        # The tree ast.parse(text) gives (the same flags; the file name is not in it), for the
        # rules that read the module with ast (source.python_tree): not parsed a second time.
        # Kept only for a text that goes on to be analysed: a rejected one's tree is freed here.
        keep_python_tree(text, tree)
