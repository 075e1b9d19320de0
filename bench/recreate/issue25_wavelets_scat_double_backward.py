"""pytorch-wavelets 1.3.0: double backward through the first-order scattering layer raises
(found by gen-tests' gradgradcheck, issue 25).

Run with a venv that has pytorch-wavelets 1.3.0 and torch 2.13.0:
    python bench/recreate/issue25_wavelets_scat_double_backward.py
``ScatLayerj1_f.backward`` (and ``ScatLayerj1_rot_f``'s) is not ``@once_differentiable``,
so ``create_graph=True`` differentiates through it; it calls ``inv_j1`` and so ``c2q``,
which makes ``y = w1r.new_zeros(..., requires_grad=w1r.requires_grad)``, a leaf that
requires grad whenever the incoming gradient does, then writes into slices of it.
A gradient penalty through the public ``ScatLayer`` (the gradient of a loss that is not
linear in the output, taken with ``create_graph=True``) therefore raises
``RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place
operation`` instead of returning a second derivative.  ``FWD_J2PLUS`` (the second and later
levels of ``DTCWTForward``) goes through ``c2q`` in its backward too.  On torch 2.13.0 (CPU)
this prints that error for both; a first-order backward works.
"""
import torch
from pytorch_wavelets import DTCWTForward, ScatLayer

torch.manual_seed(0)
layer = ScatLayer().double()
x = torch.randn(1, 3, 16, 16, dtype=torch.float64, requires_grad=True)
(first,) = torch.autograd.grad(layer(x).sum(), x)
print("first-order backward: works, gradient norm", float(first.norm()))
try:
    (grad,) = torch.autograd.grad(layer(x).pow(2).sum(), x, create_graph=True)
    grad.pow(2).sum().backward()
    print("double backward: works")
except RuntimeError as error:
    print("double backward: RuntimeError:", error)

transform = DTCWTForward(J=2).double()
try:
    low, highs = transform(x)
    (grad,) = torch.autograd.grad(highs[1].pow(2).sum(), x, create_graph=True)
    grad.pow(2).sum().backward()
    print("DTCWTForward(J=2) double backward: works")
except RuntimeError as error:
    print("DTCWTForward(J=2) double backward: RuntimeError:", error)
