"""Run-time evidence that backward is deliberately not the derivative of forward.

Asked only after gradcheck failed (a passing check costs nothing), or after it
passed on Jacobians that are zero on both sides.  Two kinds, each a fact about
the Function at the inputs, not a guess:

* **forward locally constant**: an output does not change at all when every
  input element moves by gradcheck's step (the numerical Jacobian is identically
  zero), while backward returns a non-zero gradient for it: a step function
  (a spike ``(v > threshold).float()``) with a surrogate gradient.  Where only
  some elements of an output do not move (:func:`constant_elements`), the failure
  says so but stands: a straight-through estimator and a clamp whose backward
  forgets its mask look the same;
* **random backward**: two backward passes on the same inputs and output
  gradients differ by more than rounding: the gradient is a sample.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from autograd_lint.gentests.runtime.arguments import SEED

DifferentiableCall = Callable[..., tuple[torch.Tensor, ...]]

# gradcheck's own step, and random sign directions tried: an output unchanged along all of them is constant.
_STEP = 1e-6
_DIRECTIONS = 3
# Two backward passes that differ by more than this, relative to the gradients, draw random numbers
# (atomics reorder sums: ~1e-16 relative in float64).
_RANDOM_RELATIVE = 1e-6


def constant_outputs(call: DifferentiableCall, inputs: Sequence[torch.Tensor]) -> list[int]:
    """The outputs that do not move when the inputs move by gradcheck's step (a zero numerical Jacobian)."""
    return [index for index, still in enumerate(constant_elements(call, inputs)) if bool(still.all())]


def constant_elements(call: DifferentiableCall, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Per output, a mask of the elements that do not move when the inputs move by gradcheck's step.

    Strided inputs are moved in place, as gradcheck moves them: an argument that
    holds the same tensor (a module passed beside its own parameters, as an adjoint
    method's ``func, y0, *params``) must see the step too.  An empty output, or one
    whose shape changes under the step, counts as moving everywhere.
    """
    generator = torch.Generator().manual_seed(SEED)
    originals = [x.detach().clone() for x in inputs]

    def moved(signs: Sequence[torch.Tensor], step: float) -> tuple[torch.Tensor, ...]:
        shifted = []
        for x, original, sign in zip(inputs, originals, signs):
            if x.layout == torch.strided:
                x.copy_(original + step * sign)
                shifted.append(x)
            else:
                shifted.append(original + step * sign)
        return tuple(out.clone() for out in call(*shifted))

    with torch.no_grad():
        base = call(*inputs)
        still = [torch.full(out.shape, out.numel() > 0, dtype=torch.bool, device=out.device) for out in base]
        try:
            for _ in range(_DIRECTIONS):
                signs = [torch.randint(0, 2, x.shape, generator=generator).to(x) * 2 - 1 for x in inputs]
                plus, minus = moved(signs, _STEP), moved(signs, -_STEP)
                for index, (a, b) in enumerate(zip(plus, minus)):
                    if a.shape != b.shape or a.shape != still[index].shape or a.layout != torch.strided:
                        still[index] = torch.zeros_like(still[index])
                    else:
                        still[index] = still[index] & (a == b)
        finally:
            for x, original in zip(inputs, originals):
                if x.layout == torch.strided:
                    x.copy_(original)
    return still


def backward_moves_at(call: DifferentiableCall, inputs: Sequence[torch.Tensor], masks: Sequence[torch.Tensor]) -> bool:
    """Whether backward returns a non-zero gradient for output gradients that are one on ``masks`` only."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        outputs = call(*inputs)
        weights = [mask.to(out.dtype) if bool(mask.any()) else None for out, mask in zip(outputs, masks)]
        return any(bool((g != 0).any()) for g in _gradients(call, inputs, weights))


def _gradients(call: DifferentiableCall, inputs: Sequence[torch.Tensor],
               weights: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
    outputs = call(*inputs)
    pairs = [(out, w) for out, w in zip(outputs, weights) if w is not None and out.requires_grad]
    if not pairs:
        return []
    grads = torch.autograd.grad([out for out, _ in pairs], list(inputs), [w for _, w in pairs], allow_unused=True)
    return [g.detach() for g in grads if g is not None]


def backward_moves(call: DifferentiableCall, inputs: Sequence[torch.Tensor], output: int | None = None) -> bool:
    """Whether backward returns a non-zero gradient (for ``output`` alone, or for all outputs)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        outputs = call(*inputs)
        weights = [torch.ones_like(out) if output in (None, index) else None for index, out in enumerate(outputs)]
        return any(bool((g != 0).any()) for g in _gradients(call, inputs, weights))


def random_backward(call: DifferentiableCall, inputs: Sequence[torch.Tensor]) -> float | None:
    """The largest relative difference between two backward passes on the same inputs, when it is not rounding."""
    generator = torch.Generator().manual_seed(SEED)
    weights = [torch.randn(out.shape, generator=generator, dtype=out.dtype).to(out.device) for out in call(*inputs)]
    # No seeding between the passes: a backward that samples draws different numbers each time.
    first, second = _gradients(call, inputs, weights), _gradients(call, inputs, weights)
    worst = 0.0
    for a, b in zip(first, second):
        if a.shape != b.shape or a.layout != torch.strided or not a.numel():
            continue
        scale = float(a.abs().max().nan_to_num(0.0)) + 1e-30
        worst = max(worst, float((a - b).abs().nan_to_num(0.0).max()) / scale)
    return worst if worst > _RANDOM_RELATIVE else None


def zero_on_both_sides(call: DifferentiableCall, inputs: Sequence[torch.Tensor]) -> bool:
    """Whether backward's gradients are all zero and forward is locally constant: a comparison of nothing."""
    outputs = call(*inputs)
    return not backward_moves(call, inputs) and len(constant_outputs(call, inputs)) == len(outputs)
