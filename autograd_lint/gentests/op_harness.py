"""Run-time support of the generated custom-op tests: opcheck, gradcheck through the op, compile parity.

Imported by the test modules ``autograd-lint gen-tests`` writes for custom ops
(``test_opcheck_<module>.py``); like :mod:`.harness`, whose argument making it
shares, it is the only place that imports torch for them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pytest
import torch

from autograd_lint.gentests.harness import (
    DOMAINS,
    SCALAR_CANDIDATES,
    SEED,
    Case,
    ScalarArg,
    TensorArg,
    _build,
    _differentiable_outputs,
    _outputs_of,
    _search_shape_plans,
    search_candidates,
)
from autograd_lint.gentests.render import RECORD_HINT

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
            return all(bool(torch.isfinite(t).all()) for t in _differentiable_outputs(result))
        inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        outputs = [o for o in _differentiable_outputs(op(*args)) if o.requires_grad]
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
    searched = sum(1 for a in case.args if isinstance(a, TensorArg) and a.shape is None)
    plans = _search_shape_plans(searched) if searched else [()]
    scalar_count = sum(1 for a in case.args if isinstance(a, ScalarArg))
    forward_only = None
    found = None
    errors: list[str] = []
    for plan, scalars, domain in search_candidates(plans, itertools.product(SCALAR_CANDIDATES, repeat=scalar_count)):
        if not _runs(op, _build(case.args, iter(plan), iter(scalars), domain, SEED), backward=False, errors=errors):
            continue
        choice = _Choice(plan, scalars, domain)
        if _runs(op, _build(case.args, iter(plan), iter(scalars), domain, SEED), backward=True):
            found = choice
            break
        forward_only = forward_only or choice
    _chosen[key] = found or forward_only
    if _chosen[key] is None and len(errors) > 1 and len(set(errors)) == 1:
        _shape_independent_errors[key] = errors[0]
    return _chosen[key]


def op_args(op: Any, case: Case, seed: int = SEED) -> tuple[Any, ...]:
    """Fresh concrete arguments for ``case``; with nothing searched, the op's own error fails the test."""
    choice = _choose(op, case)
    if choice is None and (op, repr(case)) in _shape_independent_errors:
        # The same error for every shape and value tried: the op itself is broken.
        pytest.fail(f"{op} raised on every candidate input: {_shape_independent_errors[(op, repr(case))]}",
                    pytrace=False)
    if choice is None:
        searched = any(isinstance(a, ScalarArg) or (isinstance(a, TensorArg) and a.shape is None) for a in case.args)
        if searched:
            pytest.skip(f"{op} accepted none of the candidate shapes and values; {RECORD_HINT}")
        return _build(case.args, iter(()), iter(()), DOMAINS[0], seed)
    return _build(case.args, iter(choice.shapes), iter(choice.scalars), choice.domain, seed)


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
        return _differentiable_outputs(op(*full))

    inputs = tuple(args[i] for i in positions)
    if not inputs:
        pytest.fail(f"{op}: the case has no floating-point tensor input to check")
    return call, inputs


def check_op_gradcheck(op: Any, case: Case) -> None:
    """The registered backward agrees with finite differences."""
    call, inputs = _as_function_of_inputs(op, op_args(op, case))
    torch.autograd.gradcheck(call, inputs, check_undefined_grad=False)


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]


def weighted_sum(output: torch.Tensor) -> torch.Tensor:
    """A scalar of ``output`` whose gradient differs per element (a transposed gradient shows)."""
    return (output * torch.linspace(0.5, 1.5, output.numel(), dtype=output.dtype).reshape(output.shape)).sum()


def _run(call: Callable[..., Any], args: tuple[Any, ...]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[Any]]:
    """Outputs, the tensor arguments after the call (mutations show there), and input gradients:
    of all outputs, then (with several) of the first alone, the others getting no gradient."""
    outputs = _outputs_of(call(*args))
    differentiable = [o for o in _differentiable_outputs(outputs) if o.requires_grad]
    inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads: list[Any] = []
    if differentiable and inputs:
        grads = list(torch.autograd.grad(sum(weighted_sum(o) for o in differentiable), inputs, allow_unused=True,
                                         retain_graph=True))
        if len(differentiable) > 1:
            grads += list(torch.autograd.grad(weighted_sum(differentiable[0]), inputs, allow_unused=True))
    return _tensors(outputs), [a.detach() for a in _tensors(args)], grads


def _assert_same(what: str, eager: Sequence[Any], compiled: Sequence[Any]) -> None:
    assert len(eager) == len(compiled), f"{what}: eager gave {len(eager)}, compiled {len(compiled)}"
    for index, (e, c) in enumerate(zip(eager, compiled)):
        if e is None or c is None:
            assert e is None and c is None, f"{what} {index}: eager {e!r}, compiled {c!r}"
            continue
        torch.testing.assert_close(c.detach(), e.detach(), msg=lambda m: f"{what} {index} differs under "
                                   f"torch.compile(backend='aot_eager'): {m}")


def compile_parity(call: Callable[..., Any], make_args: Callable[[], tuple[Any, ...]]) -> None:
    """Outputs, mutated arguments and gradients of ``call`` agree between eager and
    ``torch.compile(backend="aot_eager")``, on identical fresh arguments."""
    torch._dynamo.reset()  # a shared code object must not hit the recompile limit and fall back to eager
    eager = _run(call, make_args())
    compiled = _run(torch.compile(call, backend="aot_eager"), make_args())
    _assert_same("output", eager[0], compiled[0])
    _assert_same("argument after the call", eager[1], compiled[1])
    _assert_same("gradient of input", eager[2], compiled[2])


def check_op_compile_parity(op: Any, case: Case) -> None:
    """The op gives the same outputs, mutations and gradients eager and compiled."""

    def call(*args: Any) -> Any:
        return op(*args)

    compile_parity(call, lambda: op_args(op, case))
