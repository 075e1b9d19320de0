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
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from autograd_lint.coverage import bridge

PHASES = ("forward", "backward", "double_backward", "jvp")
MODES = ("eager", "compiled")
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


class Tally:
    """Counts phases per Function class; fed by the bridge and the compile recorder.

    Counting runs once per forward and per backward node, so it is kept to
    two dictionary lookups: counts are flat while the run lasts.
    """

    def __init__(self) -> None:
        # (class, phase, mode, thread kind) -> count
        self._flat: dict[tuple[type, str, str, str], int] = {}
        self._extra: dict[FunctionKey, Counts] = {}
        # Thread ident -> kind, decided when a thread is first seen.
        self._kinds: dict[int, str] = {}

    def _kind(self) -> str:
        ident = threading.get_ident()
        kind = self._kinds.get(ident)
        if kind is None:
            kind = self._kinds[ident] = _thread_kind(ident)
        return kind

    def count(self, cls: type, phase: str, mode: str) -> None:
        key = (cls, phase, mode, self._kind())
        self._flat[key] = self._flat.get(key, 0) + 1

    def on_node(self, node: Any, entry: str) -> None:
        """Bridge listener: the engine entered a Function's backward or jvp."""
        cls = node._forward_cls
        kind = self._kind()
        flat = self._flat
        if entry == "apply_jvp":
            key = (cls, "jvp", "eager", kind)
        else:
            if _is_grad_enabled():
                double = (cls, "double_backward", "eager", kind)
                flat[double] = flat.get(double, 0) + 1
            key = (cls, "backward", "eager", kind)
        flat[key] = flat.get(key, 0) + 1

    def on_compiled(self, cls: type, phase: str) -> None:
        """Compile-recorder listener: compiled code that traced ``cls``'s ``phase`` ran."""
        self.count(cls, phase, "compiled")

    @property
    def counts(self) -> dict[FunctionKey, Counts]:
        """phase -> mode -> thread kind -> count per located Function, torch's own left out."""
        result: dict[FunctionKey, Counts] = {}
        _merge_into(result, self._extra)
        keys: dict[type, FunctionKey | None] = {}
        for (cls, phase, mode, kind), n in self._flat.items():
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
_is_grad_enabled: Any = None


def install(tally: Tally) -> None:
    """Feed ``tally`` from torch: ``Function.apply`` for forward, the bridge for the rest."""
    global _tally, _is_grad_enabled
    import torch

    _is_grad_enabled = torch.is_grad_enabled
    if _tally is None:
        original = torch.autograd.Function.__dict__["apply"].__func__

        @functools.wraps(original)
        def apply(cls: type, *args: Any, **kwargs: Any) -> Any:
            if _tally is not None:
                _tally.count(cls, "forward", "eager")
            return original(cls, *args, **kwargs)

        # Dynamo recognises ``Function.apply`` by name and never calls it
        # while tracing, so compiled code does not pass through here.
        torch.autograd.Function.apply = classmethod(apply)  # type: ignore[assignment]
        bridge.install()
    if _tally is not None:
        bridge.remove_listener(_tally.on_node)
    _tally = tally
    bridge.add_listener(tally.on_node)


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
    """Join run-time ``counts`` with analyser ``specs`` (:class:`~autograd_lint.spec.FunctionSpec`).

    Functions that ran but that the analyser did not report are kept when
    their file lies under one of ``roots`` (all of them when ``roots`` is
    empty).
    """
    rows: dict[FunctionKey, Row] = {}
    for spec in specs:
        key = (os.path.realpath(spec.path), spec.qualname)
        rows[key] = Row(key[0], spec.qualname, spec.position.line, spec.backward_method is not None)
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
