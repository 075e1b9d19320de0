"""Hand check of the gen-tests failures on entmax 1.3: are the second derivatives really wrong?

Usage: ``/work/venvs/gentests-real/bin/python bench/gentests_verify_entmax.py`` (entmax installed).

For each Function whose generated ``test_gradgradcheck`` failed, compares the
Hessian-vector product that autograd computes through its backward with central
finite differences of its (correct, gradcheck-passing) first derivative, on an
input like the recorded ones (random 4x10, some outputs exactly zero).
"""

from __future__ import annotations

from typing import Callable

import torch
from entmax import losses
from entmax.activations import Entmax15Function
from entmax.root_finding import EntmaxBisectFunction, NormmaxBisectFunction

EPS = 1e-6


def check(name: str, scalar: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> None:
    direction = torch.randn_like(x)

    def first(point: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
        point = point if create_graph else point.detach().requires_grad_()
        return torch.autograd.grad(scalar(point), point, create_graph=create_graph)[0]

    gradient = first(x, create_graph=True)
    if gradient.requires_grad:
        autograd_hvp = torch.autograd.grad((gradient * direction).sum(), x)[0]
    else:  # backward built no graph from x: autograd's Hessian is zero (what hessian() returns)
        autograd_hvp = torch.zeros_like(x)
    numerical = (first(x + EPS * direction) - first(x - EPS * direction)) / (2 * EPS)
    difference = (autograd_hvp - numerical).abs().max()
    print(f"{name}: autograd HVP has NaN: {bool(autograd_hvp.isnan().any())}; "
          f"max |autograd - finite differences| = {float(difference):.3g} "
          f"(finite differences up to {float(numerical.abs().max()):.3g})")


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 10, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(4, 10, dtype=torch.float64)
    target = torch.randint(0, 10, (4,))
    check("Entmax15Function", lambda p: (Entmax15Function.apply(p, -1, None) * weights).sum(), x)
    check("EntmaxBisectFunction(alpha=1.5)",
          lambda p: (EntmaxBisectFunction.apply(p, 1.5, -1, 50, True) * weights).sum(), x)
    check("NormmaxBisectFunction(alpha=1.2)",
          lambda p: (NormmaxBisectFunction.apply(p, torch.tensor(1.2, dtype=torch.float64), -1, 50) * weights).sum(), x)
    check("NormmaxBisectFunction(alpha=2)", lambda p: (NormmaxBisectFunction.apply(p, 2.0, -1, 50) * weights).sum(), x)
    for name in ("sparsemax_loss", "sparsemax_bisect_loss", "entmax15_loss", "entmax_bisect_loss",
                 "normmax_bisect_loss"):
        loss = getattr(losses, name)
        check(name, lambda p, loss=loss: loss(p, target).sum(), x)


if __name__ == "__main__":
    main()
