"""Run-time support of the generated tests: input cases made concrete, and the checks.

This is the only module of :mod:`autograd_lint.gentests` that imports torch; the
test modules that ``autograd-lint gen-tests`` writes import it, the command never
does.  A generated test states *what* to check on *which* input case; everything
that needs torch (making tensors, finding a shape the forward accepts, calling
gradcheck) happens here so that the generated files stay short and readable.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import math
import os
import re
import sys
import time
import traceback
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, NoReturn, Sequence

import pytest
import torch

# The recorded group, as gen-tests read it from the recording, is what a generated case names.
from autograd_lint.gentests.inputs import ProcessGroupInput as RecordedProcessGroup
from autograd_lint.gentests.render import RECORD_HINT


# Random values are drawn from these domains, in this order, until the forward
# returns finite outputs: signed values away from zero keep kinks (relu, abs) out
# of gradcheck's finite differences; the positive and unit-interval domains serve
# log/sqrt/reciprocal and asin/logit-like Functions.  In the positive-definite
# domain each searched square matrix (or batch of them) is symmetric positive
# definite and other searched tensors are positive: for Cholesky factors, solves
# and log-determinants, which raise or give NaN on random matrices.  It comes
# before "positive" so that a matrix whose lower triangle happens to be positive
# definite (all cholesky reads) is not taken for a symmetric one.
Domain = tuple[str, float, float, bool]
POSITIVE_DEFINITE = "positive_definite"
SIMPLEX = "simplex"
UNIT_NORM = "unit_norm"
DOMAINS: tuple[Domain, ...] = (
    # name, low, high, random sign
    ("signed", 0.5, 1.5, True),
    (POSITIVE_DEFINITE, 0.5, 1.5, False),
    ("positive", 0.5, 1.5, False),
    ("unit", 0.1, 0.9, False),
    # Last resorts for a forward that checks its input: probabilities (each row
    # positive, summing to one) and unit vectors (each row of norm one).
    (SIMPLEX, 0.5, 1.5, False),
    (UNIT_NORM, 0.5, 1.5, True),
)

BATCH_SIZE = 2
SEED = 0
# Above this many input elements, gradcheck compares one random projection of the
# Jacobian (fast mode) instead of all of it: recorded shapes can be large, and a
# wrong formula changes a random projection just as surely.
FAST_MODE_THRESHOLD = 64
# Seconds one check of the gradcheck family may take (environment, 0 = no limit).  A
# recorded case can be large (50x50 matrices, a 500-step SDE): a gradgradcheck of it
# runs for hours, and a suite that never ends gives no verdict at all.
CHECK_SECONDS_VARIABLE = "AUTOGRAD_LINT_CHECK_SECONDS"
DEFAULT_CHECK_SECONDS = 300.0


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument: its shape (``None``: searched at run time) and how it is made."""

    shape: tuple[int, ...] | None
    dtype: str = "float64"
    device: str = "cpu"
    requires_grad: bool = True
    contiguous: bool = True
    values: tuple[float | int | bool | str, ...] | None = None
    stats: tuple[tuple[str, float | bool], ...] | None = None


@dataclass(frozen=True)
class ScalarArg:
    """A non-tensor argument whose value is searched for among :data:`SCALAR_CANDIDATES`."""


# 2 before 1 so that a forgotten factor shows; 0.5 for exponents and probabilities.
SCALAR_CANDIDATES = (2, 0.5, 1)


@dataclass(frozen=True)
class Case:
    """One input case: the positional arguments of ``apply``, tensors as :class:`TensorArg`.

    A recorded call with objects among its arguments has ``pickled`` instead (see :func:`recorded`).
    """

    args: tuple[Any, ...]
    pickled: str | None = None
    with_function: bool = False
    # Value domains to try first (evidence in forward, see :mod:`.domains`), by name.
    domains: tuple[str, ...] = ()
    process_group: RecordedProcessGroup | None = None


def recorded(*chunks: str, function: bool = False, process_group: RecordedProcessGroup | None = None) -> Case:
    """A recorded call whose arguments were pickled whole (objects, callables, sparse tensors).

    Every call of the case unpickles them afresh: floating tensors in float64,
    each tensor once even where objects share it, so that gradcheck's perturbation
    of an argument reaches the objects holding it.  The top-level floating tensors
    require grad as recorded (all of them if none did); sparse ones never do.
    With ``function``, the pickle starts with the Function class: one defined inside
    a function, which :func:`recorded_function` gives the test.
    """
    return Case((), "".join(chunks), function, process_group=process_group)


_recorded_functions: dict[str, Any] = {}


class _OnClones:
    """A Function whose ``apply`` gets clones of its tensor arguments; everything else is the Function's."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def apply(self, *args: Any) -> Any:
        return self.function.apply(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.function, name)


_on_clones: dict[Any, _OnClones] = {}


def in_place(function: Any) -> Any:
    """``function``, a Function that modifies an input in place (``ctx.mark_dirty``), called on clones.

    As torch's own OpInfos call one (``NumpyExp_.apply(x.clone())``): autograd
    refuses to modify a leaf that requires grad, and gradcheck's finite
    differences need the inputs unchanged from one call to the next.  Gradients
    flow through the clone to the input.
    """
    if function not in _on_clones:
        _on_clones[function] = _OnClones(function)
    return _on_clones[function]


def recorded_function(case: Case) -> Any:
    """The Function class pickled with a recorded case (a class defined inside a function)."""
    from autograd_lint.gentests import pickled

    if not case.with_function or case.pickled is None:
        raise ValueError("the case was not recorded with its Function class")
    if case.pickled not in _recorded_functions:
        _recorded_functions[case.pickled] = pickled.loads(case.pickled)[0]
    return _recorded_functions[case.pickled]


def _promoted(arg: Any) -> Any:
    """A floating (complex) dtype argument as float64 (complex128): it follows the case's tensors,
    which run in float64, so that forward's output is not rounded to float32 under finite differences."""
    if isinstance(arg, torch.dtype) and (arg.is_floating_point or arg.is_complex):
        return torch.complex128 if arg.is_complex else torch.float64
    return arg


def _recorded_args(case: Case) -> tuple[Any, ...]:
    from autograd_lint.gentests import pickled

    args = pickled.loads(case.pickled or "")[1 if case.with_function else 0:]
    # A floating dtype argument follows its tensors to float64 (pickles of older recordings keep torch's own).
    args = tuple(_promoted(a) for a in args)
    # A tensor subclass (MaskedTensor, a jagged nested tensor) keeps what was recorded: it is not differentiated.
    top = [a for a in args if _is_plain(a) and _is_differentiable_dtype(a.dtype)]
    strided = [a for a in top if a.layout == torch.strided]
    for tensor_arg in top:
        if tensor_arg.layout != torch.strided:
            tensor_arg.requires_grad_(False)
    if strided and not any(a.requires_grad for a in strided):
        for tensor_arg in strided:
            tensor_arg.requires_grad_(True)
    return args


def tensor(
    shape: Sequence[int], dtype: str = "float64", device: str = "cpu", requires_grad: bool = True,
    contiguous: bool = True, values: Sequence[float | int | bool | str] | None = None,
    stats: dict[str, float | bool] | None = None,
) -> TensorArg:
    """A tensor argument of a known shape, with its recorded values or statistics if any.

    ``values`` are the flattened elements (``"nan"``, ``"inf"``, ``"-inf"`` as
    strings); ``stats`` describe a tensor too large to record: ``min``, ``max``,
    ``integral``, ``symmetric``, ``positive_definite``, ``simplex``.
    """
    return TensorArg(tuple(shape), dtype, device, requires_grad, contiguous,
                     tuple(values) if values is not None else None,
                     tuple(sorted(stats.items())) if stats else None)


def any_scalar() -> ScalarArg:
    """A number argument whose value is searched for at run time."""
    return ScalarArg()


def any_tensor(dtype: str = "float64", requires_grad: bool = True) -> TensorArg:
    """A tensor argument whose shape is searched for at run time."""
    return TensorArg(None, dtype, "cpu", requires_grad)


def _device_available(kind: str) -> bool:
    """Whether this machine has a device of type ``kind`` (``cpu``, ``cuda``, ``mps``...)."""
    module = getattr(torch, kind, None)
    return kind == "cpu" or (module is not None and bool(module.is_available()))


def requires_device(device: str) -> pytest.MarkDecorator:
    """Skip a case recorded on ``device`` (``cuda``, ``cuda:1``, ``mps``...) where it is missing."""
    kind = torch.device(device).type
    return pytest.mark.skipif(
        not _device_available(kind), reason=f"case recorded on {device}; {kind} is not available here"
    )


def _replay_backend(recorded: str) -> str | None:
    """The backend to replay a case recorded with ``recorded`` in: itself where it runs here, else gloo.

    ``recorded`` is a backend name (``nccl``) or per-device ones (``cpu:gloo,cuda:nccl``).
    A backend runs here when torch has it and a device it serves is present. None: not even gloo.
    """
    distributed = torch.distributed

    def runs(name: str, devices: Sequence[str]) -> bool:
        return bool(distributed.is_backend_available(name)) and any(_device_available(d) for d in devices)

    parts = [part.strip().split(":") for part in recorded.split(",")]
    if all(runs(part[-1], [part[0]] if len(part) == 2 else distributed.Backend.backend_capability.get(part[-1], []))
           for part in parts):
        return recorded
    return "gloo" if runs("gloo", ["cpu"]) else None


