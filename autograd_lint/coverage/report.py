"""The per-Function report: how often each Function's code ran, where, and how.

At run time a :class:`Tally` counts, per ``torch.autograd.Function`` class,
each phase -- ``forward`` (``Function.apply``), ``backward`` (the engine
entering ``backward``/``vjp``), ``double_backward`` (a backward that ran
with ``create_graph=True``, so its own graph was recorded to be
differentiated again) and ``jvp`` (forward-mode AD) -- split by mode
(``eager`` or ``compiled``: code Dynamo traced whose compiled graph ran) and
by kind of thread (``main``, ``thread`` for a :mod:`threading` thread,
``native`` for a thread made outside Python: autograd engine or device
threads, ``_thread``, other libraries).

:func:`build` joins those counts with the Functions the static analyser
finds in the measured source, so a Function that never ran at all still
shows, with zeros.

Every run is counted twice: for the Function class applied, and for the
class whose method's code ran (``Sub.apply`` with a ``backward`` inherited
from ``Base`` runs ``Base``'s backward code).  "Never ran" is decided on the
second: the code.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from autograd_lint.coverage import bridge
from autograd_lint.sidefiles import SideFileError, load_json

PHASES = ("forward", "backward", "double_backward", "jvp")
THREAD_KINDS = ("main", "thread", "native")
REPORT_VERSION = 2

# (path, qualname): how Functions are joined between run time and the analyser.
FunctionKey = tuple[str, str]
# phase -> mode -> thread kind -> count
Counts = dict[str, dict[str, dict[str, int]]]


def _function_key(cls: type) -> FunctionKey | None:
    """Where ``cls`` is defined, or None for torch's own Functions and unlocatable ones.

    The Function PyTorch builds for a custom op with ``register_autograd``
    (``torch/_library/autograd.py``) is keyed by the user's backward function,
    as the report's custom-op rows are.
    """
    backward = _custom_op_backward(cls)
    try:
        source = inspect.getsourcefile(backward if backward is not None else cls)
    except (TypeError, OSError):
        return None
    if source is None:
        return None
    path = os.path.realpath(source)
    if path.startswith(_torch_dir()):
        return None
    return path, (backward if backward is not None else cls).__qualname__


# The module and class-name prefix of the Function torch 2.13 builds per custom op.
GENERATED_MODULE = "torch._library.autograd"
GENERATED_PREFIX = "GeneratedBackwardFor_"


def _custom_op_backward(cls: type) -> Any:
    """The backward registered with ``register_autograd`` when ``cls`` is the Function torch built
    for a custom op, else None.  Read from the ``info`` (the op) its ``backward`` closes over,
    so a backward registered again later is the one named."""
    if getattr(cls, "__module__", None) != GENERATED_MODULE or not cls.__name__.startswith(GENERATED_PREFIX):
        return None
    method = vars(cls).get("backward")
    function = getattr(method, "__func__", method)
    # supports_tensorlist wraps the generated backward: look one closure deeper.
    for _ in range(3):
        code = getattr(function, "__code__", None)
        if code is None or not function.__closure__:
            return None
        cells = dict(zip(code.co_freevars, function.__closure__))
        if "info" in cells:
            return getattr(cells["info"].cell_contents, "_backward_fn", None)
        function = next((c.cell_contents for c in function.__closure__ if inspect.isfunction(c.cell_contents)), None)
    return None


@functools.lru_cache(maxsize=None)
def _torch_dir() -> str:
    import torch

    return os.path.realpath(os.path.dirname(torch.__file__)) + os.sep


class _ThreadCounts(threading.local):
    """One set of counters per thread: its kind and, per phase, class -> runs.

    The attributes are what the hot paths update (``Function.apply`` here,
    the node entries in :mod:`.bridge`): one attribute load and a dict
    increment, no lock (each thread writes only its own dicts) and no
    per-call thread lookup.  A thread's counters are registered once, when
    it first counts, so they outlive the thread.
    """

    def __init__(self, registry: list[tuple[str, dict[str, dict[Any, int]]]]) -> None:
        self.kind = _thread_kind(threading.get_ident())
        self.forward: defaultdict[type, int] = defaultdict(int)
        self.backward: defaultdict[type, int] = defaultdict(int)
        self.double_backward: defaultdict[type, int] = defaultdict(int)
        self.jvp: defaultdict[type, int] = defaultdict(int)
        # (class, phase) -> runs of compiled code
        self.compiled: defaultdict[tuple[type, str], int] = defaultdict(int)
        phases = {phase: getattr(self, phase) for phase in PHASES}
        registry.append((self.kind, {**phases, "compiled": self.compiled}))


@dataclass
class Runs:
    """Counts per Function: ``applied`` by the class applied, ``code`` by the class whose method ran."""

    applied: dict[FunctionKey, Counts]
    code: dict[FunctionKey, Counts]


class Tally:
    """Counts phases per Function class; fed by ``Function.apply``, the bridge and the compile recorder.

    Counting runs once per forward and per backward node, so it is done
    inline in those entries, into per-thread dicts (:class:`_ThreadCounts`),
    and only joined into :attr:`counts` at the end.
    """

    def __init__(self) -> None:
        # (thread kind, phase or "compiled" -> counts) for every thread that counted.
        self._threads: list[tuple[str, dict[str, dict[Any, int]]]] = []
        self.local = _ThreadCounts(self._threads)
        # Counts merged from other processes.
        self._extra = Runs({}, {})

    def count(self, cls: type, phase: str, mode: str) -> None:
        if mode == "eager":
            getattr(self.local, phase)[cls] += 1
        else:
            self.local.compiled[cls, phase] += 1

    def on_compiled(self, cls: type, phase: str) -> None:
        """Compile-recorder listener: compiled code that traced ``cls``'s ``phase`` ran."""
        self.count(cls, phase, "compiled")

    def _flat(self) -> dict[tuple[type, str, str, str], int]:
        """(class, phase, mode, thread kind) -> count, over every thread so far."""
        flat: dict[tuple[type, str, str, str], int] = {}
        for kind, by_phase in list(self._threads):
            for phase, counts in by_phase.items():
                # dict() copies atomically: a thread may still be counting.
                for what, n in dict(counts).items():
                    if phase == "compiled":
                        key = (what[0], what[1], "compiled", kind)
                    else:
                        key = (what, phase, "eager", kind)
                    flat[key] = flat.get(key, 0) + n
        return flat

    def runs(self) -> Runs:
        """Every count so far, by Function applied and by the class whose code ran; torch's own left out."""
        runs = Runs({}, {})
        _merge_into(runs.applied, self._extra.applied)
        _merge_into(runs.code, self._extra.code)
        keys: dict[type | None, FunctionKey | None] = {None: None}
        for (cls, phase, mode, kind), n in self._flat().items():
            # Compiled counts come from the recorder, which knows only the
            # code Dynamo traced: their class is the one defining it.
            owner = _code_owner(cls, phase)
            for klass, into in ((cls, runs.applied), (owner, runs.code)):
                if klass not in keys:
                    keys[klass] = _function_key(klass)  # type: ignore[arg-type]
                key = keys[klass]
                if key is not None:
                    target = into.setdefault(key, {}).setdefault(phase, {}).setdefault(mode, {})
                    target[kind] = target.get(kind, 0) + n
        return runs

    def merge(self, runs: Runs) -> None:
        """Add counts from another process (an xdist worker)."""
        _merge_into(self._extra.applied, runs.applied)
        _merge_into(self._extra.code, runs.code)

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        runs = self.runs()
        return {
            view: [{"path": p, "qualname": q, "counts": c} for (p, q), c in getattr(runs, view).items()]
            for view in ("applied", "code")
        }

    @staticmethod
    def from_json(data: Mapping[str, Iterable[Mapping[str, Any]]]) -> Runs:
        applied, code = (
            {(row["path"], row["qualname"]): row["counts"] for row in data.get(view, ())} for view in ("applied", "code")
        )
        return Runs(applied, code)


