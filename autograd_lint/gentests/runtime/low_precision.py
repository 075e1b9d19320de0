"""Kernels that can't run in float64, compared with a reference as kernel libraries test themselves."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import pytest
import torch

from autograd_lint.gentests.runtime.calls import grad_positions
from autograd_lint.gentests.runtime.cases import Case
from autograd_lint.gentests.runtime.report import describe_inputs, reported, where_to_reproduce
from autograd_lint.gentests.runtime.search import make_args
from autograd_lint.gentests.runtime.surrogate import vector_jacobian


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
    """:func:`vector_jacobian`'s outputs and gradients (zeros where unused) in float64 on the CPU,
    and the output gradients used."""
    grads, grad_outputs, outputs = vector_jacobian(apply, args, positions, grad_outputs)
    return ([out.detach().to("cpu", torch.float64) for out in outputs],
            [torch.zeros_like(args[i]) if g is None else g.to("cpu", torch.float64) for i, g in zip(positions, grads)],
            grad_outputs)


def _largest_error(value: torch.Tensor, truth: torch.Tensor) -> float:
    if value.shape != truth.shape:
        return math.inf
    if not bool(torch.isfinite(value).all()):
        return math.inf
    return float((value - truth).abs().max()) if value.numel() else 0.0


@reported
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
    positions = grad_positions(function, args)
    name = getattr(reference, "__name__", str(reference))
    truth = _outputs_and_gradients(lambda *a: reference(*_converted(a, torch.float64, device)), args, positions)
    grad_outputs = truth[2]
    baseline = _outputs_and_gradients(lambda *a: reference(*_converted(a, low, device)), args, positions,
                                      grad_outputs)
    subject = _outputs_and_gradients(kernel.apply, args, positions, grad_outputs)
    if len(subject[0]) != len(truth[0]):
        pytest.fail(f"{function.__qualname__}: forward returned {len(subject[0])} differentiable output(s), its "
                    f"reference {name} {len(truth[0])}\ninputs: {describe_inputs(args)}; {where_to_reproduce()}",
                    pytrace=False)
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
            f"inputs: {describe_inputs(args)} (converted to {dtype} on {device}); same seeded output gradient; "
            f"{where_to_reproduce()}\n{verdict}",
            pytrace=False,
        )