@contextlib.contextmanager
def recorded_process_group(case: Case | None) -> Iterator[None]:
    """Run the body under the process group ``case`` was recorded under, if any.

    A Function that calls a collective (``torch.distributed.nn``'s, DDP's and
    FSDP's hooks, DTensor's redistribution) needs an initialised default process
    group.  A case recorded in a world of one process runs under a single-process
    group made here (rank 0, an in-memory ``HashStore``, the recorded backend where
    it runs, else gloo), destroyed afterwards; the collectives are then the identity
    or a copy, as they were when recorded, so the checks judge the Function's own
    arithmetic.  An initialised group (the test run's own) is used as it is.  A case
    recorded in a larger world is skipped: one process can't play the other ranks.
    """
    group = case.process_group if case is not None else None
    if group is None:
        yield
        return
    if group.world_size != 1:
        pytest.skip(f"recorded in a process group of world size {group.world_size}; a replay in one process "
                    "can't reproduce its collectives")
    distributed = torch.distributed
    if not distributed.is_available():
        pytest.skip("recorded in a process group; this build of torch has no torch.distributed")
    if distributed.is_initialized():
        yield
        return
    backend = _replay_backend(group.backend)
    if backend is None:
        pytest.skip(f"recorded in a {group.backend} process group; neither {group.backend} nor gloo runs here")
    distributed.init_process_group(backend, store=distributed.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        distributed.destroy_process_group()


def import_subject(module_name: str, test_file: str, root_from_test: str) -> Any:
    """Import the analysed module, adding its import root to ``sys.path`` if needed.

    ``root_from_test`` is the directory the module is importable from, relative to
    the generated test file; it is only used when the module is not importable
    already (an installed package, or a root that pytest put on ``sys.path``).
    """
    try:
        return _import_or_skip(module_name)
    except ModuleNotFoundError as error:
        if error.name is None:
            raise
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(test_file)), root_from_test))
    sys.path.insert(0, root)
    return _import_or_skip(module_name)


def _import_or_skip(module_name: str) -> Any:
    """Import ``module_name``; skip the test module when what is missing is another package.

    Not a bug of the Function: its module needs a package this environment lacks
    (torch's own CUDA-only kernels import `cuda.bindings` on a CPU machine).  A
    missing module of the subject's own package is raised, for the caller.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and error.name.split(".")[0] != module_name.split(".")[0]:
            pytest.skip(f"{module_name} cannot be imported here: it needs {error.name}, which is not installed",
                        allow_module_level=True)
        raise


# ---------------------------------------------------------------------------
# Making arguments


def _is_differentiable_dtype(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def _is_plain(value: Any) -> bool:
    """A tensor gradcheck can perturb: a plain tensor, a ``Parameter``, a Python subclass over its own storage.

    A wrapper subclass (``MaskedTensor``, a jagged nested tensor, DTensor: their
    own ``__torch_dispatch__``) or one that refuses plain tensor operations
    (``ExpandedWeight``'s ``__torch_function__`` refuses even ``.requires_grad``)
    is passed as recorded and not differentiated: gradcheck perturbs its inputs'
    values in place and compares with finite differences, which masked-out
    entries, a nested tensor's offsets or an ``ExpandedWeight`` (whose gradient
    goes to ``orig_weight.grad_sample``, not to backward's result) don't allow.
    """
    if not isinstance(value, torch.Tensor):
        return False
    from autograd_lint.gentests.pickled import is_tensor_subclass

    if not is_tensor_subclass(torch, value):
        return True
    try:
        return not _is_wrapper(value) and isinstance(value.requires_grad, bool)
    except RuntimeError:
        return False


def _is_subclass(value: Any) -> bool:
    """A tensor argument passed as recorded, not perturbed (see :func:`_is_plain`)."""
    return isinstance(value, torch.Tensor) and not _is_plain(value)


def _plain_parts(value: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors whose values ``value`` (an output, a gradient) holds: itself, or a subclass's inner ones.

    A subclass without ``__tensor_flatten__`` gives none: a ``MaskedTensor``'s
    masked-out entries hold no value, so its data can't be asked to be finite.
    """
    if _is_plain(value):
        return [value]
    flatten = getattr(type(value), "__tensor_flatten__", None)
    if flatten is None:
        return []
    names, _ = flatten(value)
    inner = [getattr(value, name) for name in names]
    return [part for tensor in inner if isinstance(tensor, torch.Tensor) for part in _plain_parts(tensor)]


def _gradient_like(output: torch.Tensor) -> torch.Tensor:
    """An output gradient for ``output``: ones, or for a subclass its own detached values.

    A gradient must have the output's type, layout and shape; ``ones_like`` of a
    sparse ``MaskedTensor`` raises (``fill_`` has no sparse kernel), its detached
    copy is such a gradient.
    """
    return torch.ones_like(output) if _is_plain(output) else output.detach()


def _requires_grad(value: Any) -> bool:
    """Whether ``value`` is a tensor that requires grad; False for a subclass that refuses the question."""
    if not isinstance(value, torch.Tensor):
        return False
    try:
        return bool(value.requires_grad)
    except RuntimeError:  # ExpandedWeight's __torch_function__ handles only the ops it implements
        return False


def _drawn_values(shape: tuple[int, ...], dtype: torch.dtype, domain: Domain,
                  generator: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator, dtype=torch.float64) > 0.5
    if not _is_differentiable_dtype(dtype):
        # 0 and 1 are valid indices along any dimension of the candidate shapes.
        return torch.randint(0, 2, shape, generator=generator).to(dtype)
    name, low, high, signed = domain
    real = torch.float64
    if name == POSITIVE_DEFINITE and _is_square(shape):
        n = shape[-1]
        factor = torch.randn(shape, generator=generator, dtype=real)
        return (factor @ factor.mT / n + torch.eye(n, dtype=real)).to(dtype)
    magnitude = low + (high - low) * torch.rand(shape, generator=generator, dtype=real)
    if signed:
        sign = torch.where(torch.rand(shape, generator=generator, dtype=real) > 0.5, 1.0, -1.0)
        magnitude = magnitude * sign.to(real)
    if name == SIMPLEX and magnitude.dim():
        magnitude = magnitude / magnitude.sum(-1, keepdim=True)
    elif name == UNIT_NORM and magnitude.dim():
        magnitude = magnitude / torch.linalg.vector_norm(magnitude, dim=-1, keepdim=True)
    return magnitude.to(dtype)


def _is_square(shape: tuple[int, ...]) -> bool:
    """A matrix, or a batch of them, larger than 1x1."""
    return len(shape) >= 2 and shape[-1] == shape[-2] > 1


def _values_like_recorded(shape: tuple[int, ...], dtype: torch.dtype, stats: dict[str, float | bool],
                          generator: torch.Generator) -> torch.Tensor:
    """Random values with the recorded statistics of a tensor too large to record.

    Structure first (a probability vector, a positive-definite or symmetric matrix),
    else the recorded range, whole numbers where all recorded ones were.
    """
    real = torch.float64
    low, high = float(stats.get("min", -1.0)), float(stats.get("max", 1.0))
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator, dtype=real) > 0.5
    if stats.get("simplex"):
        values = torch.softmax(torch.randn(shape, generator=generator, dtype=real), dim=-1)
    elif stats.get("positive_definite"):
        n = shape[-1]
        factor = torch.randn(shape, generator=generator, dtype=real)
        values = factor @ factor.transpose(-1, -2) / n + torch.eye(n, dtype=real)
    elif stats.get("integral") or not _is_differentiable_dtype(dtype):
        values = torch.randint(int(low), int(high) + 1, shape, generator=generator).to(real)
    else:
        values = low + (high - low) * torch.rand(shape, generator=generator, dtype=real)
        if stats.get("symmetric") and len(shape) >= 2:
            values = (values + values.transpose(-1, -2)) / 2
    return values.to(dtype)


def _non_contiguous(values: torch.Tensor) -> torch.Tensor:
    """The same values, as every other element of a twice larger tensor (as a recorded view was)."""
    if values.dim() == 0:
        return values
    spread = torch.zeros(values.shape[:-1] + (2 * values.shape[-1],), dtype=values.dtype, device=values.device)
    spread[..., ::2] = values
    return spread[..., ::2]


def _make_tensor(arg: TensorArg, shape: tuple[int, ...], domain: Domain,
                 generator: torch.Generator) -> torch.Tensor:
    dtype = getattr(torch, arg.dtype)
    if arg.values is not None:
        flat = [float(item) if isinstance(item, str) else item for item in arg.values]
        values = torch.tensor(flat, dtype=torch.float64 if dtype.is_floating_point else None).to(dtype)
        values = values.reshape(shape)
    elif arg.stats is not None:
        values = _values_like_recorded(shape, dtype, dict(arg.stats), generator)
    else:
        values = _drawn_values(shape, dtype, domain, generator)
    values = values.to(arg.device)
    if not arg.contiguous:
        values = _non_contiguous(values)
    if arg.requires_grad and _is_differentiable_dtype(dtype):
        values.requires_grad_(True)
    return values


def _build(case_args: tuple[Any, ...], shapes: Iterator[tuple[int, ...]], scalars: Iterator[float],
           domain: Domain, seed: int, pickled: str | None = None, with_function: bool = False) -> tuple[Any, ...]:
    if pickled is not None:
        return _recorded_args(Case((), pickled, with_function))
    generator = torch.Generator().manual_seed(seed)
    built = []
    for arg in case_args:
        if isinstance(arg, TensorArg):
            shape = arg.shape if arg.shape is not None else next(shapes)
            built.append(_make_tensor(arg, shape, domain, generator))
        elif isinstance(arg, ScalarArg):
            built.append(next(scalars))
        else:
            built.append(_promoted(arg))
    return tuple(built)