# The method whose code each phase runs (backward: see _code_owner).
PHASE_METHODS = {"forward": "forward", "backward": "backward", "double_backward": "backward", "jvp": "jvp"}


def _code_owner(cls: type, phase: str) -> type | None:
    """The class in ``cls``'s MRO that defines the method ``phase`` ran, as torch picks it."""
    name = PHASE_METHODS[phase]
    if name == "backward":
        import torch

        # As BackwardCFunction._get_user_fn: vjp when overridden, else backward.
        if getattr(cls, "vjp", None) is not torch.autograd.Function.vjp:
            name = "vjp"
    for klass in getattr(cls, "__mro__", ()):
        if name in vars(klass):
            return klass
    return None


def _merge_into(target: dict[FunctionKey, Counts], counts: Mapping[FunctionKey, Counts]) -> None:
    for key, phases in counts.items():
        mine = target.setdefault(key, {})
        for phase, modes in phases.items():
            for mode, kinds in modes.items():
                into = mine.setdefault(phase, {}).setdefault(mode, {})
                for kind, n in kinds.items():
                    into[kind] = into.get(kind, 0) + n


def _thread_kind(ident: int) -> str:
    """``main``, ``thread`` (started by :mod:`threading`) or ``native`` (made outside Python).

    Looks the thread up without :func:`threading.current_thread`, which
    would register a dummy thread object for a native thread.
    """
    if ident == threading.main_thread().ident:
        return "main"
    for thread in threading.enumerate():
        if thread.ident == ident and not isinstance(thread, threading._DummyThread):
            return "thread"
    return "native"


