"""pytest plugin that records the arguments of every ``Function.apply`` call and custom-op call.

Registered through the ``pytest11`` entry point, so it is loaded in every pytest
run of everyone who installs autograd-lint: it only adds the option, and imports
torch and patches ``torch.autograd.Function.apply`` only when
``--autograd-record`` (or ``--autograd-record-file=FILE``) is given.  Calls whose
forward returned are counted by argument structure (tensor shape, dtype, device,
requires_grad, contiguity; small literal values) in a
:class:`~autograd_lint.gentests.recording.Recorder`; the first call of each
structure also keeps what a replay needs: the values of small tensors, summary
statistics of larger ones.  A call made while a default process group is
initialised (``torch.distributed``) also keeps that group's backend, world size
and rank, and the shape of a device mesh an argument holds: a replay runs it
under a single-process group (see :func:`process_group_context`).

Custom ops (``torch.library.custom_op``) are recorded when called through the
op object (``op(x)``: ``CustomOpDef.__call__``, patched like ``apply``), keyed by
the op's ``"ns::name"``; calls spelled ``torch.ops.ns.name(...)`` are not seen,
and neither are calls while Dynamo traces (``torch.compiler.is_compiling()``),
whose arguments are fake.

Under pytest-xdist each worker records on its own and hands its cases to the
controller (``workeroutput``), which writes the one file.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from autograd_lint.gentests import pickled
from autograd_lint.gentests.recording import (
    DEFAULT_PATH,
    MAX_RECORDED_ELEMENTS,
    EncodedArg,
    Recorder,
    RecordingError,
    not_a_recording,
    structure_key,
)

WORKER_OUTPUT_KEY = "autograd_lint_recorded_inputs"
# Non-tensor values larger than this are not "small": the call is not recorded.
MAX_STRING_LENGTH = 200
MAX_SEQUENCE_LENGTH = 16


def pytest_addoption(parser: pytest.Parser) -> None:
    _hint_at_the_file_option()
    group = parser.getgroup("autograd-lint")
    # A plain flag: an optional value would swallow a test path typed after it
    # (`pytest --autograd-record tests/test_x.py` once overwrote that test file).
    group.addoption(
        "--autograd-record",
        action="store_true",
        default=False,
        help="record the arguments of every autograd.Function.apply call for "
        f"`autograd-lint gen-tests` (into {DEFAULT_PATH}, or --autograd-record-file)",
    )
    group.addoption(
        "--autograd-record-file",
        default=None,
        metavar="FILE",
        help=f"where --autograd-record writes (default {DEFAULT_PATH}, relative to the "
        "directory pytest was started in); implies --autograd-record; an existing FILE "
        "must be a recording",
    )
    group.addoption(
        "--autograd-record-torch",
        action="store_true",
        default=False,
        help="with --autograd-record: also record the Functions and custom ops defined in "
        "torch itself (to run `autograd-lint gen-tests` on torch's own code)",
    )


def _hint_at_the_file_option() -> None:
    """Make ``--autograd-record=FILE`` (the flag takes no value) say which option takes the file.

    argparse rejects it before any hook runs ("ignored explicit argument"), so the
    hint goes into pytest's argument parser's error, once.
    """
    from _pytest.config import argparsing

    # Its name changed between pytest versions; without either, the plain error stands.
    parser_class = getattr(argparsing, "PytestArgumentParser", None) or getattr(argparsing, "MyOptionParser", None)
    error = getattr(parser_class, "error", None)
    if error is None or getattr(error, "autograd_lint_hint", False):
        return

    def error_with_hint(self: Any, message: str) -> Any:
        if "--autograd-record: ignored explicit argument" in message:
            message += ("; --autograd-record takes no value: to choose the file, give --autograd-record-file=FILE "
                        "(it implies --autograd-record)")
        return error(self, message)

    error_with_hint.autograd_lint_hint = True  # type: ignore[attr-defined]
    parser_class.error = error_with_hint  # type: ignore[union-attr]


# The words of a generated check's skip reason when the time limit cut it off (runtime.budget.CUT_OFF;
# not imported from there: this plugin stays torch-free).
_CUT_OFF = "did not finish within"
_CHECK_SECONDS = "AUTOGRAD_LINT_CHECK_SECONDS"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A generated suite says how many checks its time limit cut off: their verdicts are unknown."""
    cut = [report for report in terminalreporter.stats.get("skipped", [])
           if isinstance(report.longrepr, tuple) and _CUT_OFF in str(report.longrepr[-1])
           and "verdict is unknown" in str(report.longrepr[-1])]
    if cut:
        terminalreporter.write_line(
            f"autograd-lint: {len(cut)} generated check(s) cut off by the time limit ({_CHECK_SECONDS}); "
            "their verdict is unknown: " + ", ".join(report.nodeid for report in cut[:5])
            + (" ..." if len(cut) > 5 else ""))