def _search_shape_plans(count: int) -> list[tuple[tuple[int, ...], ...]]:
    """Candidate shapes for ``count`` searched tensors, most common layouts first."""
    same = [(3, 4), (2, 3, 4), (3, 3), (4,), ()]
    dims = [3, 4, 5, 6, 7, 8, 9, 10][: count + 1]
    plans: list[tuple[tuple[int, ...], ...]] = [tuple([same[0]] * count)]
    # Matrix chains (a @ b @ ...), plain and batched.
    plans.append(tuple((dims[i], dims[i + 1]) for i in range(count)))
    plans.extend(tuple([shape] * count) for shape in same[1:3])
    plans.append(tuple((2, dims[i], dims[i + 1]) for i in range(count)))
    # A matrix with vectors broadcast against its last dimension (bias, scale).
    plans.append(((3, 4),) + ((4,),) * (count - 1))
    plans.extend(tuple([shape] * count) for shape in same[3:])
    unique: list[tuple[tuple[int, ...], ...]] = []
    for plan in plans:
        if plan not in unique:
            unique.append(plan)
    return unique


def _outputs_of(result: Any) -> tuple[Any, ...]:
    return result if isinstance(result, tuple) else (result,)


def _differentiable_outputs(result: Any) -> tuple[torch.Tensor, ...]:
    return tuple(
        out for out in _outputs_of(result)
        if isinstance(out, torch.Tensor) and _is_differentiable_dtype(out.dtype)
    )


def _forward_accepts(function: Any, args: tuple[Any, ...]) -> bool:
    return _forward_rejection(function, args) is None


def _forward_rejection(function: Any, args: tuple[Any, ...]) -> str | None:
    """Why forward does not accept these arguments (its error, or what its outputs lack), or None."""
    try:
        with torch.no_grad():
            result = function.apply(*args)
    except Exception as error:  # noqa: BLE001 - any error means "not this candidate"
        return f"raised {type(error).__name__}: {error}"
    outputs = _differentiable_outputs(result)
    if not outputs:
        return "returned no floating-point tensor"
    # A subclass output by its plain parts: torch.masked's reductions fail on a sparse MaskedTensor.
    if not all(bool(torch.isfinite(part).all()) for out in outputs for part in _plain_parts(out)):
        return "returned non-finite values"
    return None


def _untestable(function: Any, build: Callable[[], tuple[Any, ...]]) -> str | None:
    """Why gradcheck can't judge ``function`` on the arguments ``build`` makes, or None.

    Found on torch's own Functions: a forward that samples (``_Dirichlet``) gives
    finite differences of noise, and tensor subclasses or nested tensors as outputs
    (``ComplexTensor``, ``ViewNestedFromBuffer``) are beyond gradcheck's comparison;
    each failed without a bug.  Each call gets fresh arguments, so that a forward
    that writes its input in place is not taken for a random one.
    """
    try:
        with torch.no_grad():
            first = _differentiable_outputs(function.apply(*build()))
            second = _differentiable_outputs(function.apply(*build()))
    except Exception:  # noqa: BLE001 - the checks report what goes wrong
        return None
    for out in first:
        if _is_wrapper(out):
            kind = "a nested tensor" if out.is_nested else f"a {type(out).__name__} (a tensor subclass)"
            return f"forward returns {kind}, which gradcheck cannot compare"
    if len(first) != len(second) or not all(
        a.shape == b.shape and torch.equal(a, b) for a, b in zip(first, second)
    ):
        return ("forward gives different outputs for the same inputs (it draws random numbers): gradcheck's "
                "finite differences need a deterministic forward")
    return _single_use(function, build()) or _subclass_gradient(function, build())


def _single_use(function: Any, args: tuple[Any, ...]) -> str | None:
    """Why the same arguments can't be used twice (an object a call consumes), or None.

    gradcheck calls the Function many times with the same arguments.  torch's
    ``ScanAutogradOp`` gets a ``HopPartitionedGraph`` that ``torch.scan`` builds
    afresh for each call: after one forward and backward its backward graph expects
    another argument, so a replay's second call raises where the first worked.
    """
    if _backward_failure(function, args) is not None:
        return None  # the checks report backward's error
    error = _backward_failure(function, args)
    if error is None:
        return None
    return (f"forward and backward work once, then raise {type(error).__name__}: {error} on a second call "
            "with the same arguments: an argument is consumed by a call (a single-use object), and gradcheck "
            "calls the Function many times")


def _is_wrapper(value: torch.Tensor) -> bool:
    """A nested tensor, or a subclass with its own ``__torch_dispatch__`` (plain subclasses compare fine)."""
    return value.is_nested or type(value).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__


def _subclass_gradient(function: Any, args: tuple[Any, ...]) -> str | None:
    """Why the gradients backward returns can't be compared (a tensor subclass for a plain input), or None.

    torch.masked's ``Combine`` returns a ``MaskedTensor`` gradient, whose masked-out
    entries mean "no value": gradcheck compares them with finite differences and fails without a bug.
    """
    inputs = [a for a in args if _is_plain(a) and a.requires_grad]
    try:
        outputs = [out for out in _differentiable_outputs(function.apply(*args)) if out.requires_grad]
        grads = torch.autograd.grad(outputs, inputs, [_gradient_like(out) for out in outputs], allow_unused=True)
    except Exception:  # noqa: BLE001 - the checks report what goes wrong
        return None
    for index, (grad, arg) in enumerate(zip(grads, inputs)):
        if grad is not None and _is_wrapper(grad) and not _is_wrapper(arg):
            kind = "a nested tensor" if grad.is_nested else f"a {type(grad).__name__} (a tensor subclass)"
            return (f"backward returns {kind} as the gradient of tensor input {index}, "
                    "which gradcheck cannot compare with finite differences")
    return None


def _backward_failure(function: Any, args: tuple[Any, ...]) -> Exception | None:
    """What backward raises for these arguments (wrong gradient shapes included), or None."""
    inputs = [a for a in args if _requires_grad(a)]
    try:
        outputs = [out for out in _differentiable_outputs(function.apply(*args)) if out.requires_grad]
        torch.autograd.grad(outputs, inputs, [_gradient_like(out) for out in outputs], allow_unused=True)
    except Exception as error:  # noqa: BLE001 - any error means "not this candidate"
        return error
    return None


def _backward_error(function: Any, args: tuple[Any, ...]) -> str | None:
    """Why backward fails for these arguments (wrong gradient shapes included), or None."""
    error = _backward_failure(function, args)
    return None if error is None else f"{type(error).__name__}: {error}"


def _unmet_precondition(function: Any, error: BaseException) -> str | None:
    """Why ``error``, raised by backward, is a precondition the generated tests cannot meet, or None.

    Two kinds, found on torch's own ``dist_autograd_test`` Functions: a ``raise``
    or ``assert`` statement of the Function's own module raised it (a state its
    own tests set up, a deliberately simulated error), or backward calls
    ``torch.distributed`` while no process group is initialised (a collective, the
    distributed autograd context): the generated tests run in one process.  An
    error raised elsewhere, by torch or numpy on wrong shapes, is no such thing.
    """
    subject = function.function if isinstance(function, _OnClones) else function
    module = sys.modules.get(getattr(subject, "__module__", ""))
    source = getattr(module, "__file__", None)
    frames = traceback.extract_tb(error.__traceback__)
    own = [frame for frame in frames if source is not None and frame.filename == source]
    if own and own[-1] is frames[-1] and (frames[-1].line or "").startswith(("raise", "assert")):
        statement = (frames[-1].line or "").split()[0]
        return (f"it raises on purpose: a `{statement}` statement of its module, at "
                f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} (a state or input its own tests provide)")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return None
    library = os.path.join(os.path.dirname(torch.__file__), "distributed") + os.sep
    called = any(frame.filename.startswith(library) for frame in frames)
    if own and own[-1] is frames[-1] and not called:
        # An error raised in C++ by a torch.distributed binding called on backward's line.
        for name in re.findall(r"\b([A-Za-z_]\w*)\s*\.", own[-1].line or ""):
            value = getattr(module, name, None)
            owner = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            called = called or (isinstance(owner, str) and owner.startswith("torch.distributed"))
    if called:
        where = f" (`{own[-1].line}`, {os.path.basename(own[-1].filename)}:{own[-1].lineno})" if own else ""
        return (f"it calls torch.distributed{where}, which needs an initialised process group or RPC agent; "
                "the generated tests run in one process without one")
    return None


@dataclass(frozen=True)
class Resolution:
    """The searched shapes and scalar values and the value domain chosen for a case.

    ``backward_error`` is set when backward failed on every candidate the forward
    accepted: the first such candidate is kept, with the error backward raised.
    """

    shapes: tuple[tuple[int, ...], ...]
    scalars: tuple[float, ...]
    domain: Domain
    backward_error: str | None = None
    unmet_precondition: str | None = None  # why backward_error is no bug (see _unmet_precondition)
    untestable: str | None = None  # why gradcheck can't judge this Function (see _untestable)


# (Function, repr(case)) -> resolution: every check of a case reuses one search;
# repr because literal arguments (lists) need not be hashable.
_resolved: dict[tuple[Any, str], Resolution | None] = {}


def _resolve(function: Any, case: Case) -> Resolution | None:
    """The searched shapes, scalars and value domain the forward accepts, or None."""
    key = (function, repr(case))
    if key not in _resolved:
        _resolved[key] = _search(function, case)
    return _resolved[key]


# Why forward refused a case that has nothing to search (recorded or literal), by _resolved's key.
_refused: dict[tuple[Any, str], str] = {}


