"""torch-struct 0.5: CheckpointSemiring's matmul has a silently zero double backward (issue 25).

Run with a venv that has torch-struct 0.5 and torch 2.13.0:
    python bench/recreate/issue25_torch_struct_checkpoint.py
``CheckpointSemiring(cls).matmul`` applies ``_Check``, whose backward recomputes
the product under ``enable_grad`` and returns ``torch.autograd.grad(q, (a, b),
grad_output)`` without ``create_graph=True``: the gradients it returns have no
history, and backward is not ``@once_differentiable``, so a double backward
(a Hessian-vector product, a gradient penalty) through it is silently zero.
Prints the second derivative through the checkpointed matmul and through the
plain semiring (the checkpointed one has none), and gradgradcheck's verdict (False).
"""
import torch
from torch_struct.semirings import LogSemiring
from torch_struct.semirings.checkpoint import CheckpointSemiring

torch.manual_seed(0)
a = torch.randn(1, 3, 1, 3, 3, dtype=torch.float64, requires_grad=True)
b = torch.randn(1, 3, 1, 3, 3, dtype=torch.float64, requires_grad=True)
checkpointed = CheckpointSemiring(LogSemiring, min_size=0)
for name, semiring in (("plain", LogSemiring), ("checkpointed", checkpointed)):
    (grad_a,) = torch.autograd.grad(semiring.matmul(a, b).sum(), (a,), create_graph=True)
    if not grad_a.requires_grad:  # no history: a gradient penalty on it gets no gradient at all
        print(f"{name}: the first derivative has no graph (requires_grad=False): the second derivative is lost")
        continue
    second = torch.autograd.grad(grad_a.pow(2).sum(), (b,), allow_unused=True)[0]
    print(f"{name}: d/db of ||d/da||^2 sums to {None if second is None else round(float(second.abs().sum()), 6)}")
print("gradgradcheck:", torch.autograd.gradgradcheck(checkpointed.matmul, (a, b), raise_exception=False))