_tally: Tally | None = None
# The active tally's per-thread counters, read by the Function.apply wrapper.
_local: _ThreadCounts | None = None
# What torch 2.13's Function.apply refers to, in order: the fast wrapper below
# inlines its common path only while it still reads exactly these names.
APPLY_NAMES = (
    "_is_setup_context_defined", "setup_context", "forward", "torch", "_C",
    "_are_functorch_transforms_active", "_functorch", "utils", "unwrap_dead_wrappers",
    "super", "apply", "RuntimeError", "custom_function_call",
)
# How Function.apply was wrapped: "inline" (torch's common path inlined: no
# extra frame per forward) or "wrapper" (counts, then calls torch's); "" before install().
apply_hook = ""


def _wrap_apply(original: Any) -> Any:
    """The ``Function.apply`` replacement: counts the forward on this thread, then runs it.

    When torch's ``apply`` is the one this was written against, its common
    path (no ``setup_context``, no functorch transform active) is inlined, so
    a forward costs no Python frame more than without the plugin; every
    other call goes to torch's own ``apply``.
    """
    import torch
    from torch.autograd import function as torch_function

    functorch_utils = torch._functorch.utils
    transforms_active = torch._C._are_functorch_transforms_active
    base_setup_context = torch_function._SingleLevelFunction.setup_context
    function_class = torch.autograd.Function

    if original.__code__.co_names != APPLY_NAMES:

        @functools.wraps(original)
        def apply(cls: type, *args: Any, **kwargs: Any) -> Any:
            if _local is not None:
                _local.forward[cls] += 1
            return original(cls, *args, **kwargs)

        return apply, "wrapper"

    @functools.wraps(original)
    def apply_inline(cls: type, *args: Any, **kwargs: Any) -> Any:
        if _local is not None:
            _local.forward[cls] += 1
        # torch's Function.apply, when it would neither bind default
        # arguments nor defer to custom_function_call.
        # ``!=`` as torch's _is_setup_context_defined has it.
        if not (cls.setup_context != base_setup_context) and not transforms_active():  # noqa: SIM202
            args = functorch_utils.unwrap_dead_wrappers(args)
            return super(function_class, cls).apply(*args, **kwargs)  # type: ignore[misc]
        return original(cls, *args, **kwargs)

    return apply_inline, "inline"


def install(tally: Tally) -> None:
    """Feed ``tally`` from torch: ``Function.apply`` for forward, the bridge for the rest."""
    global _tally, _local, apply_hook
    import torch

    if _tally is None:
        original = torch.autograd.Function.__dict__["apply"].__func__
        apply, apply_hook = _wrap_apply(original)
        # Dynamo recognises ``Function.apply`` by name and never calls it
        # while tracing, so compiled code does not pass through here.
        torch.autograd.Function.apply = classmethod(apply)  # type: ignore[assignment]
        bridge.install()
    _tally = tally
    _local = tally.local
    bridge.set_counters(tally.local)