def _search(function: Any, case: Case) -> Resolution | None:
    """The first candidate both forward and backward accept, else the first forward accepts.

    A forward can accept shapes its backward was not written for (a matrix where a
    vector was meant); when backward runs on none, the forward's choice still lets
    the checks report what goes wrong in it.
    """
    forward_only: Resolution | None = None
    searched = sum(1 for a in case.args if isinstance(a, TensorArg) and a.shape is None)
    plans = _search_shape_plans(searched) if searched else [()]
    scalar_count = sum(1 for a in case.args if isinstance(a, ScalarArg))
    scalar_choices = list(itertools.product(SCALAR_CANDIDATES, repeat=scalar_count))
    for plan, scalars, domain in search_candidates(plans, scalar_choices, case.domains):
        def build() -> tuple[Any, ...]:
            return _build(case.args, iter(plan), iter(scalars), domain, SEED, case.pickled, case.with_function)

        args = build()
        rejection = _forward_rejection(function, args)
        if rejection is not None:
            _refused.setdefault((function, repr(case)), rejection)
            continue
        untestable = _untestable(function, build)
        if untestable is not None:
            return Resolution(plan, scalars, domain, untestable=untestable)
        error = _backward_failure(function, args)
        if error is None:
            return Resolution(plan, scalars, domain)
        forward_only = forward_only or Resolution(plan, scalars, domain, f"{type(error).__name__}: {error}",
                                                  _unmet_precondition(function, error))
    return forward_only


def search_candidates(
    plans: Sequence[tuple[tuple[int, ...], ...]], scalar_choices: Iterable[tuple[float, ...]],
    preferred: Sequence[str] = (),
) -> Iterator[tuple[tuple[tuple[int, ...], ...], tuple[float, ...], Domain]]:
    """(shapes, scalar values, value domain) to try, in order; the ``preferred`` domains first."""
    domains = sorted(DOMAINS, key=lambda d: preferred.index(d[0]) if d[0] in preferred else len(preferred))
    for plan, scalars, domain in itertools.product(plans, scalar_choices, domains):
        if domain[0] == POSITIVE_DEFINITE and not any(_is_square(shape) for shape in plan):
            continue  # no square matrix: the same values as "positive"
        yield plan, scalars, domain


def make_args(function: Any, case: Case, seed: int = SEED, compares: bool = True) -> tuple[Any, ...]:
    """Concrete arguments for ``case``; skips the test when no candidate is accepted.

    ``compares`` is false for a check that looks at structure only (which gradients
    are None, that double backward raises, shapes and finiteness): it still runs on a
    Function whose outputs can't be compared (see ``_untestable``).
    """
    resolved = _resolve(function, case)
    if resolved is None:
        searched = any(isinstance(a, (TensorArg, ScalarArg)) and getattr(a, "shape", None) is None
                       for a in case.args)
        if not searched and (function, repr(case)) in _refused:
            # Recorded or literal inputs: the recording is not what is missing.
            pytest.skip(f"{function.__qualname__}.forward {_refused[(function, repr(case))]} on this case's "
                        "inputs, which the checks pass in float64 (an integer or bool tensor keeps its dtype)")
        what = "none of the candidate shapes and values" if searched else "none of the value domains"
        pytest.skip(f"{function.__qualname__}.forward accepted {what}; {RECORD_HINT}")
    if compares and resolved.untestable is not None:
        pytest.skip(f"{function.__qualname__}: {resolved.untestable}")
    if resolved.unmet_precondition is not None:
        pytest.skip(f"{function.__qualname__}.backward raised {resolved.backward_error}, and "
                    f"{resolved.unmet_precondition}")
    if resolved.backward_error is not None and resolved.scalars and resolved.backward_error.startswith("TypeError"):
        # A number was guessed for a parameter of unknown kind and backward used it
        # as something else (a callable kept on ctx): our guess, not a bug.
        positions = [i for i, a in enumerate(case.args) if isinstance(a, ScalarArg)]
        pytest.skip(f"{function.__qualname__}.backward raised {resolved.backward_error} with numbers searched "
                    f"for the argument(s) at position(s) {positions}, whose kind is unknown; {RECORD_HINT}")
    if resolved.backward_error is not None and (resolved.shapes or resolved.scalars):
        # With nothing searched there was no choice to explain: the check reports the failure.
        searched = ", ".join(str(tuple(shape)) for shape in resolved.shapes) or "the searched values"
        pytest.fail(
            f"{function.__qualname__}.backward failed: {resolved.backward_error}\n"
            f"It failed on every searched candidate; forward accepted {searched} first. "
            f"If the Function is meant for other shapes, {RECORD_HINT}",
            pytrace=False,
        )
    return _build(case.args, iter(resolved.shapes), iter(resolved.scalars), resolved.domain, seed,
                  case.pickled, case.with_function)


def _nondeterminism(call: Callable[..., tuple[torch.Tensor, ...]], inputs: tuple[torch.Tensor, ...]) -> float:
    """gradcheck's ``nondet_tol``: 0 when two identical backward passes agree bit for bit.

    Atomics (scatter-add, index_add on some devices) make backward vary between
    runs; gradcheck then fails on "Backward is not reentrant" though the formula is
    right.  The tolerance is ten times the largest difference seen.
    """
    try:
        outputs = [out for out in call(*inputs) if out.requires_grad]
        if not outputs:
            return 0.0
        grad_outputs = [torch.ones_like(out) for out in outputs]
        runs = [torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph=True, allow_unused=True)
                for _ in range(2)]
    except Exception:  # noqa: BLE001 - gradcheck itself reports what goes wrong
        return 0.0
    worst = 0.0
    for first, second in zip(*runs):
        if first is not None and second is not None and first.shape == second.shape and first.layout == torch.strided:
            difference = (first - second).abs().nan_to_num(0.0)
            worst = max(worst, float(difference.max()) if difference.numel() else 0.0)
    return 10 * worst


def _fast_mode(tensors: Sequence[torch.Tensor]) -> bool:
    return sum(t.numel() for t in tensors) > FAST_MODE_THRESHOLD


DifferentiableCall = Callable[..., tuple[torch.Tensor, ...]]


def _is_symmetric(value: torch.Tensor) -> bool:
    """A real matrix (or batch of them) equal to its transpose, larger than 1x1."""
    return (value.layout == torch.strided and value.dtype.is_floating_point and value.dim() >= 2
            and value.shape[-1] == value.shape[-2] > 1 and bool(torch.equal(value, value.mT)))


def _symmetric_positions(args: tuple[Any, ...], positions: list[int]) -> list[int]:
    """The inputs that arrive symmetric: their domain is symmetric matrices, checked on symmetric perturbations."""
    return [i for i in positions if _is_symmetric(args[i])]


def _transposable_positions(args: tuple[Any, ...]) -> list[int]:
    """The floating tensor inputs that a transposed memory layout makes non-contiguous (2-D and up, no size 1)."""
    return [i for i, a in enumerate(args)
            if _is_plain(a) and a.layout == torch.strided and _is_differentiable_dtype(a.dtype)
            and a.dim() >= 2 and a.shape[-1] > 1 and a.shape[-2] > 1]


def _written_buffers(function: Any, args: tuple[Any, ...]) -> list[int]:
    """The tensor arguments without gradient that forward writes into: output buffers.

    torch.distributed.nn's ``reduce_scatter(output, inputs)`` and
    ``all_to_all_single(output, input)`` write the collective's result into
    ``output`` and return it.  gradcheck calls the Function many times with the
    same arguments: each call would overwrite the tensor an earlier call returned,
    and autograd raises ("Output 0 ... is a view and its base ... has been
    modified inplace") where separate calls with their own buffers are fine.
    Found by version counters on one forward call with clones of the candidates.
    """
    # A kept subclass is not a buffer (ExpandedWeight refuses even .requires_grad and .clone()).
    candidates = [i for i, a in enumerate(args) if _is_plain(a) and not a.requires_grad]
    if not candidates:
        return []
    probe = list(args)
    for position in candidates:
        probe[position] = args[position].clone()
    versions = [probe[i]._version for i in candidates]
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            function.apply(*probe)
    except Exception:  # noqa: BLE001 - the checks report what goes wrong
        return []
    return [i for i, version in zip(candidates, versions) if probe[i]._version != version]


def _grad_positions(function: Any, args: tuple[Any, ...]) -> list[int]:
    """The positions of the plain tensor inputs that require grad: what the checks differentiate.

    None: skipped when the tensor inputs are all subclasses, else failed (:func:`_no_plain_input`).
    """
    positions = [i for i, a in enumerate(args) if _is_plain(a) and a.requires_grad]
    if not positions:
        _no_plain_input(function, args)
    return positions