def pytest_configure(config: pytest.Config) -> None:
    destination = config.getoption("autograd_record_file", default=None)
    if destination is None and not config.getoption("autograd_record", default=False):
        return
    path = os.path.join(str(config.invocation_params.dir), destination or DEFAULT_PATH)
    problem = not_a_recording(path)
    if problem is not None:
        raise pytest.UsageError(f"{path}: {problem}; give another --autograd-record-file")
    config.pluginmanager.register(_RecordingSession(config, path), "autograd-lint-recording")


class _ArgumentEncoder:
    """Encodes ``apply`` arguments for :class:`Recorder`; None means "not recordable".

    ``with_values`` adds what a replay needs beyond the structure: the values of a
    tensor of at most :data:`~.recording.MAX_RECORDED_ELEMENTS` elements, else
    summary statistics (:func:`tensor_statistics`).
    """

    def __init__(self, torch_module: Any) -> None:
        self.torch = torch_module

    def encode(self, value: Any, nested: bool = False, with_values: bool = False) -> EncodedArg | None:
        torch = self.torch
        if isinstance(value, torch.Tensor):
            if nested or pickled.is_tensor_subclass(torch, value) or value.layout != torch.strided:
                return None  # inside a container, a subclass, or sparse: only a pickle of the call keeps it
            try:
                shape = [int(size) for size in value.shape]
            except (TypeError, RuntimeError):  # symbolic sizes under tracing
                return None
            described: dict[str, Any] = {
                "shape": shape, "dtype": str(value.dtype).removeprefix("torch."),
                "device": str(value.device), "requires_grad": bool(value.requires_grad),
            }
            if not value.is_contiguous():
                described["contiguous"] = False
            if with_values:
                described.update(self._contents(value))
            return {"tensor": described}
        if value is None or isinstance(value, (bool, int)):
            return {"value": value}
        if isinstance(value, str):
            return {"value": value} if len(value) <= MAX_STRING_LENGTH else None
        if isinstance(value, float):
            return {"float": repr(value)}
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if isinstance(value, (tuple, list)) and len(value) <= MAX_SEQUENCE_LENGTH:
            items = [self.encode(item, nested=True) for item in value]
            if any(item is None for item in items):
                return None
            return {"tuple" if isinstance(value, tuple) else "list": items}
        return None

    def describe(self, value: Any) -> EncodedArg:
        """The structure of an argument :meth:`encode` refuses: kept with a pickle of the call."""
        torch = self.torch
        if pickled.is_tensor_subclass(torch, value):
            # A subclass (MaskedTensor, a jagged nested tensor, ExpandedWeight), by its type and what every
            # subclass reports: a jagged size is a nested int (-1 here), ExpandedWeight refuses .requires_grad.
            kind = type(value)
            try:
                requires_grad = bool(value.requires_grad)
            except RuntimeError:  # ExpandedWeight's __torch_function__ refuses it
                requires_grad = False
            return {"tensor": {"shape": [size if isinstance(size, int) else -1 for size in value.shape],  # -1: ragged
                               "dtype": str(value.dtype).removeprefix("torch."), "device": str(value.device),
                               "requires_grad": requires_grad, "subclass": f"{kind.__module__}.{kind.__qualname__}"}}
        if isinstance(value, torch.Tensor):
            described = {"shape": [int(size) for size in value.shape], "dtype": str(value.dtype).removeprefix("torch."),
                         "device": str(value.device), "requires_grad": bool(value.requires_grad)}
            if value.layout != torch.strided:
                described["layout"] = str(value.layout).removeprefix("torch.")
            return {"tensor": described}
        kind = type(value)
        return {"object": f"{kind.__module__}.{kind.__qualname__}"}

    def _contents(self, value: Any) -> dict[str, Any]:
        """``{"values": [...]}`` for a small real tensor, ``{"stats": {...}}`` for a larger one."""
        if value.is_complex() or value.is_meta or value.layout != self.torch.strided:
            return {}
        flat = value.detach().to("cpu").reshape(-1)
        if flat.numel() <= MAX_RECORDED_ELEMENTS:
            return {"values": [encode_number(item) for item in flat.tolist()]}
        return {"stats": tensor_statistics(self.torch, value.detach())}