@dataclass
class Row:
    """One Function in the report.

    ``counts`` are the runs with this class applied; ``code_counts`` the runs
    of the methods this class defines, whichever class was applied.
    ``backward_code_runs`` is how often the backward code this Function uses
    ran: its own, or the one it inherits from ``backward_defined_in``.
    """

    path: str
    qualname: str
    line: int | None
    has_backward: bool | None  # None: not known (found only at run time, no source)
    counts: Counts = field(default_factory=dict)
    code_counts: Counts = field(default_factory=dict)
    backward_defined_in: FunctionKey | None = None  # None: here, or not known
    backward_code_runs: int = 0
    # What kind of code the row is about: "autograd.Function", or "custom_op" for the backward
    # registered on a custom op (the row's path, qualname and line are the backward function's).
    kind: str = "autograd.Function"
    # Custom-op rows: the op's name.
    op: str | None = None
    # The lines of the backward code the row uses (a Function's backward or vjp, wherever it
    # is defined; a custom op's backward and setup_context): coverage's data, from every
    # process of the run, says whether they ran where no counter was (a multiprocessing child).
    code_lines: dict[str, CodeLines] = field(default_factory=dict)

    def total(self, phase: str, mode: str | None = None, counts: Counts | None = None) -> int:
        modes = (self.counts if counts is None else counts).get(phase, {})
        return sum(
            n for m, kinds in modes.items() if mode is None or m == mode for n in kinds.values()
        )

    @property
    def backward_lines_ran(self) -> bool:
        """Whether coverage saw a statement of the backward's body run."""
        lines = self.code_lines.get("backward")
        return lines is not None and bool(lines.executed)

    @property
    def backward_ran(self) -> bool:
        """Whether the backward code this Function uses ever ran, through any class, as counted,
        or as coverage saw a line of its body run (in a child process, which has no counters; a
        custom op's backward under ``torch.compile``)."""
        return self.backward_code_runs > 0 or self.total("backward") > 0 or self.backward_lines_ran

    def threads(self, phase: str) -> list[str]:
        kinds = {k for kinds in self.counts.get(phase, {}).values() for k in kinds}
        return [k for k in THREAD_KINDS if k in kinds]


@dataclass
class CodeLines:
    """The statements of one backward (or setup_context) function, and which of them coverage saw run.

    ``executed`` and ``missing`` are None when coverage was not measuring.
    """

    path: str
    qualname: str
    line: int  # the ``def`` line
    last_line: int
    executed: list[int] | None = None
    missing: list[int] | None = None

    def to_json(self, root: str) -> dict[str, Any]:
        return {
            "path": relative_name(self.path, root),
            "qualname": self.qualname,
            "line": self.line,
            "executed": self.executed,
            "missing": self.missing,
        }


def build(runs: Runs, specs: Sequence[Any], roots: Sequence[str]) -> list[Row]:
    """Join run-time ``runs`` with the analyser's Functions and custom-op backwards.

    ``specs`` are :class:`~autograd_lint.coverage.discovery_worker.Discovered`
    (or anything with their ``path``, ``qualname``, ``line``,
    ``has_backward`` and ``backward_owner``) and
    :class:`~autograd_lint.coverage.discovery_worker.DiscoveredOp`.  Functions
    that ran but that the analyser did not report are kept when their file
    lies under one of ``roots`` (all of them when ``roots`` is empty).
    """
    rows: dict[FunctionKey, Row] = {}
    for spec in specs:
        if hasattr(spec, "op"):
            backward = spec.backward
            key = (os.path.realpath(backward.path), backward.name)
            row = rows[key] = Row(key[0], backward.name, backward.line, True, kind="custom_op", op=spec.op)
            for role, code in (("backward", backward), ("setup_context", spec.setup_context)):
                if code is not None:
                    row.code_lines[role] = CodeLines(os.path.realpath(code.path), code.name, code.line, code.last_line)
            continue
        key = (os.path.realpath(spec.path), spec.qualname)
        owner = spec.backward_owner
        owner_key = None if owner is None else (os.path.realpath(owner[0]), owner[1])
        row = rows[key] = Row(key[0], spec.qualname, spec.line, spec.has_backward,
                              backward_defined_in=None if owner_key == key else owner_key)
        code = getattr(spec, "backward", None)
        if code is not None:
            row.code_lines["backward"] = CodeLines(os.path.realpath(code.path), code.name, code.line, code.last_line)
    real_roots = [os.path.realpath(r) for r in roots]
    for view in ("applied", "code"):
        for key, phases in getattr(runs, view).items():
            row = rows.get(key)
            if row is None:
                if real_roots and not any(_is_under(key[0], r) for r in real_roots):
                    continue
                row = rows[key] = Row(key[0], key[1], None, None)
            if view == "applied":
                row.counts = phases
            else:
                row.code_counts = phases
    for key, row in rows.items():
        owner_counts = runs.code.get(row.backward_defined_in or key, {})
        row.backward_code_runs = row.total("backward", counts=owner_counts)
    return sorted(rows.values(), key=lambda r: (r.path, r.line or 0, r.qualname))