def _differentiable_call(function: Any, args: tuple[Any, ...], transposed: Sequence[int] = (),
                         ) -> tuple[DifferentiableCall, tuple[torch.Tensor, ...]]:
    """``apply`` as a function of the inputs that require grad, returning differentiable outputs.

    A symmetric matrix input (a covariance, a kernel matrix, recorded or with recorded
    ``symmetric`` statistics) is passed as ``(x + x.mT) / 2``: finite differences
    then perturb it symmetrically, as its domain requires (an eigendecomposition's
    backward is only defined for symmetric inputs), and the checked gradient is
    backward's projected onto symmetric matrices.  Every call seeds torch's CPU
    random generator alike (inside a forked RNG state).  The inputs at ``transposed``,
    laid out transposed in memory, stay so after symmetrisation.  An output buffer
    (see :func:`_written_buffers`) is cloned at every call, as separate calls
    allocate their own.
    """
    positions = _grad_positions(function, args)
    symmetric = set(_symmetric_positions(args, positions))
    buffers = _written_buffers(function, args)

    def call(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        full = list(args)
        for position in buffers:
            full[position] = full[position].clone()
        for position, value in zip(positions, inputs):
            full[position] = (value + value.mT) / 2 if position in symmetric else value
        for position in transposed:
            if full[position].is_contiguous():  # symmetrised: a new tensor
                full[position] = full[position].mT.contiguous().mT
        _stop_if_over_budget()
        # The same random numbers at every call: a forward that draws some (a random
        # start vector, a dropout mask) is then a function finite differences can check.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            return _differentiable_outputs(function.apply(*full))

    return call, tuple(args[i] for i in positions)


def _no_plain_input(function: Any, args: tuple[Any, ...]) -> NoReturn:
    """Skip (the differentiable inputs are all tensor subclasses, see :func:`_is_plain`), else fail."""
    subclasses = [f"{type(a).__name__} #{i}" for i, a in enumerate(args) if _is_subclass(a)]
    if subclasses:
        pytest.skip(f"{function.__qualname__}: no plain floating-point tensor input to compare with finite "
                    f"differences: the tensor inputs {', '.join(subclasses)} are tensor subclasses, which gradcheck "
                    "can't perturb (test_subclass_gradients checks the gradients backward gives them)")
    pytest.fail(f"{function.__qualname__}: the case has no floating-point tensor input to check")


# ---------------------------------------------------------------------------
# The checks, one per generated test


_GradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError
# gradcheck's own defaults (a declared tolerance replaces them), and the factor of
# the looser re-run that tells a small mismatch (passes when looser) from one no
# tolerance explains (fails anyway).
_ATOL, _RTOL = 1e-5, 1e-3
_LOOSER = 100
# The float32 re-run of a failed check: float32's unit roundoff is 6e-8, so central
# differences with eps=1e-3 err by about 6e-8 * |f| / 1e-3 = 6e-5 (rounding) plus
# 1e-7 times the third derivative (truncation) at the harness's inputs of magnitude
# 0.5 to 1.5: a right backward stays about ten times inside atol=1e-3, rtol=1e-2.
# With these, gradcheck passed all 25 float32 torch ops tried on such inputs
# (elementwise, reductions, softmax, matmul, solve, cholesky, eigvalsh, inv, det,
# pinv, matrix_exp).
_FLOAT32_EPS, _FLOAT32_ATOL, _FLOAT32_RTOL = 1e-3, 1e-3, 1e-2


def _describe_inputs(args: tuple[Any, ...]) -> str:
    parts = []
    for index, arg in enumerate(args):
        if _is_subclass(arg):
            parts.append(f"#{index}: {type(arg).__name__} {tuple(arg.shape)} {str(arg.dtype).removeprefix('torch.')} "
                         "(a tensor subclass, as recorded, not differentiated)")
        elif isinstance(arg, torch.Tensor):
            layout = "" if arg.layout != torch.strided or arg.is_contiguous() else ", non-contiguous"
            if arg.layout != torch.strided:
                layout += f", {str(arg.layout).removeprefix('torch.')}"
            elif arg.requires_grad and _is_symmetric(arg):
                layout += ", symmetric (perturbed symmetrically)"
            grad = ", requires_grad" if arg.requires_grad else ""
            parts.append(f"#{index}: tensor {tuple(arg.shape)} {str(arg.dtype).removeprefix('torch.')}{layout}{grad}")
        else:
            parts.append(f"#{index}: {arg!r}")
    return "; ".join(parts)


def _where(seed: int = SEED) -> str:
    """The test to re-run and the seed, so that a failure can be reproduced."""
    node = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    return f"seed {seed}" + (f"; reproduce with: pytest '{node}'" if node else "")


def _raised_at(error: BaseException) -> str:
    """`` (file:line, in name)`` of the innermost frame of ``error`` outside torch and this module, or ''.

    An error raised by the Function's own Python code names the line to look at;
    one raised by autograd's engine (in C++) has no such frame.
    """
    library = os.path.dirname(torch.__file__ or "") + os.sep
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if not frame.filename.startswith(library) and frame.filename != __file__]
    return f" ({frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""


def _double_backward_note(function: Any, args: tuple[Any, ...]) -> str:
    """Why double backward raised: autograd differentiating through a backward that was not written for it."""
    first_order = _backward_error(function, args)
    if first_order is not None:
        return f"backward raises at first order too ({first_order}): see test_gradcheck\n"
    return ("backward itself runs; the error comes from autograd differentiating through backward, which is not "
            "@once_differentiable: every double backward through this Function (a Hessian, a gradient penalty) "
            "raises it. Make backward differentiable, or decorate it with "
            "@torch.autograd.function.once_differentiable (double backward then raises a clear error saying so)\n")


def _float32_verdict(function: Any, case: Case, args: tuple[Any, ...], run: Callable[..., bool], atol: float,
                     rtol: float, options: dict[str, Any]) -> str:
    """Whether the failed check passes on the same inputs in float32, at float32's tolerances: one line.

    A mismatch float32 cannot resolve does not show where the Function runs in
    float32; one it can is visible there too.
    """
    atol, rtol = max(atol, _FLOAT32_ATOL), max(rtol, _FLOAT32_RTOL)
    header = f"in float32 (eps={_FLOAT32_EPS:g}, atol={atol:g}, rtol={rtol:g})"
    if case.pickled is not None:
        return f"{header}: not tried, the recorded objects keep their own float64 tensors"
    single = tuple(
        (a.detach().float().requires_grad_(a.requires_grad) if a.dtype == torch.float64 else a)
        if isinstance(a, torch.Tensor) else torch.float32 if a is torch.float64 else a
        for a in args)
    try:
        call, inputs = _differentiable_call(function, single)
        if any(out.dtype != torch.float32 for out in call(*inputs)):
            return f"{header}: not tried, forward does not return float32 for float32 inputs"
        with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
            warnings.simplefilter("ignore")  # gradcheck warns about inputs that are not float64
            torch.manual_seed(SEED)
            run(call, inputs, eps=_FLOAT32_EPS, atol=atol, rtol=rtol,
                **{**options, "nondet_tol": _nondeterminism(call, inputs)})
    except _GradcheckError:
        return f"{header}: fails too"
    except Exception as error:  # noqa: BLE001 - reported as the verdict
        return f"{header}: raises {type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
    return f"{header}: passes (the mismatch is below what float32 resolves)"


class _OverBudget(BaseException):
    """Raised at a call of forward past the deadline; a BaseException, so that the checks' ``except Exception`` let it by."""


def _check_seconds() -> float:
    text = os.environ.get(CHECK_SECONDS_VARIABLE, "").strip()
    try:
        return max(float(text), 0.0) if text else DEFAULT_CHECK_SECONDS
    except ValueError:
        return DEFAULT_CHECK_SECONDS


# The monotonic time the running check must end by; None outside a check or without a limit.
_deadline: list[float | None] = [None]


def _stop_if_over_budget() -> None:
    """Called before each call of forward: where a check can be stopped without harm.

    Not a timer signal: an exception raised asynchronously can land inside an
    import torch makes lazily (sympy), leaving that module half-imported and every
    later test failing with no bug behind it.  Every gradcheck-family check calls
    forward again and again (each finite difference), so the limit is still kept to
    within one forward and backward.
    """
    deadline = _deadline[0]
    if deadline is not None and time.monotonic() > deadline:
        raise _OverBudget


def _within_time_budget(run_check: Callable[..., None]) -> Callable[..., None]:
    """``run_check`` (a check of the gradcheck family), skipped with the reason when it outlasts
    :data:`CHECK_SECONDS_VARIABLE`.

    A check cut short says its verdict is unknown; it never counts as a failure,
    which would claim a bug nobody saw.
    """

    @functools.wraps(run_check)
    def budgeted(check: str, what: str, function: Any, *args: Any, **kwargs: Any) -> None:
        seconds = _check_seconds()
        previous = _deadline[0]
        _deadline[0] = time.monotonic() + seconds if seconds else None
        try:
            run_check(check, what, function, *args, **kwargs)
        except _OverBudget:
            pytest.skip(f"{function.__qualname__}: {check} did not finish within {seconds:g} s on this case; its "
                        f"verdict is unknown (a large recorded case: record a smaller call, or set "
                        f"{CHECK_SECONDS_VARIABLE} to more seconds, 0 for no limit)")
        finally:
            _deadline[0] = previous

    return budgeted


