"""Surrogate-gradient Functions: backward is deliberately not the derivative of forward."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Sequence

import pytest
import torch

from autograd_lint.gentests.runtime.arguments import SEED
from autograd_lint.gentests.runtime.calls import grad_positions
from autograd_lint.gentests.runtime.cases import Case
from autograd_lint.gentests.runtime.contract import gradient_contract
from autograd_lint.gentests.runtime.report import describe_inputs, reported, where_to_reproduce
from autograd_lint.gentests.runtime.search import make_args
from autograd_lint.gentests.runtime.tensors import differentiable_outputs


def load_reference(dotted_name: str) -> Callable[..., Any]:
    """The function ``pkg.module.name`` declared as a surrogate gradient's reference."""
    module_name, _, attribute = dotted_name.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


def vector_jacobian(apply: Callable[..., Any], args: tuple[Any, ...], positions: list[int],
                    grad_outputs: Sequence[torch.Tensor] | None = None,
                    ) -> tuple[tuple[torch.Tensor | None, ...], tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """The gradients of ``apply(*args)`` at the inputs at ``positions``, the output gradients used
    (seeded, unless given; given ones are converted to each output's dtype and device) and the outputs."""
    outputs = [out for out in differentiable_outputs(apply(*args)) if out.requires_grad]
    if grad_outputs is None:
        generator = torch.Generator().manual_seed(SEED)
        grad_outputs = tuple(torch.randn(out.shape, generator=generator, dtype=out.dtype).to(out.device)
                             for out in outputs)
    inputs = [args[i] for i in positions]
    converted = [g.to(device=out.device, dtype=out.dtype) for g, out in zip(grad_outputs, outputs)]
    grads = torch.autograd.grad(outputs, inputs, converted, allow_unused=True)
    return tuple(grads), tuple(grad_outputs), tuple(outputs)


@reported
def check_surrogate_gradients(function: Any, case: Case, sampled: bool = False) -> None:
    """A surrogate backward keeps the gradient contract (:func:`.contract.gradient_contract`: count,
    shapes, devices, None for non-tensors, finite, grad_output unchanged, deterministic unless
    ``sampled``), and autograd accepts its gradients."""
    gradient_contract(function, case, sampled=sampled)
    args = make_args(function, case, compares=False)
    positions = grad_positions(function, args)
    try:
        vector_jacobian(function.apply, args, positions)
    except RuntimeError as error:
        pytest.fail(f"{function.__qualname__}: backward returned gradients torch rejects: {error}\n"
                    f"inputs: {describe_inputs(args)}; {where_to_reproduce()}", pytrace=False)


@reported
def check_surrogate_reference(function: Any, case: Case, reference: Callable[..., Any]) -> None:
    """A surrogate backward equals the autograd gradient of its declared reference function.

    Both are given the same inputs and the same random output gradient (seeded);
    an input whose gradient one side leaves out (``None``) counts as zeros.
    """
    args = make_args(function, case)
    positions = grad_positions(function, args)
    got, grad_outputs, _ = vector_jacobian(function.apply, args, positions)
    expected, _, _ = vector_jacobian(reference, args, positions, grad_outputs)
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
            f"inputs: {describe_inputs(args)}; {where_to_reproduce()}\n"
            f"backward gave {actual.flatten()[:4].tolist()}..., the reference {wanted.flatten()[:4].tolist()}...\n"
            f"{difference}\n"
            "Either backward or the declared reference is wrong.",
            pytrace=False,
        )
