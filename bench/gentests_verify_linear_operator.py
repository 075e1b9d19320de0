"""Evidence for the linear-operator rows of docs/accuracy.md (run with the venv's python).

``RootDecomposition`` returns a root ``R`` with ``R Rᵀ = A``, defined only up to an
orthogonal factor; its backward is meant for losses that do not depend on that
factor.  ``Diagonalization`` returns eigenvalues and eigenvectors by Lanczos.  For
each, on a random symmetric positive-definite 4x4 matrix (float64, seeded RNG
at every call so that Lanczos starts from the same vector):

* gradcheck of the Function's own outputs (what the generated test compares);
* gradcheck of a loss that does not depend on the gauge (``R Rᵀ``; eigenvalues and
  ``|eigenvectors|``-free quantities ``Q diag(λ) Qᵀ``);
* backward against ``torch.linalg.eigh``'s autograd for the same output gradient.
"""

from __future__ import annotations

import torch
from linear_operator.functions._diagonalization import Diagonalization
from linear_operator.functions._root_decomposition import RootDecomposition
from linear_operator.operators import DenseLinearOperator

torch.manual_seed(0)
N = 4
factor = torch.randn(N, N, dtype=torch.float64)
A0 = factor @ factor.T / N + torch.eye(N, dtype=torch.float64)


def seeded(function):
    def call(a):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return function((a + a.mT) / 2)
    return call


def root(a):
    op = DenseLinearOperator(a)
    r, _ = RootDecomposition.apply(op.representation_tree(), 100, a.dtype, a.device, torch.Size([]),
                                   torch.Size([N, N]), True, False, None, *op.representation())
    return r


def diagonal(a):
    op = DenseLinearOperator(a)
    return Diagonalization.apply(op.representation_tree(), a.device, a.dtype, torch.Size([N, N]), 100,
                                 torch.Size([]), *op.representation())


def verdict(name, function, a):
    try:
        ok = torch.autograd.gradcheck(function, (a,), raise_exception=False)
    except Exception as error:  # noqa: BLE001
        ok = f"raised {type(error).__name__}"
    print(f"{name}: gradcheck {'passes' if ok is True else 'fails' if ok is False else ok}")


a = A0.clone().requires_grad_(True)
verdict("RootDecomposition root R", seeded(root), a)
verdict("RootDecomposition R Rᵀ (gauge-invariant)", seeded(lambda m: (lambda r: r @ r.mT)(root(m))), a)
verdict("Diagonalization eigenvalues", seeded(lambda m: diagonal(m)[0]), a)
verdict("Diagonalization eigenvectors", seeded(lambda m: diagonal(m)[1]), a)
verdict("Diagonalization Q diag(λ) Qᵀ (gauge-invariant)",
        seeded(lambda m: (lambda e, q: q @ torch.diag_embed(e) @ q.mT)(*diagonal(m))), a)

# backward against torch.linalg.eigh's autograd, same output gradients (eigenvectors aligned in sign).
generator = torch.Generator().manual_seed(1)
with torch.random.fork_rng(devices=[]):
    torch.manual_seed(0)
    evals, evecs = seeded(diagonal)(a)
ref_vals, ref_vecs = torch.linalg.eigh((a + a.mT) / 2)
order = torch.argsort(evals.detach())
signs = torch.sign((evecs.detach()[:, order] * ref_vecs.detach()).sum(0))
g_vals = torch.randn(N, generator=generator, dtype=torch.float64)
g_vecs = torch.randn(N, N, generator=generator, dtype=torch.float64)
ours = torch.autograd.grad((evals, evecs), a, (g_vals, g_vecs))[0]
ref = torch.autograd.grad((ref_vals, ref_vecs), a,
                          (g_vals[order], (g_vecs[:, order] * signs)))[0]
print(f"Diagonalization backward vs eigh autograd: max |difference| = {(ours - ref).abs().max():.3g} "
      f"(gradient up to {ref.abs().max():.3g}); eigenvalue difference {(evals.detach()[order] - ref_vals).abs().max():.3g}")