@_within_time_budget
def _run_gradcheck(check: str, what: str, function: Any, case: Case, run: Callable[..., bool], *, atol: float,
                   rtol: float, double_backward: bool = False, non_contiguous: bool = False, **options: Any) -> None:
    """Run gradcheck (or gradgradcheck) ``run``; on failure, fail with what was compared on which inputs.

    The message also says whether tolerances 100 times looser would pass, which
    tells a small mismatch (an approximate forward, an ill-conditioned point) from
    one no tolerance explains, and names the declaration that accepts either.  An
    exception other than gradcheck's own (raised by the Function, or by autograd
    differentiating through backward) fails the test with the same header, chained.

    With ``non_contiguous``, the floating inputs of 2 or more dimensions are passed
    not contiguous; a failure is reported only if the same check passes on
    contiguous inputs (else it is test_gradcheck's to report, and the test skips).
    """
    args = make_args(function, case)
    transposed = _transposable_positions(args) if non_contiguous else []
    if non_contiguous and not transposed:
        pytest.skip(f"{function.__qualname__}: the case has no floating-point tensor input of 2 or more dimensions "
                    "(none of size 1) that could be passed non-contiguous")
    for position in transposed:
        # In place, keeping the tensor: an object among the arguments that holds it (an
        # ODE function and its parameters) sees the same layout and gradcheck's perturbations.
        args[position].data = args[position].data.mT.contiguous().mT
    call, inputs = _differentiable_call(function, args, transposed)
    options.setdefault("nondet_tol", _nondeterminism(call, inputs))

    def seeded_run(atol: float, rtol: float, call: DifferentiableCall = call,
                   inputs: tuple[torch.Tensor, ...] = inputs) -> None:
        # gradgradcheck's output gradients and fast mode's projections are drawn from
        # torch's global generator: seeded, the verdict does not depend on earlier tests.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            run(call, inputs, atol=atol, rtol=rtol, **options)

    where = f"inputs (float64): {_describe_inputs(args)}; {_where()}\n"
    raised: Exception | None = None
    try:
        # Double backward also differentiates with respect to the output gradients.
        options["fast_mode"] = _fast_mode(inputs + call(*inputs) if double_backward else inputs)
        seeded_run(atol, rtol)
        return
    except _GradcheckError as error:
        detail = str(error).strip()
    except Exception as error:  # noqa: BLE001 - the Function's own error, reported with its context
        raised = error
    if transposed:
        try:
            seeded_run(atol, rtol, *_differentiable_call(function, make_args(function, case)))
        except Exception as error:  # noqa: BLE001 - any failure: not a question of layout
            pytest.skip(f"{function.__qualname__}: gradcheck fails on contiguous inputs too "
                        f"({type(error).__name__}; test_gradcheck reports it): not a question of memory layout")
        where += (f"inputs {', '.join(f'#{i}' for i in transposed)} were passed non-contiguous (the same values, "
                  "memory laid out transposed: x.mT.contiguous().mT); gradcheck passes with all inputs contiguous: "
                  "the Function assumes contiguous memory (a .view, data_ptr or stride arithmetic, a kernel called "
                  "without .contiguous())\n")
    if raised is not None:
        note = _double_backward_note(function, args) if double_backward else ""
        raise pytest.fail.Exception(
            f"{function.__qualname__}: {check} raised {type(raised).__name__}: {raised}{_raised_at(raised)}\n"
            f"{where}{note}", pytrace=False) from raised
    jump = _jump_within_step(call, inputs)
    if jump is not None:
        pytest.skip(f"{function.__qualname__}: {check} can't judge backward on this case: {jump}")
    # A layout failure is not a question of precision: the contiguous run passed at these tolerances.
    try:
        precision = "" if transposed else _precision(function, case, args, run, seeded_run, atol, rtol, options)
    except _OverBudget:  # the failure stands; only its diagnosis is cut short
        precision = ("whether looser tolerances or float32 change the verdict: not measured (the check's time "
                     f"limit, {CHECK_SECONDS_VARIABLE}, was reached)\n")
    nondeterministic = (f"backward is nondeterministic: nondet_tol={options['nondet_tol']:.3g} was used\n"
                        if options.get("nondet_tol") else "")
    pytest.fail(
        f"{function.__qualname__}: {what}\n"
        f"{where}{precision}{nondeterministic}"
        f"gradcheck said: {detail}",
        pytrace=False,
    )


# Steps of the continuity probe: gradcheck's own eps, and one a hundred times smaller.
_PROBE_STEP = 1e-6
_PROBE_STEP_RATIO = 100.0
_PROBE_DIRECTIONS = 4


def _jump_within_step(call: DifferentiableCall, inputs: tuple[torch.Tensor, ...]) -> str | None:
    """Why finite differences can't judge backward at ``inputs``, when forward jumps there; else None.

    A recorded input can sit exactly on a tie that forward decides (two equal pivots
    of a pivoted Cholesky, a max, a sort): a step of gradcheck's size then changes the
    decision and the output jumps, and the numerical Jacobian is of order 1/eps,
    however right backward is.  Along a few random sign vectors (every element moved
    by the step), a smooth forward's central difference shrinks with the step, a
    hundred times for a hundred times smaller step; a jump's does not.  Asked only
    after a comparison failed, so a passing check costs nothing.
    """
    generator = torch.Generator().manual_seed(SEED)
    small = _PROBE_STEP / _PROBE_STEP_RATIO
    try:
        with torch.no_grad():
            # Below this, a difference is rounding: signs that cancel in a mean give ~1e-17 at both steps.
            scale = max((float(out.abs().max()) for out in call(*inputs) if out.numel()), default=0.0)
            noise = 1e-8 * (1.0 + scale)
            for _ in range(_PROBE_DIRECTIONS):
                signs = [torch.randint(0, 2, x.shape, generator=generator).to(x) * 2 - 1 for x in inputs]

                def difference(step: float, signs: list[torch.Tensor] = signs) -> float:
                    plus = call(*(x + step * s for x, s in zip(inputs, signs)))
                    minus = call(*(x - step * s for x, s in zip(inputs, signs)))
                    return max((float((a - b).abs().max()) for a, b in zip(plus, minus) if a.numel()), default=0.0)

                large, tiny = difference(_PROBE_STEP), difference(small)
                # Smooth: tiny ~ large / 100.  A jump: tiny ~ large (the same tie crossed by both steps).
                if tiny > noise and tiny > large / 10:
                    return (f"forward's output jumps by {tiny:.3g} for a step of {small:g} in every input element "
                            f"(by {large:.3g} for {_PROBE_STEP:g}): it is not continuous here (a tie or a branch "
                            "decided by the inputs' exact values, such as equal pivots or a max), so gradcheck's "
                            "finite differences measure the jump, not the derivative")
    except (Exception, _OverBudget):  # noqa: BLE001 - a probe that fails or runs out of time proves nothing
        return None
    return None


def _precision(function: Any, case: Case, args: tuple[Any, ...], run: Callable[..., bool],
               seeded_run: Callable[[float, float], None], atol: float, rtol: float, options: dict[str, Any]) -> str:
    """Two lines on a failed comparison: whether it passes 100 times looser, and in float32."""
    looser_atol, looser_rtol = atol * _LOOSER, rtol * _LOOSER
    try:
        seeded_run(looser_atol, looser_rtol)
        # Not "no bug": a backward 5% off (`1.05 * cos` for `sin`) passes 100 times looser too.
        looser = (f"fails at atol={atol:g}, rtol={rtol:g}; passes {_LOOSER} times looser: the mismatch is small "
                  "(within about 10%): an approximate forward (e.g. an iterative solver), ill-conditioned numerics, "
                  "or a formula slightly off; if forward is an approximation, declare the tolerance on the class: "
                  f"# autograd-lint: gradcheck atol={looser_atol:g} rtol={looser_rtol:g}")
    except _GradcheckError:
        looser = (f"fails at atol={atol:g}, rtol={rtol:g} and {_LOOSER} times looser: not a precision problem; "
                  "a wrong formula unless the gradient is deliberately not the derivative (meant only for some "
                  "losses, or a surrogate: declare it with # autograd-lint: surrogate-gradient)")
    return f"{looser}\n{_float32_verdict(function, case, args, run, atol, rtol, options)}\n"


def check_gradcheck(function: Any, case: Case, atol: float = _ATOL, rtol: float = _RTOL) -> None:
    """backward agrees with finite differences (within the declared tolerances, if any)."""
    _run_gradcheck("gradcheck", "backward differs from the finite-difference Jacobian of forward (gradcheck)",
                   function, case, torch.autograd.gradcheck, atol=atol, rtol=rtol, check_undefined_grad=False)


def check_gradcheck_non_contiguous(function: Any, case: Case, atol: float = _ATOL, rtol: float = _RTOL) -> None:
    """backward agrees with finite differences when the inputs are not contiguous, as it does when they are.

    A kernel that assumes contiguous memory (a ``.view`` of an input or a saved
    tensor, pointer or stride arithmetic, a C extension given ``x`` without
    ``.contiguous()``) is right on the fresh tensors of most tests and wrong, or
    raising, on a transposed weight or a slice.
    """
    _run_gradcheck("gradcheck with non-contiguous inputs",
                   "backward and the finite-difference Jacobian of forward disagree on non-contiguous inputs "
                   "(gradcheck)", function, case, torch.autograd.gradcheck, atol=atol, rtol=rtol,
                   non_contiguous=True, check_undefined_grad=False)


def check_gradgradcheck(function: Any, case: Case, atol: float = _ATOL, rtol: float = _RTOL) -> None:
    """backward is itself differentiable, correctly."""
    _run_gradcheck(
        "gradgradcheck (double backward)",
        "double backward differs from finite differences of backward (gradgradcheck). backward is not "
        "@once_differentiable, so autograd differentiates through it and returns this wrong second "
        "derivative silently; if it is not meant to be differentiated twice, decorate it with "
        "@once_differentiable",
        function, case, torch.autograd.gradgradcheck, atol=atol, rtol=rtol, double_backward=True,
        check_undefined_grad=False)


def check_once_differentiable(function: Any, case: Case) -> None:
    """A ``@once_differentiable`` backward raises on double backward instead of returning garbage."""
    call, inputs = _differentiable_call(function, make_args(function, case, compares=False))
    outputs = call(*inputs)
    # The grad_outputs must require grad: only then does once_differentiable attach
    # the node that raises on the second differentiation.
    grad_outputs = tuple(torch.randn_like(out).requires_grad_(True) for out in outputs)
    grads = torch.autograd.grad(outputs, inputs, grad_outputs, create_graph=True, allow_unused=True)
    differentiable = [g for g in grads if g is not None and g.requires_grad]
    assert differentiable, "backward is marked @once_differentiable but double backward found no graph to raise from"
    # backward(), not grad(inputs): the raising node hangs off detached copies of
    # the gradients, which a grad() restricted to the inputs would prune.
    with pytest.raises(RuntimeError, match="once_differentiable"):
        torch.autograd.backward(sum(g.sum() for g in differentiable))


def check_forward_ad(function: Any, case: Case, atol: float = _ATOL, rtol: float = _RTOL) -> None:
    """jvp agrees with finite differences (forward-mode AD)."""
    _run_gradcheck("gradcheck(check_forward_ad=True)",
                   "jvp differs from finite differences of forward (gradcheck, check_forward_ad=True)",
                   function, case, torch.autograd.gradcheck, atol=atol, rtol=rtol, check_forward_ad=True,
                   check_backward_ad=False, check_undefined_grad=False)