def fill_lines(
    rows: Iterable[Row], statements: Any, executed: Any
) -> None:
    """Set each row's executed and missing backward (and custom-op setup_context) lines.

    ``statements(path)`` gives the file's statement lines as coverage counts
    them (exclusions such as ``# pragma: no cover`` left out), ``executed(path)``
    the lines it saw run; either may return None (not measured, not readable),
    which leaves the lines unknown.  A function's lines are the statements
    after its ``def`` line, up to its last line.
    """
    for row in rows:
        for code in row.code_lines.values():
            lines, ran = statements(code.path), executed(code.path)
            if lines is None or ran is None:
                continue
            body = sorted(n for n in lines if code.line < n <= code.last_line)
            code.executed = [n for n in body if n in ran]
            code.missing = [n for n in body if n not in ran]


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def unexercised(rows: Iterable[Row]) -> list[Row]:
    """Functions with a backward (or not known to lack one) whose backward code never ran."""
    return [r for r in rows if r.has_backward is not False and not r.backward_ran]


def exercised_percent(rows: Sequence[Row]) -> float:
    """Share of Functions with a backward whose backward code ran, in percent (100 with none)."""
    candidates = [r for r in rows if r.has_backward is not False]
    if not candidates:
        return 100.0
    return 100.0 * sum(r.backward_ran for r in candidates) / len(candidates)


def _cell(row: Row, phase: str) -> str:
    eager, compiled = row.total(phase, "eager"), row.total(phase, "compiled")
    return f"{eager}+{compiled}c" if compiled else str(eager)


def relative_name(path: str, root: str) -> str:
    """``path`` relative to ``root`` with ``/`` separators when it lies under it, else as it is."""
    if _is_under(path, root):
        return os.path.relpath(path, root).replace(os.sep, "/")
    return path


def format_table(rows: Sequence[Row], root: str) -> list[str]:
    """The terminal table: counts as ``eager`` or ``eager+compiled``c, and backward threads.

    "backward code" is how often the backward code the Function uses ran,
    through any class, with the class it comes from when inherited; "0
    (lines ran)" when only coverage saw it run (in a process with no counters).
    """
    header = ("Function", "forward", "backward", "backward code", "double-bwd", "jvp", "backward threads")
    table = [header]
    for row in rows:
        where = relative_name(row.path, root)
        name = f"{where}:{row.line}::{row.qualname}" if row.line else f"{where}::{row.qualname}"
        if row.op is not None:
            name += f" (backward of {row.op})"
        if row.has_backward is False:
            backward = code = "-"
        else:
            backward = _cell(row, "backward")
            code = str(row.backward_code_runs)
            if not row.backward_code_runs and row.backward_lines_ran:
                code += " (lines ran)"
            if row.backward_defined_in is not None:
                code += f" (of {row.backward_defined_in[1]})"
        table.append(
            (
                name,
                _cell(row, "forward"),
                backward,
                code,
                _cell(row, "double_backward"),
                _cell(row, "jvp"),
                ", ".join(row.threads("backward")) or "-",
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]


def format_lines(rows: Sequence[Row], root: str) -> list[str]:
    """The custom-op lines table: per registered backward and setup_context, statements run / in all, and the missing ones."""
    table = [("custom-op code", "lines run", "missing")]
    for row in rows:
        if row.op is None:
            continue  # a Function's lines show as "(lines ran)" in the main table
        for role, code in row.code_lines.items():
            name = f"{relative_name(code.path, root)}:{code.line}::{code.qualname} ({role} of {row.op})"
            if code.executed is None or code.missing is None:
                table.append((name, "not measured", "-"))
            else:
                total = len(code.executed) + len(code.missing)
                table.append((name, f"{len(code.executed)}/{total}", _ranges(code.missing) or "-"))
    if len(table) == 1:
        return []
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]


