"""Checks of backward's contract that need no finite differences: which gradients are None,
gradients autograd accepts for recorded tensor-subclass arguments."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest
import torch

from autograd_lint.gentests.runtime.cases import Case
from autograd_lint.gentests.runtime.report import describe_inputs, raised_at, where_to_reproduce
from autograd_lint.gentests.runtime.search import make_args
from autograd_lint.gentests.runtime.tensors import (
    differentiable_outputs,
    gradient_like,
    is_differentiable_dtype,
    outputs_of,
    plain_parts,
    tensor_requires_grad,
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
    result = outputs_of(function.apply(*args))
    node = next((out.grad_fn for out in result if isinstance(out, torch.Tensor) and out.grad_fn is not None), None)
    if node is None:
        # No argument that requires grad reaches an output (a recorded tensor subclass is not differentiated).
        pytest.skip(f"{function.__qualname__}: no output has a grad_fn on this case's arguments, so there is no "
                    "backward to call")
    grad_outputs = tuple(
        (torch.ones_like(out) if is_differentiable_dtype(out.dtype) else torch.zeros_like(out))
        if isinstance(out, torch.Tensor) else None
        for out in result
    )
    # Called directly, to see what backward returns where the engine would only raise.
    grads = outputs_of(_in_backward_pass(lambda: node.apply(*grad_outputs)))
    assert len(grads) >= len(args), (
        f"backward returned {len(grads)} gradients for {len(args)} inputs"
    )
    wrong = [i for i, a in enumerate(args) if not isinstance(a, torch.Tensor) and grads[i] is not None]
    assert not wrong, f"backward returned a gradient for non-tensor input(s) at position(s) {wrong}"


def check_subclass_gradients(function: Any, case: Case) -> None:
    """On recorded tensor-subclass arguments, backward runs and its gradients are ones autograd accepts.

    gradcheck can't compare a subclass argument's gradient with finite differences
    (see :func:`is_plain`); what still holds: backward runs on the recorded
    arguments, autograd accepts each gradient it returns (it checks shape, dtype,
    device and layout against the input), and the values of each gradient (a
    plain tensor, or a subclass's inner tensors) are finite where forward's outputs are.
    With no input whose ``requires_grad`` can be read (an ``ExpandedWeight`` beside
    integer indices: its gradient goes to ``orig_weight.grad_sample``), backward is
    run through the outputs alone.
    """
    args = make_args(function, case, compares=False)
    positions = [i for i, a in enumerate(args) if tensor_requires_grad(a)]
    where = f"inputs (float64): {describe_inputs(args)}; {where_to_reproduce()}"
    grads: Sequence[torch.Tensor | None] = ()
    try:
        outputs = [out for out in differentiable_outputs(function.apply(*args)) if out.requires_grad]
        if not outputs:
            pytest.skip(f"{function.__qualname__}: no output requires grad on the recorded arguments")
        grad_outputs = [gradient_like(out) for out in outputs]
        if positions:
            grads = torch.autograd.grad(outputs, [args[i] for i in positions], grad_outputs, allow_unused=True)
        else:
            torch.autograd.backward(outputs, grad_outputs)
    except Exception as error:  # noqa: BLE001 - backward's error, or autograd rejecting its gradient, is the finding
        raise pytest.fail.Exception(
            f"{function.__qualname__}: backward on the recorded tensor-subclass arguments raised "
            f"{type(error).__name__}: {error}{raised_at(error)}\n{where}", pytrace=False) from error
    finite_outputs = all(bool(torch.isfinite(part).all()) for out in outputs for part in plain_parts(out))
    for position, grad in zip(positions, grads):
        if finite_outputs and grad is not None and not all(bool(torch.isfinite(p).all()) for p in plain_parts(grad)):
            pytest.fail(f"{function.__qualname__}: backward returned a non-finite gradient for input #{position} "
                        f"though forward's outputs are finite\n{where}", pytrace=False)