def check_undefined_grad(function: Any, case: Case, atol: float = _ATOL, rtol: float = _RTOL) -> None:
    """backward treats undefined (``None``) output gradients as zeros."""
    _run_gradcheck("gradcheck(check_undefined_grad=True)",
                   "backward mishandles undefined (None) output gradients (gradcheck, check_undefined_grad=True)",
                   function, case, torch.autograd.gradcheck, atol=atol, rtol=rtol, check_undefined_grad=True)


def check_vmap(function: Any, case: Case, surrogate: bool = False, atol: float = _ATOL, rtol: float = _RTOL) -> None:
    """``torch.vmap`` over the Function equals a loop, and so do its gradients under ``torch.vmap``.

    For a ``surrogate`` gradient only the forward is compared.
    """
    samples = [make_args(function, case, seed=SEED + index) for index in range(BATCH_SIZE)]
    first = samples[0]
    in_dims = tuple(0 if isinstance(a, torch.Tensor) else None for a in first)
    batched_args = tuple(
        torch.stack([sample[i].detach() for sample in samples]) if dim == 0 else first[i]
        for i, dim in enumerate(in_dims)
    )
    batched = _outputs_of(torch.vmap(function.apply, in_dims=in_dims)(*batched_args))
    looped = [
        _outputs_of(function.apply(*(a.detach() if isinstance(a, torch.Tensor) else a for a in sample)))
        for sample in samples
    ]
    for index, batched_output in enumerate(batched):
        if isinstance(batched_output, torch.Tensor):
            expected = torch.stack([outputs[index] for outputs in looped])
            torch.testing.assert_close(batched_output, expected)
    if surrogate:
        return
    _check_batched_gradients(function, samples, atol, rtol)


