"""Checks of backward's contract that need no finite differences: which gradients are None,
gradients autograd accepts for recorded tensor-subclass arguments, and the whole gradient contract
that a surrogate or sampled gradient must still keep."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest
import torch

from autograd_lint.gentests.runtime.arguments import SEED
from autograd_lint.gentests.runtime.budget import stop_if_over_budget
from autograd_lint.gentests.runtime.cases import Case
from autograd_lint.gentests.runtime.report import describe_inputs, raised_at, reported, where_to_reproduce
from autograd_lint.gentests.runtime.search import make_args
from autograd_lint.gentests.runtime.tensors import (
    all_finite,
    differentiable_outputs,
    gradient_like,
    is_differentiable_dtype,
    is_plain,
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


@reported
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
        (gradient_like(out) if is_differentiable_dtype(out.dtype) else torch.zeros_like(out))
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


@reported
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
    finite_outputs = all(all_finite(part) for out in outputs for part in plain_parts(out))
    for position, grad in zip(positions, grads):
        if finite_outputs and grad is not None and not all(all_finite(p) for p in plain_parts(grad)):
            pytest.fail(f"{function.__qualname__}: backward returned a non-finite gradient for input #{position} "
                        f"though forward's outputs are finite\n{where}", pytrace=False)


def _backward_directly(function: Any, case: Case, seed: int) -> tuple[tuple[Any, ...], list[torch.Tensor],
                                                                      tuple[Any, ...], tuple[Any, ...]]:
    """Fresh arguments, forward's tensor outputs, the (seeded) output gradients given, and what backward returned.

    backward is called directly (inside an engine pass), so that what it returns is
    seen as it is, before the engine checks or converts anything.
    """
    args = make_args(function, case, seed=seed, compares=False)
    stop_if_over_budget()
    with torch.random.fork_rng(devices=[]):
        # A forward that draws (a Bernoulli spike, a dropout mask) draws the same on every call:
        # backward's determinism is then a question about backward alone.
        torch.manual_seed(seed)
        result = outputs_of(function.apply(*args))
    node = next((out.grad_fn for out in result if isinstance(out, torch.Tensor) and out.grad_fn is not None), None)
    if node is None:
        pytest.skip(f"{function.__qualname__}: no output has a grad_fn on this case's arguments, so there is no "
                    "backward to call")
    generator = torch.Generator().manual_seed(SEED)
    grad_outputs = tuple(
        (torch.randn(out.shape, generator=generator, dtype=out.dtype).to(out.device) if is_plain(out)
         else gradient_like(out)) if isinstance(out, torch.Tensor) and is_differentiable_dtype(out.dtype)
        else torch.zeros_like(out) if isinstance(out, torch.Tensor) else None
        for out in result
    )
    grads = outputs_of(_in_backward_pass(lambda: node.apply(*grad_outputs)))
    return args, [out for out in result if isinstance(out, torch.Tensor)], grad_outputs, grads


def gradient_contract(function: Any, case: Case, sampled: bool = False, seed: int = SEED) -> None:
    """What backward must satisfy whatever its formula (a surrogate's, a sample's); fails on the first breach.

    One gradient (or None) per input of forward; ``None`` for every non-tensor
    input; for a tensor input, a gradient autograd accepts (its shape, or one that
    sums to it, on the input's device: autograd converts a dtype silently, so a
    dtype is not held against it); finite values where forward's outputs are
    finite; the output gradients left unchanged (backward must not write them in
    place: autograd may hand the same tensor to other nodes); and unless the
    gradient is ``sampled``, the same gradients for the same inputs and output gradients.
    """
    name = function.__qualname__
    args, outputs, grad_outputs, grads = _backward_directly(function, case, seed)
    where = f"inputs (float64): {describe_inputs(args)}; {where_to_reproduce(seed)}"
    if len(grads) < len(args) or any(g is not None for g in grads[len(args):]):
        pytest.fail(f"{name}: backward returned {len(grads)} gradients for the {len(args)} inputs of forward "
                    f"(one, or None, per input is required); no input fixes this\n{where}", pytrace=False)
    for position, (arg, grad) in enumerate(zip(args, grads)):
        if grad is None:
            continue
        if not isinstance(arg, torch.Tensor):
            pytest.fail(f"{name}: backward returned a gradient for the non-tensor input #{position} (None is "
                        f"required there)\n{where}", pytrace=False)
        if not isinstance(grad, torch.Tensor) or not is_plain(arg):
            continue
        try:
            fits = torch.broadcast_shapes(arg.shape, grad.shape) == grad.shape
        except RuntimeError:
            fits = False
        if not fits:
            pytest.fail(f"{name}: backward returned a gradient of shape {tuple(grad.shape)} for input #{position} "
                        f"of shape {tuple(arg.shape)}; no input fixes this\n{where}", pytrace=False)
        if grad.device != arg.device:
            pytest.fail(f"{name}: backward returned a gradient on {grad.device} for input #{position} on "
                        f"{arg.device}\n{where}", pytrace=False)
    finite = all(all_finite(part) for out in outputs if is_differentiable_dtype(out.dtype)
                 for part in plain_parts(out))
    for position, grad in enumerate(grads[:len(args)]):
        if finite and isinstance(grad, torch.Tensor) and is_differentiable_dtype(grad.dtype) and not all(
                all_finite(part) for part in plain_parts(grad)):
            pytest.fail(f"{name}: backward returned a non-finite gradient for input #{position} though forward's "
                        f"outputs are finite\n{where}", pytrace=False)
    generator = torch.Generator().manual_seed(SEED)
    for index, given in enumerate(grad_outputs):
        if isinstance(given, torch.Tensor) and is_plain(given) and is_differentiable_dtype(given.dtype):
            expected = torch.randn(given.shape, generator=generator, dtype=given.dtype).to(given.device)
            if not torch.equal(given, expected):
                pytest.fail(f"{name}: backward wrote into the gradient of output #{index} (grad_output) in place; "
                            "autograd may hand the same tensor to other nodes, whose gradients then change\n"
                            f"{where}", pytrace=False)
    if sampled:
        return
    again = _backward_directly(function, case, seed)[3]
    for position, (first, second) in enumerate(zip(grads[:len(args)], again)):
        if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and is_plain(first) \
                and first.layout == torch.strided and first.shape == second.shape:
            difference = float((first - second).abs().nan_to_num(0.0).max()) if first.numel() else 0.0
            if difference > 1e-9 * (1.0 + float(first.abs().nan_to_num(0.0).max() if first.numel() else 0.0)):
                pytest.fail(f"{name}: backward gave different gradients for input #{position} on identical inputs "
                            f"and output gradients (by {difference:.3g}): it draws random numbers or reads state "
                            "that changes. If its gradient is a sample by design, declare it on the class: "
                            f"# autograd-lint: surrogate-gradient sampled\n{where}", pytrace=False)