def tensor_statistics(torch: Any, value: Any) -> dict[str, Any]:
    """What a replay needs to draw valid values for a tensor too large to store.

    ``min``/``max`` over the finite values and ``integral`` (every value a whole
    number), and the structure that domains of linear algebra and probability
    Functions demand: ``symmetric`` and ``positive_definite`` (last two dimensions),
    ``simplex`` (non-negative, summing to one along the last dimension).
    """
    real = value.to("cpu", torch.float64)
    finite = real[torch.isfinite(real)]
    stats: dict[str, Any] = {}
    if finite.numel():
        stats["min"], stats["max"] = float(finite.min()), float(finite.max())
        stats["integral"] = bool((finite == finite.round()).all())
    if real.dim() >= 2 and real.shape[-1] == real.shape[-2] and real.shape[-1] <= 512:
        stats["symmetric"] = bool(torch.allclose(real, real.transpose(-1, -2)))
        if stats["symmetric"]:
            stats["positive_definite"] = bool((torch.linalg.cholesky_ex(real).info == 0).all())
    if real.dim() >= 1 and real.shape[-1] > 1 and finite.numel() == real.numel():
        stats["simplex"] = bool((real >= 0).all()) and bool(((real.sum(-1) - 1).abs() <= 1e-5).all())
    return stats


def encode_number(number: float | int | bool) -> float | int | bool | str:
    """A tensor element for JSON: non-finite floats as their ``repr`` (JSON has no nan)."""
    if isinstance(number, float) and not math.isfinite(number):
        return repr(number)
    return number


def process_group_context(torch: Any, args: tuple[Any, ...]) -> dict[str, Any] | None:
    """The default process group a call is made under, for its replay; None when there is none.

    ``backend`` as ``init_process_group`` takes it (``"gloo"``, or the per-device
    ``"cpu:gloo,cuda:nccl"`` of a group initialised without one), ``world_size``
    and ``rank``; ``mesh`` (``device_type``, ``shape``) when an argument, or an item
    of a list or tuple argument, is a ``DeviceMesh`` or holds one (a ``DTensor``).
    The replay can run the call only in a world of one process.
    """
    distributed = torch.distributed
    if not distributed.is_available() or not distributed.is_initialized():
        return None
    backend = str(distributed.get_backend())
    if backend == "undefined":
        backend = str(distributed.get_backend_config())
    context: dict[str, Any] = {"backend": backend, "world_size": int(distributed.get_world_size()),
                               "rank": int(distributed.get_rank())}
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor

    for arg in (item for value in args for item in (value if isinstance(value, (list, tuple)) else (value,))):
        mesh = arg.device_mesh if isinstance(arg, DTensor) else arg
        if isinstance(mesh, DeviceMesh):
            context["mesh"] = {"device_type": str(mesh.device_type), "shape": [int(n) for n in mesh.mesh.shape]}
            break
    return context