def _check_batched_gradients(function: Any, samples: list[tuple[Any, ...]], atol: float, rtol: float) -> None:
    """backward (``torch.func.vjp``), and ``jvp`` where defined, under ``torch.vmap`` equal a loop over ``samples``.

    This is what ``torch.func.jacrev``, ``jacfwd`` and ``vmap(grad(f))`` run.  Not
    gradcheck's ``check_batched_grad``/``check_batched_forward_grad``: those vmap
    with ``torch._vmap_internals``, a deprecated prototype that never uses a
    Function's ``vmap`` staticmethod or ``generate_vmap_rule``, so that a Function
    converting to numpy (with a right ``vmap`` rule) fails there with "Batching rule
    not implemented" without a bug (found on torch's own ``autograd_function_db``).
    Whether backward and jvp match the derivative is for test_gradcheck and
    test_forward_ad.
    """
    call, _ = _differentiable_call(function, samples[0])
    # Each sample's differentiable inputs; the other arguments are the first sample's, unbatched.
    primals = [tuple(a.detach() for a in _differentiable_call(function, sample)[1]) for sample in samples]
    generator = torch.Generator().manual_seed(SEED)

    def like(tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return tuple(torch.randn(t.shape, generator=generator, dtype=t.dtype).to(t.device) for t in tensors)

    def vjp(inputs: tuple[torch.Tensor, ...], cotangents: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return torch.func.vjp(call, *inputs)[1](cotangents)

    def jvp(inputs: tuple[torch.Tensor, ...], tangents: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return torch.func.jvp(call, inputs, tangents)[1]

    transforms = [("backward (torch.func.vjp)", vjp, [like(call(*p)) for p in primals])]
    if getattr(function, "jvp", None) is not torch.autograd.Function.jvp:
        transforms.append(("jvp (torch.func.jvp)", jvp, [like(p) for p in primals]))
    for what, transform, vectors in transforms:
        stage, failure = f"{what} raises, unbatched", None
        try:
            expected = [transform(p, v) for p, v in zip(primals, vectors)]
            stage = f"{what} raises under torch.vmap"
            batched = torch.vmap(transform)(tuple(torch.stack(parts) for parts in zip(*primals)),
                                            tuple(torch.stack(parts) for parts in zip(*vectors)))
            stage = f"{what} under torch.vmap differs from a loop over the batch at atol={atol:g}, rtol={rtol:g}"
            for index, result in enumerate(batched):
                torch.testing.assert_close(result, torch.stack([e[index] for e in expected]), atol=atol, rtol=rtol)
        except Exception as error:  # noqa: BLE001 - any failure of the transform is the finding
            failure = f"{type(error).__name__}: {error}"
        if failure is not None:
            pytest.fail(
                f"{function.__qualname__}: {stage} ({failure})\n"
                f"inputs (float64, batch of {len(samples)}): {_describe_inputs(samples[0])}; {_where()}\n"
                "The Function declares vmap support (a vmap staticmethod or generate_vmap_rule = True), so "
                "torch.func.jacrev, jacfwd and vmap(grad(...)) run this and get the batched result.",
                pytrace=False,
            )


def _in_backward_pass(call: Callable[[], Any]) -> Any:
    """``call()`` run from inside a pass of autograd's engine, and its result.

    A backward called directly (``grad_fn.apply``) runs outside the engine, where a
    backward that queues an engine callback raises ("Final callbacks can only be
    installed during backward pass": FSDP2's ``RegisterPreBackwardFunction``); in
    a pass, the callbacks run at its end, as in any backward.
    """
    results: list[Any] = []

    class _Run(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, trigger: torch.Tensor) -> torch.Tensor:
            return trigger.clone()

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                results.append(call())
            return grad

    trigger = torch.zeros((), requires_grad=True)
    torch.autograd.grad(_Run.apply(trigger), trigger)
    return results[0]


def check_non_tensor_grads_are_none(function: Any, case: Case) -> None:
    """backward returns ``None`` in the position of every non-tensor input."""
    args = make_args(function, case, compares=False)
    result = _outputs_of(function.apply(*args))
    node = next((out.grad_fn for out in result if isinstance(out, torch.Tensor) and out.grad_fn is not None), None)
    if node is None:
        # No argument that requires grad reaches an output (a recorded tensor subclass is not differentiated).
        pytest.skip(f"{function.__qualname__}: no output has a grad_fn on this case's arguments, so there is no "
                    "backward to call")
    grad_outputs = tuple(
        (torch.ones_like(out) if _is_differentiable_dtype(out.dtype) else torch.zeros_like(out))
        if isinstance(out, torch.Tensor) else None
        for out in result
    )
    # Called directly, to see what backward returns where the engine would only raise.
    grads = _outputs_of(_in_backward_pass(lambda: node.apply(*grad_outputs)))
    assert len(grads) >= len(args), (
        f"backward returned {len(grads)} gradients for {len(args)} inputs"
    )
    wrong = [i for i, a in enumerate(args) if not isinstance(a, torch.Tensor) and grads[i] is not None]
    assert not wrong, f"backward returned a gradient for non-tensor input(s) at position(s) {wrong}"


def check_subclass_gradients(function: Any, case: Case) -> None:
    """On recorded tensor-subclass arguments, backward runs and its gradients are ones autograd accepts.

    gradcheck can't compare a subclass argument's gradient with finite differences
    (see :func:`_is_plain`); what still holds: backward runs on the recorded
    arguments, autograd accepts each gradient it returns (it checks shape, dtype,
    device and layout against the input), and the values of each gradient (a
    plain tensor, or a subclass's inner tensors) are finite where forward's outputs are.
    With no input whose ``requires_grad`` can be read (an ``ExpandedWeight`` beside
    integer indices: its gradient goes to ``orig_weight.grad_sample``), backward is
    run through the outputs alone.
    """
    args = make_args(function, case, compares=False)
    positions = [i for i, a in enumerate(args) if _requires_grad(a)]
    where = f"inputs (float64): {_describe_inputs(args)}; {_where()}"
    grads: Sequence[torch.Tensor | None] = ()
    try:
        outputs = [out for out in _differentiable_outputs(function.apply(*args)) if out.requires_grad]
        if not outputs:
            pytest.skip(f"{function.__qualname__}: no output requires grad on the recorded arguments")
        grad_outputs = [_gradient_like(out) for out in outputs]
        if positions:
            grads = torch.autograd.grad(outputs, [args[i] for i in positions], grad_outputs, allow_unused=True)
        else:
            torch.autograd.backward(outputs, grad_outputs)
    except Exception as error:  # noqa: BLE001 - backward's error, or autograd rejecting its gradient, is the finding
        raise pytest.fail.Exception(
            f"{function.__qualname__}: backward on the recorded tensor-subclass arguments raised "
            f"{type(error).__name__}: {error}{_raised_at(error)}\n{where}", pytrace=False) from error
    finite_outputs = all(bool(torch.isfinite(part).all()) for out in outputs for part in _plain_parts(out))
    for position, grad in zip(positions, grads):
        if finite_outputs and grad is not None and not all(bool(torch.isfinite(p).all()) for p in _plain_parts(grad)):
            pytest.fail(f"{function.__qualname__}: backward returned a non-finite gradient for input #{position} "
                        f"though forward's outputs are finite\n{where}", pytrace=False)


# ---------------------------------------------------------------------------
# Surrogate-gradient Functions: backward is deliberately not the derivative


def load_reference(dotted_name: str) -> Callable[..., Any]:
    """The function ``pkg.module.name`` declared as a surrogate gradient's reference."""
    module_name, _, attribute = dotted_name.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


def _vector_jacobian(apply: Callable[..., Any], args: tuple[Any, ...], positions: list[int],
                     grad_outputs: Sequence[torch.Tensor] | None = None,
                     ) -> tuple[tuple[torch.Tensor | None, ...], tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """The gradients of ``apply(*args)`` at the inputs at ``positions``, the output gradients used
    (seeded, unless given; given ones are converted to each output's dtype and device) and the outputs."""
    outputs = [out for out in _differentiable_outputs(apply(*args)) if out.requires_grad]
    if grad_outputs is None:
        generator = torch.Generator().manual_seed(SEED)
        grad_outputs = tuple(torch.randn(out.shape, generator=generator, dtype=out.dtype).to(out.device)
                             for out in outputs)
    inputs = [args[i] for i in positions]
    converted = [g.to(device=out.device, dtype=out.dtype) for g, out in zip(grad_outputs, outputs)]
    grads = torch.autograd.grad(outputs, inputs, converted, allow_unused=True)
    return tuple(grads), tuple(grad_outputs), tuple(outputs)


def check_surrogate_gradients(function: Any, case: Case) -> None:
    """A surrogate backward returns gradients torch accepts (shape, dtype) and they are finite."""
    args = make_args(function, case, compares=False)
    positions = _grad_positions(function, args)
    try:
        grads, _, _ = _vector_jacobian(function.apply, args, positions)
        rejected = None
    except RuntimeError as error:
        rejected = str(error)
    if rejected is not None:
        pytest.fail(f"{function.__qualname__}: backward returned gradients torch rejects: {rejected}\n"
                    f"inputs: {_describe_inputs(args)}; {_where()}", pytrace=False)
    for position, grad in zip(positions, grads):
        if grad is not None and not bool(torch.isfinite(grad).all()):
            pytest.fail(f"{function.__qualname__}: backward returned a non-finite gradient for input "
                        f"#{position} though forward's outputs are finite\n"
                        f"inputs: {_describe_inputs(args)}; {_where()}", pytrace=False)


def check_surrogate_reference(function: Any, case: Case, reference: Callable[..., Any]) -> None:
    """A surrogate backward equals the autograd gradient of its declared reference function.

    Both are given the same inputs and the same random output gradient (seeded);
    an input whose gradient one side leaves out (``None``) counts as zeros.
    """
    args = make_args(function, case)
    positions = _grad_positions(function, args)
    got, grad_outputs, _ = _vector_jacobian(function.apply, args, positions)
    expected, _, _ = _vector_jacobian(reference, args, positions, grad_outputs)
    for position, actual, wanted in zip(positions, got, expected):
        actual = actual if actual is not None else torch.zeros_like(args[position])
        wanted = wanted if wanted is not None else torch.zeros_like(args[position])
        try:
            torch.testing.assert_close(actual, wanted)
            continue
        except AssertionError as error:
            difference = str(error)
        pytest.fail(
            f"{function.__qualname__}: the surrogate gradient of input #{position} differs from the "
            f"gradient of its declared reference {getattr(reference, '__name__', reference)!s} "
            f"(same inputs, same seeded output gradient)\n"
            f"inputs: {_describe_inputs(args)}; {_where()}\n"
            f"backward gave {actual.flatten()[:4].tolist()}..., the reference {wanted.flatten()[:4].tolist()}...\n"
            f"{difference}\n"
            "Either backward or the declared reference is wrong.",
            pytrace=False,
        )

class _InPrecision:
    """A Function whose ``apply`` gets its floating-point tensor arguments in one dtype, on one device.

    The inputs of a low-precision kernel are resolved (searched, drawn) in float64 on
    the CPU like any other, then converted at the call: the conversion is
    differentiable, so gradients flow back to the float64 inputs.
    """

    def __init__(self, function: Any, dtype: torch.dtype, device: str) -> None:
        self.function, self.dtype, self.device = function, dtype, device

    def apply(self, *args: Any) -> Any:
        return self.function.apply(*_converted(args, self.dtype, self.device))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.function, name)


def _converted(args: tuple[Any, ...], dtype: torch.dtype, device: str) -> tuple[Any, ...]:
    """``args`` with floating-point tensors in ``dtype`` and every tensor on ``device``."""
    return tuple(
        (a.to(device=device, dtype=dtype) if a.is_floating_point() else a.to(device)) if isinstance(a, torch.Tensor)
        else a
        for a in args
    )


def _outputs_and_gradients(apply: Callable[..., Any], args: tuple[Any, ...], positions: list[int],
                           grad_outputs: Sequence[torch.Tensor] | None = None,
                           ) -> tuple[list[torch.Tensor], list[torch.Tensor], tuple[torch.Tensor, ...]]:
    """:func:`_vector_jacobian`'s outputs and gradients (zeros where unused) in float64 on the CPU,
    and the output gradients used."""
    grads, grad_outputs, outputs = _vector_jacobian(apply, args, positions, grad_outputs)
    return ([out.detach().to("cpu", torch.float64) for out in outputs],
            [torch.zeros_like(args[i]) if g is None else g.to("cpu", torch.float64) for i, g in zip(positions, grads)],
            grad_outputs)


def _largest_error(value: torch.Tensor, truth: torch.Tensor) -> float:
    if value.shape != truth.shape:
        return math.inf
    if not bool(torch.isfinite(value).all()):
        return math.inf
    return float((value - truth).abs().max()) if value.numel() else 0.0


def check_low_precision(function: Any, case: Case, reference: Callable[..., Any], dtype: str = "float32",
                        device: str = "cpu", k: float = 3.0) -> None:
    """A kernel that can't run in float64, compared with its reference as kernel libraries test themselves.

    The same inputs (drawn in float64) go to three runs: the reference in float64
    (the truth), the reference in ``dtype`` (the error any implementation in that
    dtype may have) and the Function in ``dtype`` on ``device``.  Each output, and
    each input's gradient under one seeded output gradient, must be within ``k``
    times the reference's own error in ``dtype``, and never below a few units in
    the last place of ``dtype`` (an exact reference would otherwise allow nothing).
    """
    if device.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"{function.__qualname__} is declared a low-precision kernel on {device}: needs a CUDA device")
    low = getattr(torch, dtype)
    kernel = _InPrecision(function, low, device)
    # Recorded inputs may come in the kernel's dtype on its device: the truth needs float64 leaves.
    args = tuple(
        a.detach().to("cpu", torch.float64).requires_grad_(a.requires_grad)
        if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for a in make_args(kernel, case)
    )
    positions = _grad_positions(function, args)
    name = getattr(reference, "__name__", str(reference))
    truth = _outputs_and_gradients(lambda *a: reference(*_converted(a, torch.float64, device)), args, positions)
    grad_outputs = truth[2]
    baseline = _outputs_and_gradients(lambda *a: reference(*_converted(a, low, device)), args, positions,
                                      grad_outputs)
    subject = _outputs_and_gradients(kernel.apply, args, positions, grad_outputs)
    if len(subject[0]) != len(truth[0]):
        pytest.fail(f"{function.__qualname__}: forward returned {len(subject[0])} differentiable output(s), its "
                    f"reference {name} {len(truth[0])}\ninputs: {_describe_inputs(args)}; {_where()}", pytrace=False)
    eps = torch.finfo(low).eps
    labels = [f"output #{i}" for i in range(len(truth[0]))] + [f"the gradient of input #{p}" for p in positions]
    for label, value, wanted, base in zip(labels, [*subject[0], *subject[1]], [*truth[0], *truth[1]],
                                          [*baseline[0], *baseline[1]]):
        error, allowed = _largest_error(value, wanted), _largest_error(base, wanted)
        scale = float(wanted.abs().max()) if wanted.numel() else 0.0
        floor = 4 * eps * max(scale, 1.0)
        bound = k * max(allowed, floor)
        if error <= bound:
            continue
        ratio = error / max(allowed, floor)
        verdict = (f"it is {ratio:.3g} times the reference's own error: a wrong result, not rounding"
                   if ratio > 10 * k else
                   f"it is {ratio:.3g} times the reference's own error (k={k:g}): an accumulation in {dtype} where "
                   f"the reference accumulates in float32, or a formula slightly off; a larger k declared on the "
                   f"class (k={math.ceil(ratio)}) would accept it")
        pytest.fail(
            f"{function.__qualname__}: {label} in {dtype} on {device} differs from its float64 reference {name} by "
            f"{error:.3g}; the reference itself run in {dtype} differs by {allowed:.3g}; allowed: {k:g} times the "
            f"larger of that and 4 units in the last place of the largest value ({bound:.3g})\n"
            f"inputs: {_describe_inputs(args)} (converted to {dtype} on {device}); same seeded output gradient; "
            f"{_where()}\n{verdict}",
            pytrace=False,
        )


def check_compile_parity(function: Any, case: Case) -> None:
    """Outputs and gradients agree between eager and ``torch.compile(backend="aot_eager")``;
    with ``setup_context``, so do ``torch.func.grad`` eager and compiled."""
    from autograd_lint.gentests.op_harness import compile_parity, weighted_sum  # it imports this module

    def call(*args: Any) -> Any:
        return function.apply(*args)

    compile_parity(call, lambda: make_args(function, case))
    if not torch.autograd.function._is_setup_context_defined(function.setup_context):
        return
    args = make_args(function, case)
    position = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad), None)
    if position is None:
        return

    def loss(x: torch.Tensor) -> torch.Tensor:
        full = list(args)
        full[position] = x
        outputs = _differentiable_outputs(function.apply(*full))
        return sum(weighted_sum(o) for o in outputs)

    x = args[position].detach()
    eager = torch.func.grad(loss)(x)
    torch._dynamo.reset()
    compiled = torch.compile(torch.func.grad(loss), backend="aot_eager")(x)
    torch.testing.assert_close(compiled, eager, msg=lambda m: f"torch.func.grad differs under torch.compile: {m}")