def _ranges(lines: Sequence[int]) -> str:
    """``3, 5-7`` for [3, 5, 6, 7] (consecutive statement numbers; a gap of non-statements is not bridged)."""
    parts: list[str] = []
    start = previous = None
    for n in lines:
        if previous is not None and n == previous + 1:
            previous = n
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = n
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ", ".join(parts)


def to_json(rows: Sequence[Row], root: str) -> str:
    """The JSON report; ``autograd-lint pragma --only-unexercised`` reads it back.

    Paths are relative to ``root`` (the pytest rootdir), so that a report
    made in one checkout (CI) applies to another.
    """
    return json.dumps(
        {
            "version": REPORT_VERSION,
            "root": root,
            "functions": [
                {
                    "kind": r.kind,
                    "path": relative_name(r.path, root),
                    "qualname": r.qualname,
                    "line": r.line,
                    "has_backward": r.has_backward,
                    "backward_ran": r.backward_ran,
                    "backward_defined_in": None
                    if r.backward_defined_in is None
                    else f"{relative_name(r.backward_defined_in[0], root)}::{r.backward_defined_in[1]}",
                    "counts": r.counts,
                    "code_counts": r.code_counts,
                    "lines": {role: c.to_json(root) for role, c in r.code_lines.items()},
                    **({"op": r.op} if r.kind == "custom_op" else {}),
                }
                for r in rows
            ],
        },
        indent=2,
        sort_keys=True,
    )


@dataclass(frozen=True, eq=False)
class CodeRuns:
    """One report entry as ``pragma --only-unexercised`` reads it: where, and how often each phase's code ran."""

    path: str  # relative to the report's root (``/``-separated), or absolute
    qualname: str
    phases: dict[str, int]
    # Whether coverage saw a line of the backward this class defines run, where no counter
    # was (a multiprocessing child).
    backward_lines_ran: bool = False

    def matches(self, path: str, qualname: str) -> bool:
        """Whether this entry is the Function ``qualname`` of file ``path`` in this checkout.

        A relative entry matches any file whose path ends with it, wherever
        the tree lies.
        """
        if qualname != self.qualname:
            return False
        real = os.path.realpath(path)
        if os.path.isabs(self.path):
            return real == os.path.realpath(self.path)
        parts = self.path.split("/")
        return real.split(os.sep)[-len(parts):] == parts


def read_code_runs(path: str) -> list[CodeRuns]:
    """The entries of a JSON report, with the runs of the code each Function defines, per phase.

    Read through the one side-file loader; raises :class:`SideFileError` naming
    ``path`` and the problem, for a file that is not such a report as for one
    that cannot be read.
    """
    data = load_json(path, "an autograd-cov report")
    if not isinstance(data, dict) or data.get("version") != REPORT_VERSION:
        raise SideFileError(
            path, f"not an autograd-cov report of version {REPORT_VERSION} (make it again with this autograd-lint)"
        )
    functions = data.get("functions")
    if not isinstance(functions, list) or not all(isinstance(f, dict) for f in functions):
        raise SideFileError(path, 'not an autograd-cov report: "functions" must be a list of objects')
    try:
        return [
            CodeRuns(
                str(f["path"]),
                str(f["qualname"]),
                {
                    phase: sum(int(n) for kinds in modes.values() for n in kinds.values())
                    for phase, modes in f["code_counts"].items()
                },
                # Lines of an inherited backward are the base's: they say nothing of this class's code.
                f.get("backward_defined_in") is None and bool(((f.get("lines") or {}).get("backward") or {}).get("executed")),
            )
            for f in functions
            if f.get("kind", "autograd.Function") == "autograd.Function"
        ]
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise SideFileError(
            path, f"not an autograd-cov report: malformed \"functions\" ({type(error).__name__}: {error})"
        ) from None