def _positional_arguments(cls: Any, function_base: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """``args`` with ``kwargs`` bound into their positions, or None if that can't be done."""
    if not kwargs:
        return args
    try:
        parameters = list(inspect.signature(cls.forward).parameters.values())
        if cls.setup_context is function_base.setup_context:
            parameters = parameters[1:]  # old style: forward's first parameter is ctx
        bound = inspect.Signature(parameters).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    return None if bound.kwargs else tuple(bound.args)


@dataclass
class _PendingCall:
    """A call encoded before forward ran, kept by the recorder once forward returned."""

    module: str
    qualname: str
    path: str
    structure: list[EncodedArg]
    example: list[EncodedArg] | None = None
    pickled: str | None = None
    with_function: bool = False  # ``pickled`` starts with the Function class itself
    process_group: dict[str, Any] | None = None  # see process_group_context


class _RecordingSession:
    """Patches ``Function.apply`` for the session and writes the recording at its end."""

    def __init__(self, config: pytest.Config, path: str) -> None:
        import torch  # only here: the plugin is inert, and torch-free, without the option

        self.config = config
        self.path = path
        self.rootdir = str(config.rootpath)
        self.recorder = Recorder()
        self.torch = torch
        self.encoder = _ArgumentEncoder(torch)
        self.unrecorded_calls = 0
        self.failed_calls = 0
        self.write_error: str | None = None
        self.sources: dict[type, str] = {}
        self.test_directories: set[str] = set()
        self.by_value: set[str] = set()
        self.unpicklable: dict[str, str] = {}
        self.unpicklable_structures: set[tuple[str, str, str]] = set()
        self.function_base = torch.autograd.Function
        self.original_apply = self.function_base.__dict__["apply"]
        self.function_base.apply = classmethod(self._recording_apply(self.original_apply.__func__))
        self.is_compiling = torch.compiler.is_compiling
        self.include_torch = bool(config.getoption("autograd_record_torch", default=False))
        self.op_class = _custom_op_class()
        self.original_op_call = None
        if self.op_class is not None:
            self.original_op_call = self.op_class.__dict__["__call__"]
            self.op_class.__call__ = self._recording_op_call(self.original_op_call)

    def _recording_op_call(self, call: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def recording_call(op: Any, *args: Any, **kwargs: Any) -> Any:
            # While Dynamo traces, the arguments are fake: let it trace torch's own call.
            if session.is_compiling():
                return call(op, *args, **kwargs)
            pending = session.encode_op_call(op, args, kwargs)
            try:
                result = call(op, *args, **kwargs)
            except BaseException:
                session.failed_calls += pending is not None
                raise
            session.keep(pending)
            return result

        recording_call.__doc__ = call.__doc__
        return recording_call

    def _recording_apply(self, apply: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def recording_apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
            # While Dynamo traces (torch.cond, map, scan... trace their branches before running
            # them), the arguments are fake: not an input case, and their failed pickle must not
            # mark the structure unrecordable for the real call that follows.
            if session.is_compiling():
                return apply(cls, *args, **kwargs)
            # Encoded before the call, as forward may change its inputs in place;
            # kept only once forward returned: a test of an error path is no input case.
            pending = session.encode_call(cls, args, kwargs)
            try:
                result = apply(cls, *args, **kwargs)
            except BaseException:
                session.failed_calls += pending is not None
                raise
            session.keep(pending)
            return result

        recording_apply.__doc__ = apply.__doc__
        return recording_apply

    def _source_path(self, cls: Any) -> str:
        if cls not in self.sources:
            try:
                path = os.path.realpath(inspect.getsourcefile(cls) or "")
            except TypeError:
                path = ""
            relative = os.path.relpath(path, self.rootdir) if path else ""
            self.sources[cls] = (path if relative.startswith("..") else relative).replace(os.sep, "/")
        return self.sources[cls]

    def is_torch(self, module: str) -> bool:
        """Whether a Function or op of ``module`` is torch's own, and so not recorded (unless asked)."""
        return not self.include_torch and (module == "torch" or module.startswith("torch."))

    def encode_call(self, cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _PendingCall | None:
        """One call's arguments, encoded; None when the call is not recorded.

        Arguments that are not tensors and literals (objects, callables, sparse
        tensors, containers of tensors) are described by type, and the first call
        of each structure is pickled whole (:mod:`.pickled`) for the replay.
        Never raises, so that recording cannot break the user's tests.
        """
        try:
            module = str(getattr(cls, "__module__", ""))
            if self.is_torch(module):
                return None
            positional = _positional_arguments(cls, self.function_base, args, kwargs)
            if positional is None:
                self.unrecorded_calls += 1
                return None
            encoded = [self.encoder.encode(arg) for arg in positional]
            # A class defined inside a function can't be imported by a test: it is pickled with the call.
            local_class = "<locals>" in cls.__qualname__
            needs_pickle = local_class or any(arg is None for arg in encoded)
            structure = [item if item is not None else self.encoder.describe(arg)
                         for item, arg in zip(encoded, positional)]
            call = _PendingCall(module, cls.__qualname__, self._source_path(cls), structure,  # type: ignore[arg-type]
                                process_group=process_group_context(self.torch, positional))
            failed_key = (module, call.qualname, structure_key(structure, call.process_group))
            if failed_key in self.unpicklable_structures:
                self.unrecorded_calls += 1
                return None
            if not self.recorder.has_case(call.module, call.qualname, call.structure, call.process_group):
                # Values only for the first call of each structure: the one a replay uses.
                if needs_pickle:
                    call.pickled = self._pickle((cls, *positional) if local_class else positional)
                    call.with_function = local_class
                    if call.pickled is None:
                        self.unpicklable_structures.add(failed_key)
                        self.unrecorded_calls += 1
                        return None
                    call.example = structure
                else:
                    call.example = [  # type: ignore[misc]
                        self.encoder.encode(arg, with_values=True) for arg in positional]
            return call
        except Exception:  # noqa: BLE001 - see docstring
            self.unrecorded_calls += 1
            return None

    def _pickle(self, positional: tuple[Any, ...]) -> str | None:
        """The pickled arguments; None when they can't be pickled (a generator, a closure over a lock...)."""
        self._register_test_modules()
        try:
            return pickled.dumps(positional)
        except pickled.NotPicklable as error:
            self.unpicklable[type(error).__name__] = str(error)
            return None

    def _register_test_modules(self) -> None:
        """Test modules, and helpers beside them, are pickled by value: a replay can't import them."""
        try:
            import cloudpickle
        except ImportError:
            return
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if not path or name in self.by_value:
                continue
            directory = os.path.dirname(os.path.realpath(path))
            if directory in self.test_directories and "-packages" not in directory:
                self.by_value.add(name)
                with contextlib.suppress(Exception):
                    cloudpickle.register_pickle_by_value(module)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.test_directories.update(os.path.dirname(os.path.realpath(str(item.path))) for item in session.items)

    def encode_op_call(self, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _PendingCall | None:
        """One custom-op call's positional arguments, encoded, under the op's ``"ns::name"``;
        None when not recorded (torch's own ops, keyword-only arguments passed, arguments
        that can't be encoded).  Never raises."""
        try:
            function = op._init_fn
            module = str(getattr(function, "__module__", ""))
            if self.is_torch(module):
                return None
            bound = inspect.signature(function).bind(*args, **kwargs)
            positional = None if bound.kwargs else tuple(bound.args)
            structure = [self.encoder.encode(arg) for arg in positional] if positional is not None else [None]
            if any(arg is None for arg in structure):
                self.unrecorded_calls += 1
                return None
            name = str(op._qualname)
            call = _PendingCall(module, name, self._source_path(function), structure)  # type: ignore[arg-type]
            if not self.recorder.has_case(call.module, call.qualname, call.structure):
                call.example = [self.encoder.encode(arg, with_values=True) for arg in positional or ()]  # type: ignore[misc]
            return call
        except Exception:  # noqa: BLE001 - see docstring
            self.unrecorded_calls += 1
            return None

    def keep(self, call: _PendingCall | None) -> None:
        if call is not None:
            self.recorder.add(call.module, call.qualname, call.path, call.structure, call.example, call.pickled,
                              call.with_function, call.process_group)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: merge what a worker recorded."""
        output = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY)
        if output is not None:
            self.recorder.merge(output["recording"])
            self.unrecorded_calls += output["unrecorded_calls"]
            self.failed_calls += output["failed_calls"]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        worker_output = getattr(self.config, "workeroutput", None)
        if worker_output is not None:
            worker_output[WORKER_OUTPUT_KEY] = {
                "recording": self.recorder.as_json(), "unrecorded_calls": self.unrecorded_calls,
                "failed_calls": self.failed_calls,
            }
            return
        try:
            self.recorder.write(self.path)
        except RecordingError as error:  # the file was replaced by something else during the run
            self.write_error = str(error)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if getattr(self.config, "workeroutput", None) is not None:
            return
        if self.write_error is not None:
            terminalreporter.write_line(f"autograd-lint: {self.write_error}; nothing recorded", red=True)
            return
        skipped = f", {self.unrecorded_calls} call(s) with unrecordable arguments" if self.unrecorded_calls else ""
        if self.failed_calls:
            skipped += f", {self.failed_calls} call(s) whose forward raised (not recorded)"
        ops = sum(1 for record in self.recorder.functions.values() if "::" in record.qualname)
        what = f"{len(self.recorder.functions) - ops} Function(s)" + (f" and {ops} custom op(s)" if ops else "")
        terminalreporter.write_line(f"autograd-lint: recorded inputs of {what} to {self.path}{skipped}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.function_base.apply = self.original_apply
        if self.op_class is not None:
            self.op_class.__call__ = self.original_op_call


def _custom_op_class() -> Any:
    """``torch.library.custom_op``'s op class, or None in a torch without it."""
    try:
        from torch._library.custom_ops import CustomOpDef
    except ImportError:
        return None
    return CustomOpDef if "__call__" in CustomOpDef.__dict__ else None
