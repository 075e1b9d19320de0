"""The recorded-inputs file: what ``pytest --autograd-record`` writes and gen-tests reads.

The file is JSON, deterministic (sorted keys, cases ordered by call count, then
size, then text)::

    {"format": 2,
     "functions": {"pkg.ops.Square": {"module": "pkg.ops", "qualname": "Square",
                                       "path": "pkg/ops.py",
                                       "cases": [{"calls": 12, "args": [ARG, ...]}]}}}

(a custom op is an entry like a Function's, whose ``qualname`` is the op's
``"ns::name"`` and whose ``module``/``path`` are those of its Python function;
its ``args`` are the positional arguments of the call)

with ``"pickled"`` beside ``"args"`` in a case whose arguments are not all
tensors and literals (see :mod:`.pickled`): its ``args`` then also hold
``{"object": "module.Type"}``, and tensors that are sparse (``"layout"``) or
inside containers are described by structure only; the replay unpickles the
arguments (preceded by the Function class itself where the case has
``"with_function": true``: a class defined inside a function, which a test
cannot import).  Otherwise an ``ARG`` is one of ``{"tensor": TENSOR}``, ``{"value": 2}`` (None, bools,
ints, strings), ``{"float": "0.5"}`` (``repr``, so that inf and nan survive),
``{"dtype": "float32"}``, ``{"tuple": [ARG, ...]}`` or ``{"list": [ARG, ...]}``
(no tensors inside).  A case recorded while a default process group was
initialised (``torch.distributed``) has ``"process_group": {"backend": "gloo",
"world_size": 1, "rank": 0}`` beside its ``"args"``, with ``"mesh":
{"device_type": "cpu", "shape": [1]}`` when an argument held a device mesh (a
``DeviceMesh``, a ``DTensor``'s); it is part of what calls are counted by, and
a case without it was recorded without a process group.  A ``TENSOR`` is ``{"shape": [3, 4], "dtype": "float32",
"device": "cpu", "requires_grad": true}``, with ``"contiguous": false`` for a
non-contiguous one, and either ``"values"`` (the flattened elements, when there
are at most :data:`MAX_RECORDED_ELEMENTS`; non-finite ones as ``"nan"``,
``"inf"``, ``"-inf"``) or ``"stats"`` (see ``record_plugin.tensor_statistics``).
Calls are counted by structure (everything but values and stats); a case keeps
the values of the first call of its structure.  Format 1 (structure only) is
still read, and so are format 2 files written before ``"process_group"`` existed.  This module does not import torch: the plugin encodes arguments,
this module counts, merges and decodes them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autograd_lint.gentests.inputs import (
    Input,
    InputCase,
    ObjectInput,
    ProcessGroupInput,
    TensorInput,
    ValueInput,
    normalise_case,
)
from autograd_lint.files import write_atomically
from autograd_lint.sidefiles import SideFileError, load_json
from autograd_lint.model.spec import FunctionSpec

if TYPE_CHECKING:
    from autograd_lint.model.custom_ops import CustomOpSpec

FORMAT = 2
# Formats gen-tests reads and a new recording may replace.
READABLE_FORMATS = (1, 2)
# Tensors of at most this many elements are recorded with their values.
MAX_RECORDED_ELEMENTS = 64
DEFAULT_PATH = os.path.join(".autograd-lint", "inputs.json")
CASES_KEPT = 3
# Distinct cases counted per Function before further new ones are ignored:
# bounds memory in suites that call a Function with ever-changing shapes.
CASES_TRACKED = 64

EncodedArg = dict[str, Any]


def structure_key(args: list[EncodedArg], process_group: dict[str, Any] | None = None) -> str:
    """The canonical text of ``args`` without tensor values and statistics, and of the
    process group the call was made under: what calls are counted by."""
    def strip(arg: EncodedArg) -> EncodedArg:
        if "tensor" in arg:
            return {"tensor": {k: v for k, v in arg["tensor"].items() if k not in ("values", "stats")}}
        return arg

    stripped = [strip(arg) for arg in args]
    return json.dumps(stripped if process_group is None else {"args": stripped, "process_group": process_group},
                      sort_keys=True)


@dataclass
class FunctionRecord:
    """The distinct argument structures seen for one Function, with call counts and an example each."""

    module: str
    qualname: str
    path: str
    counts: dict[str, int] = field(default_factory=dict)  # structure_key -> calls
    examples: dict[str, list[EncodedArg]] = field(default_factory=dict)  # structure_key -> first call's args
    pickles: dict[str, str] = field(default_factory=dict)  # structure_key -> first call's pickled args
    with_function: set[str] = field(default_factory=set)  # structure_keys whose pickle starts with the class
    process_groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # structure_key -> process group

    def add(self, args: list[EncodedArg], example: list[EncodedArg] | None, calls: int = 1,
            pickled: str | None = None, with_function: bool = False,
            process_group: dict[str, Any] | None = None) -> None:
        key = structure_key(args, process_group)
        if key in self.counts or len(self.counts) < CASES_TRACKED:
            self.counts[key] = self.counts.get(key, 0) + calls
            if key not in self.examples:
                self.examples[key] = example if example is not None else args
                if process_group is not None:
                    self.process_groups[key] = process_group
                if pickled is not None:
                    self.pickles[key] = pickled
                    if with_function:
                        self.with_function.add(key)

    def _size(self, key: str) -> int:
        """How large a case is: its pickle's length, else its tensors' elements (smaller cases check faster)."""
        if key in self.pickles:
            return len(self.pickles[key])
        size = 0
        for arg in self.examples.get(key, ()):
            shape = arg.get("tensor", {}).get("shape") if isinstance(arg, dict) else None
            if isinstance(shape, list):
                elements = 1
                for dimension in shape:
                    elements *= int(dimension)
                size += elements
        return size

    def as_json(self) -> dict[str, Any]:
        # The most frequent first; among equally frequent ones, the smallest.
        ordered = sorted(self.counts.items(), key=lambda item: (-item[1], self._size(item[0]), item[0]))
        return {
            "module": self.module,
            "qualname": self.qualname,
            "path": self.path,
            "cases": [{"calls": calls, "args": self.examples[key],
                       **({"pickled": self.pickles[key]} if key in self.pickles else {}),
                       **({"with_function": True} if key in self.with_function else {}),
                       **({"process_group": self.process_groups[key]} if key in self.process_groups else {})}
                      for key, calls in ordered[:CASES_KEPT]],
        }


class Recorder:
    """Accumulates ``apply`` calls, merges recorders of other processes, writes the file."""

    def __init__(self) -> None:
        self.functions: dict[str, FunctionRecord] = {}

    def _record(self, module: str, qualname: str, path: str) -> FunctionRecord:
        key = f"{module}.{qualname}"
        if key not in self.functions:
            self.functions[key] = FunctionRecord(module, qualname, path)
        return self.functions[key]

    def has_case(self, module: str, qualname: str, args: list[EncodedArg],
                 process_group: dict[str, Any] | None = None) -> bool:
        """Whether a call of this structure was kept already, or no longer can be (its values need not be encoded)."""
        record = self.functions.get(f"{module}.{qualname}")
        if record is None:
            return False
        key = structure_key(args, process_group)
        return key in record.examples or (key not in record.counts and len(record.counts) >= CASES_TRACKED)

    def add(self, module: str, qualname: str, path: str, args: list[EncodedArg],
            example: list[EncodedArg] | None = None, pickled: str | None = None,
            with_function: bool = False, process_group: dict[str, Any] | None = None) -> None:
        """Count a call of structure ``args`` under ``process_group``; ``example`` (with values) and
        ``pickled`` are kept for a new one."""
        self._record(module, qualname, path).add(args, example, pickled=pickled, with_function=with_function,
                                                  process_group=process_group)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "functions": {key: self.functions[key].as_json() for key in sorted(self.functions)},
        }

    def merge(self, data: dict[str, Any]) -> None:
        """Add the cases of another recorder's :meth:`as_json` (an xdist worker's)."""
        for entry in data.get("functions", {}).values():
            record = self._record(entry["module"], entry["qualname"], entry["path"])
            for case in entry["cases"]:
                record.add(case["args"], None, case["calls"], case.get("pickled"), bool(case.get("with_function")),
                           case.get("process_group"))

    def write(self, path: str) -> None:
        """Write the recording, keeping Functions of an existing file that this run did not call.

        Raises :class:`RecordingError` when ``path`` holds something other than a recording.
        """
        problem = not_a_recording(path)
        if problem is not None:
            raise RecordingError(f"{path}: {problem}")
        data = self.as_json()
        previous = _read_json(path)
        if isinstance(previous, dict) and previous.get("format") in READABLE_FORMATS:
            for key, entry in previous.get("functions", {}).items():
                data["functions"].setdefault(key, entry)
            data["functions"] = dict(sorted(data["functions"].items()))
        text = json.dumps(data, indent=1, sort_keys=True) + "\n"
        write_atomically(path, text.encode("utf-8"))


def _read_json(path: str) -> Any:
    """The JSON value in ``path`` (the one side-file loader); None when it is missing.

    Raises :class:`SideFileError`.
    """
    try:
        return load_json(path, "a recording")
    except SideFileError as error:
        if error.missing:
            return None
        raise


def not_a_recording(path: str) -> str | None:
    """Why a recording must not be written to ``path``; None when it is missing or a recording.

    Only a file this tool wrote may be replaced: anything else (a test file typed
    where the output was expected, a directory) belongs to the user.
    """
    if os.path.isdir(path):
        return "is a directory, not a recording file"
    try:
        data = _read_json(path)
    except SideFileError:
        data = ()
    if data is None or (isinstance(data, dict) and data.get("format") in READABLE_FORMATS
                        and isinstance(data.get("functions"), dict)):
        return None
    return "exists and is not a recording of `pytest --autograd-record`; not overwritten"


class RecordingError(Exception):
    """The recorded-inputs file cannot be read."""


def _value_source(arg: EncodedArg) -> str | None:
    if "value" in arg:
        value = arg["value"]
        return repr(value) if value is None or isinstance(value, (bool, int, str)) else None
    if "float" in arg:
        text = str(arg["float"])
        return f"float({text!r})" if text in ("inf", "-inf", "nan") else repr(float(text))
    if "dtype" in arg:
        return f"torch.{arg['dtype']}"
    for kind, opening, closing in (("tuple", "(", ")"), ("list", "[", "]")):
        if kind in arg:
            items = [_value_source(item) for item in arg[kind]]
            if any(item is None for item in items):
                return None
            trailing = "," if kind == "tuple" and len(items) == 1 else ""
            return opening + ", ".join(str(item) for item in items) + trailing + closing
    return None


def _is_element(value: Any) -> bool:
    """Whether ``value`` is a tensor element as ``record_plugin.encode_number`` writes one."""
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return isinstance(value, (bool, int)) or value in ("nan", "inf", "-inf")


def _decode(arg: EncodedArg, pickled: bool = False) -> Input | None:
    if pickled and "object" in arg:
        return ObjectInput(str(arg["object"]))
    if "tensor" in arg:
        tensor = arg["tensor"]
        values = tensor.get("values")
        if isinstance(values, list) and not all(_is_element(value) for value in values):
            raise ValueError("a tensor's recorded values must be numbers (non-finite ones as \"nan\", \"inf\", \"-inf\")")
        stats = tensor.get("stats")
        return TensorInput(
            tuple(int(n) for n in tensor["shape"]), str(tensor["dtype"]), str(tensor["device"]),
            bool(tensor["requires_grad"]), contiguous=bool(tensor.get("contiguous", True)),
            values=tuple(values) if isinstance(values, list) else None,
            stats=tuple(sorted(stats.items())) if isinstance(stats, dict) and stats else None,
            subclass=str(tensor["subclass"]) if pickled and "subclass" in tensor else None,
        )
    source = _value_source(arg)
    return ValueInput(source) if source is not None else None


@dataclass
class Recording:
    """The recorded cases, found by a Function's module and qualname or by its file."""

    functions: dict[str, dict[str, Any]]
    path: str = ""
    # One line per recorded entry that could not be read (the run searched for inputs instead).
    problems: list[str] = field(default_factory=list)

    def cases_for(self, spec: FunctionSpec) -> list[InputCase]:
        """The recorded cases of ``spec``, normalised; [] when it was never called.

        A test run may import a module under another name than gen-tests computes
        (rootdir-relative imports), so a qualname recorded from the same file matches too.
        """
        entry = self.functions.get(spec.full_name)
        if entry is None:
            spec_path = os.path.realpath(spec.path).replace(os.sep, "/")
            entry = next(
                (e for e in self.functions.values()
                 if e.get("qualname") == spec.qualname
                 and spec_path.endswith("/" + str(e.get("path", "")).lstrip("/"))),
                None,
            )
        return self._cases(entry, spec.full_name)

    def cases_for_op(self, op: CustomOpSpec) -> list[InputCase]:
        """The recorded calls of a custom op, found by its ``"ns::name"`` (unique in a process), normalised."""
        if op.op_name is None:
            return []
        entry = next((e for e in self.functions.values() if e.get("qualname") == op.op_name), None)
        return self._cases(entry, op.op_name)

    def _cases(self, entry: dict[str, Any] | None, name: str) -> list[InputCase]:
        """``entry``'s cases; a malformed entry is the recording's fault: named in :attr:`problems`, and
        its Function gets no recorded case (its inputs are searched for, as for one never called)."""
        try:
            return _cases(entry)
        except (AttributeError, KeyError, TypeError, ValueError, IndexError) as error:
            problem = f"{self.path}: the recorded cases of {name} are malformed ({type(error).__name__}: " \
                      f"{str(error)[:120]}); its inputs were searched for instead"
            if problem not in self.problems:
                self.problems.append(problem)
            return []


