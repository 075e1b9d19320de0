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

PHASES = ("forward", "backward", "double_backward", "jvp")
THREAD_KINDS = ("main", "thread", "native")
REPORT_VERSION = 1

# (path, qualname): how Functions are joined between run time and the analyser.
FunctionKey = tuple[str, str]
# phase -> mode -> thread kind -> count
Counts = dict[str, dict[str, dict[str, int]]]


def _function_key(cls: type) -> FunctionKey | None:
    """Where ``cls`` is defined, or None for torch's own Functions and unlocatable ones."""
    try:
        source = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None
    if source is None:
        return None
    path = os.path.realpath(source)
    if path.startswith(_torch_dir()):
        return None
    return path, cls.__qualname__


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
        self._extra: dict[FunctionKey, Counts] = {}

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

    @property
    def counts(self) -> dict[FunctionKey, Counts]:
        """phase -> mode -> thread kind -> count per located Function, torch's own left out."""
        result: dict[FunctionKey, Counts] = {}
        _merge_into(result, self._extra)
        keys: dict[type, FunctionKey | None] = {}
        for (cls, phase, mode, kind), n in self._flat().items():
            if cls not in keys:
                keys[cls] = _function_key(cls)
            key = keys[cls]
            if key is not None:
                target = result.setdefault(key, {}).setdefault(phase, {}).setdefault(mode, {})
                target[kind] = target.get(kind, 0) + n
        return result

    def merge(self, counts: Mapping[FunctionKey, Counts]) -> None:
        """Add counts from another process (an xdist worker)."""
        _merge_into(self._extra, counts)

    def to_json(self) -> list[dict[str, Any]]:
        return [{"path": p, "qualname": q, "counts": c} for (p, q), c in self.counts.items()]

    @staticmethod
    def from_json(rows: Iterable[Mapping[str, Any]]) -> dict[FunctionKey, Counts]:
        return {(row["path"], row["qualname"]): row["counts"] for row in rows}


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
    """One Function in the report."""

    path: str
    qualname: str
    line: int | None
    has_backward: bool | None  # None: not known (found only at run time, no source)
    counts: Counts = field(default_factory=dict)

    def total(self, phase: str, mode: str | None = None) -> int:
        modes = self.counts.get(phase, {})
        return sum(
            n for m, kinds in modes.items() if mode is None or m == mode for n in kinds.values()
        )

    @property
    def backward_ran(self) -> bool:
        return self.total("backward") > 0

    def threads(self, phase: str) -> list[str]:
        kinds = {k for kinds in self.counts.get(phase, {}).values() for k in kinds}
        return [k for k in THREAD_KINDS if k in kinds]


def build(counts: Mapping[FunctionKey, Counts], specs: Sequence[Any], roots: Sequence[str]) -> list[Row]:
    """Join run-time ``counts`` with the analyser's Functions.

    ``specs`` are :class:`~autograd_lint.coverage.discovery_worker.Discovered`
    (or anything with their ``path``, ``qualname``, ``line`` and
    ``has_backward``).  Functions that ran but that the analyser did not
    report are kept when their file lies under one of ``roots`` (all of them
    when ``roots`` is empty).
    """
    rows: dict[FunctionKey, Row] = {}
    for spec in specs:
        key = (os.path.realpath(spec.path), spec.qualname)
        rows[key] = Row(key[0], spec.qualname, spec.line, spec.has_backward)
    real_roots = [os.path.realpath(r) for r in roots]
    for key, phases in counts.items():
        row = rows.get(key)
        if row is None:
            if real_roots and not any(_is_under(key[0], r) for r in real_roots):
                continue
            row = rows[key] = Row(key[0], key[1], None, None)
        row.counts = phases
    return sorted(rows.values(), key=lambda r: (r.path, r.line or 0, r.qualname))


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def unexercised(rows: Iterable[Row]) -> list[Row]:
    """Functions with a backward (or not known to lack one) whose backward never ran."""
    return [r for r in rows if r.has_backward is not False and not r.backward_ran]


def exercised_percent(rows: Sequence[Row]) -> float:
    """Share of Functions with a backward whose backward ran, in percent (100 with none)."""
    candidates = [r for r in rows if r.has_backward is not False]
    if not candidates:
        return 100.0
    return 100.0 * sum(r.backward_ran for r in candidates) / len(candidates)


def _cell(row: Row, phase: str) -> str:
    eager, compiled = row.total(phase, "eager"), row.total(phase, "compiled")
    return f"{eager}+{compiled}c" if compiled else str(eager)


def format_table(rows: Sequence[Row], root: str) -> list[str]:
    """The terminal table: counts as ``eager`` or ``eager+compiled``c, and backward threads."""
    header = ("Function", "forward", "backward", "double-bwd", "jvp", "backward threads")
    table = [header]
    for row in rows:
        where = os.path.relpath(row.path, root) if _is_under(row.path, root) else row.path
        name = f"{where}:{row.line}::{row.qualname}" if row.line else f"{where}::{row.qualname}"
        backward = _cell(row, "backward") if row.has_backward is not False else "-"
        table.append(
            (
                name,
                _cell(row, "forward"),
                backward,
                _cell(row, "double_backward"),
                _cell(row, "jvp"),
                ", ".join(row.threads("backward")) or "-",
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]


def to_json(rows: Sequence[Row]) -> str:
    """The JSON report; ``autograd-lint pragma --only-unexercised`` reads it back."""
    return json.dumps(
        {
            "version": REPORT_VERSION,
            "functions": [
                {
                    "path": r.path,
                    "qualname": r.qualname,
                    "line": r.line,
                    "has_backward": r.has_backward,
                    "backward_ran": r.backward_ran,
                    "counts": r.counts,
                }
                for r in rows
            ],
        },
        indent=2,
        sort_keys=True,
    )


def read_phase_totals(path: str) -> dict[FunctionKey, dict[str, int]]:
    """Per Function in a JSON report, (real path, qualname) -> phase -> runs in any mode."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if data.get("version") != REPORT_VERSION:
        raise ValueError(f"not an autograd-cov report of version {REPORT_VERSION}")
    return {
        (os.path.realpath(f["path"]), f["qualname"]): {
            phase: sum(n for kinds in modes.values() for n in kinds.values())
            for phase, modes in f["counts"].items()
        }
        for f in data["functions"]
    }
