"""Run-time support of the generated custom-op tests: opcheck, gradcheck through the op, compile parity.

Imported by the test modules ``autograd-lint gen-tests`` writes for custom ops
(``test_opcheck_<module>.py``); it shares the argument making and the compile
parity of :mod:`autograd_lint.gentests.runtime`, and like it is the only place that imports torch for them.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch

from autograd_lint.gentests.inputs import ScalarInput, TensorInput
from autograd_lint.gentests.render import RECORD_HINT
from autograd_lint.gentests.runtime.arguments import (
    DOMAINS,
    SCALAR_CANDIDATES,
    SEED,
    build_args,
    search_candidates,
    search_shape_plans,
)
from autograd_lint.gentests.runtime.cases import Case
from autograd_lint.gentests.runtime.parity import compile_parity
from autograd_lint.gentests.runtime.tensors import differentiable_outputs

# opcheck's utilities that need a fake kernel; an op without one is checked by the others.
NEEDS_FAKE = ("test_faketensor", "test_aot_dispatch_dynamic")
WITHOUT_FAKE = ("test_schema", "test_autograd_registration")


@dataclass(frozen=True)
class _Choice:
    shapes: tuple[tuple[int, ...], ...]
    scalars: tuple[float, ...]
    domain: Any


_chosen: dict[tuple[Any, str], _Choice | None] = {}
# (op, repr(case)) -> the one error every candidate raised, when they all raised the same.
_shape_independent_errors: dict[tuple[Any, str], str] = {}


def _runs(op: Any, args: tuple[Any, ...], backward: bool, errors: list[str] | None = None) -> bool:
    """Whether the op (and with ``backward``, its backward) runs on ``args``; errors are appended to ``errors``."""
    try:
        if not backward:
            with torch.no_grad():
                result = op(*args)
            return all(bool(torch.isfinite(t).all()) for t in differentiable_outputs(result))
        inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        outputs = [o for o in differentiable_outputs(op(*args)) if o.requires_grad]
        if outputs and inputs:
            torch.autograd.grad(outputs, inputs, [torch.ones_like(o) for o in outputs], allow_unused=True)
        return True
    except Exception as error:  # noqa: BLE001 - any error means "not this candidate"
        if errors is not None:
            errors.append(f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        return False


def _choose(op: Any, case: Case) -> _Choice | None:
    """The first shapes, scalars and domain both the op and its backward accept, else the op alone."""
    key = (op, repr(case))
    if key in _chosen:
        return _chosen[key]
    searched = sum(1 for a in case.args if isinstance(a, TensorInput) and a.shape is None)
    plans = search_shape_plans(searched) if searched else [()]
    scalar_count = sum(1 for a in case.args if isinstance(a, ScalarInput))
    forward_only = None
    found = None
    errors: list[str] = []
    for plan, scalars, domain in search_candidates(plans, itertools.product(SCALAR_CANDIDATES, repeat=scalar_count)):
        if not _runs(op, build_args(case.args, iter(plan), iter(scalars), domain, SEED), backward=False, errors=errors):
            continue
        choice = _Choice(plan, scalars, domain)
        if _runs(op, build_args(case.args, iter(plan), iter(scalars), domain, SEED), backward=True):
            found = choice
            break
        forward_only = forward_only or choice
    _chosen[key] = found or forward_only
    if _chosen[key] is None and len(errors) > 1 and len(set(errors)) == 1:
        _shape_independent_errors[key] = errors[0]
    return _chosen[key]


# torch's words when an op has no kernel for the inputs' device ("... with arguments from the 'CPU' backend").
_NO_KERNEL = re.compile(r"Could not run '[^']+' with arguments from the '(\w+)' backend")
# An op's own refusal of float64, naming the dtypes it takes ("spike must have dtype float32, float16, or bfloat16").
_NOT_FLOAT64 = re.compile(r"dtype.*\b(?:float32|float16|bfloat16|half)\b", re.IGNORECASE)


def _refusal_of_this_run(error: str) -> str | None:
    """Why the one error every candidate raised is a limit of this run, not a bug of the op, or None.

    spikingjelly's Triton ops register kernels for CUDA only, and one takes only
    float32/16 spikes: on a CPU machine in float64 every candidate raises, whatever the shapes.
    """
    kernel = _NO_KERNEL.search(error)
    if kernel is not None:
        return (f"the op has no kernel for the {kernel.group(1)} backend (it is registered for other devices); "
                "run these tests where its device is")
    if "float64" not in error and "double" not in error.lower() and _NOT_FLOAT64.search(error):
        return "the op refuses the float64 inputs the checks use (gradcheck needs float64)"
    return None


def op_args(op: Any, case: Case, seed: int = SEED) -> tuple[Any, ...]:
    """Fresh concrete arguments for ``case``; with nothing searched, the op's own error fails the test."""
    choice = _choose(op, case)
    if choice is None and (op, repr(case)) in _shape_independent_errors:
        error = _shape_independent_errors[(op, repr(case))]
        refusal = _refusal_of_this_run(error)
        if refusal is not None:
            pytest.skip(f"{op} raised on every candidate input: {error}: {refusal}")
        # The same error for every shape and value tried: the op itself is broken.
        pytest.fail(f"{op} raised on every candidate input: {error}", pytrace=False)
    if choice is None:
        searched = any(isinstance(a, ScalarInput) or (isinstance(a, TensorInput) and a.shape is None)
                       for a in case.args)
        if searched:
            pytest.skip(f"{op} accepted none of the candidate shapes and values; {RECORD_HINT}")
        return build_args(case.args, iter(()), iter(()), DOMAINS[0], seed)
    return build_args(case.args, iter(choice.shapes), iter(choice.scalars), choice.domain, seed)


def check_opcheck(op: Any, case: Case, has_fake: bool = True) -> None:
    """``torch.library.opcheck``: schema (mutations declared), autograd registration, and with a
    fake kernel, FakeTensor agreement and AOT dispatch."""
    utils = WITHOUT_FAKE + (NEEDS_FAKE if has_fake else ())
    torch.library.opcheck(op, op_args(op, case), test_utils=utils)


def _as_function_of_inputs(op: Any, args: tuple[Any, ...]) -> tuple[Callable[..., Any], tuple[torch.Tensor, ...]]:
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]

    def call(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        full = list(args)
        for position, value in zip(positions, inputs):
            full[position] = value
        return differentiable_outputs(op(*full))

    inputs = tuple(args[i] for i in positions)
    if not inputs:
        pytest.fail(f"{op}: the case has no floating-point tensor input to check")
    return call, inputs


def check_op_gradcheck(op: Any, case: Case) -> None:
    """The registered backward agrees with finite differences."""
    call, inputs = _as_function_of_inputs(op, op_args(op, case))
    torch.autograd.gradcheck(call, inputs, check_undefined_grad=False)


def check_op_compile_parity(op: Any, case: Case) -> None:
    """The op gives the same outputs, mutations and gradients eager and compiled."""

    def call(*args: Any) -> Any:
        return op(*args)

    compile_parity(call, lambda: op_args(op, case))