def _decode_process_group(value: Any) -> ProcessGroupInput | None:
    """A case's ``"process_group"``; None when it was recorded without one. Raises ValueError when malformed."""
    if value is None:
        return None
    try:
        mesh = value.get("mesh")
        return ProcessGroupInput(
            str(value["backend"]), int(value["world_size"]), int(value.get("rank", 0)),
            str(mesh["device_type"]) if mesh is not None else None,
            tuple(int(n) for n in mesh["shape"]) if mesh is not None else None,
        )
    except (AttributeError, KeyError, TypeError) as error:
        raise ValueError(f"malformed process group {value!r}") from error


def _cases(entry: dict[str, Any] | None) -> list[InputCase]:
    if entry is None:
        return []
    cases = []
    for case in entry.get("cases", []):
        if not isinstance(case.get("args"), list) or not all(isinstance(arg, dict) for arg in case["args"]):
            raise TypeError("a case's \"args\" must be a list of objects")
        pickled = case.get("pickled")
        decoded = [_decode(arg, isinstance(pickled, str)) for arg in case["args"]]
        try:
            process_group = _decode_process_group(case.get("process_group"))
        except ValueError:
            continue  # as an argument that can't be decoded: the case is left out
        if all(d is not None for d in decoded):
            cases.append(normalise_case(tuple(d for d in decoded if d is not None),
                                        pickled if isinstance(pickled, str) else None,
                                        isinstance(pickled, str) and bool(case.get("with_function")),
                                        process_group))
    return cases


def load(path: str) -> Recording:
    """Read a recording; a missing file is an empty recording."""
    try:
        data = _read_json(path)
    except SideFileError as error:
        raise RecordingError(f"{path}: cannot read recorded inputs: {error.problem}") from None
    if data is None:
        return Recording({})
    if not isinstance(data, dict) or data.get("format") not in READABLE_FORMATS:
        raise RecordingError(f"{path}: not a recorded-inputs file of format {FORMAT}")
    functions = data.get("functions", {})
    if not isinstance(functions, dict) or not all(isinstance(entry, dict) for entry in functions.values()):
        raise RecordingError(f"{path}: \"functions\" must be an object of objects")
    return Recording(dict(functions), path)
