"""A Function as a function of its differentiable inputs, as gradcheck and the other checks call it."""

from __future__ import annotations

from typing import Any, Callable, NoReturn, Sequence

import pytest
import torch

from autograd_lint.gentests.runtime.arguments import SEED
from autograd_lint.gentests.runtime.budget import stop_if_over_budget
from autograd_lint.gentests.runtime.tensors import (
    comparable,
    differentiable_outputs,
    is_differentiable_dtype,
    is_plain,
    is_subclass,
    is_symmetric,
)


# Above this many input elements, gradcheck compares one random projection of the
# Jacobian (fast mode) instead of all of it: recorded shapes can be large, and a
# wrong formula changes a random projection just as surely.
FAST_MODE_THRESHOLD = 64


def nondeterminism_tolerance(call: Callable[..., tuple[torch.Tensor, ...]], inputs: tuple[torch.Tensor, ...]) -> float:
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


def uses_fast_mode(tensors: Sequence[torch.Tensor]) -> bool:
    return sum(t.numel() for t in tensors) > FAST_MODE_THRESHOLD


DifferentiableCall = Callable[..., tuple[torch.Tensor, ...]]


def _symmetric_positions(args: tuple[Any, ...], positions: list[int]) -> list[int]:
    """The inputs that arrive symmetric: their domain is symmetric matrices, checked on symmetric perturbations."""
    return [i for i in positions if is_symmetric(args[i])]


def transposable_positions(args: tuple[Any, ...]) -> list[int]:
    """The floating tensor inputs that a transposed memory layout makes non-contiguous (2-D and up, no size 1)."""
    return [i for i, a in enumerate(args)
            if is_plain(a) and a.layout == torch.strided and is_differentiable_dtype(a.dtype)
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
    candidates = [i for i, a in enumerate(args) if is_plain(a) and not a.requires_grad]
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


def grad_positions(function: Any, args: tuple[Any, ...]) -> list[int]:
    """The positions of the plain tensor inputs that require grad: what the checks differentiate.

    None: skipped when the tensor inputs are all subclasses, else failed (:func:`_no_plain_input`).
    """
    positions = [i for i, a in enumerate(args) if is_plain(a) and a.requires_grad]
    if not positions:
        _no_plain_input(function, args)
    return positions


def differentiable_call(function: Any, args: tuple[Any, ...], transposed: Sequence[int] = (),
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
    allocate their own.  A sparse output is returned dense (see :func:`comparable`).
    """
    positions = grad_positions(function, args)
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
        stop_if_over_budget()
        # The same random numbers at every call: a forward that draws some (a random
        # start vector, a dropout mask) is then a function finite differences can check.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            return tuple(comparable(out) for out in differentiable_outputs(function.apply(*full)))

    return call, tuple(args[i] for i in positions)


def _no_plain_input(function: Any, args: tuple[Any, ...]) -> NoReturn:
    """Skip (the differentiable inputs are all tensor subclasses, see :func:`is_plain`), else fail."""
    subclasses = [f"{type(a).__name__} #{i}" for i, a in enumerate(args) if is_subclass(a)]
    if subclasses:
        pytest.skip(f"{function.__qualname__}: no plain floating-point tensor input to compare with finite "
                    f"differences: the tensor inputs {', '.join(subclasses)} are tensor subclasses, which gradcheck "
                    "can't perturb (test_subclass_gradients checks the gradients backward gives them)")
    pytest.fail(f"{function.__qualname__}: the case has no floating-point tensor input to check")
