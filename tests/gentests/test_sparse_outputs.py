"""A Function with a sparse output: checked as torch's gradcheck asks, through ``to_dense()``.

gradcheck refuses sparse outputs ("Please call to_dense(masked_grad=...) on the
output of fn"), and ``ones_like`` of one raises (``fill_`` has no sparse kernel):
the harness used to fail such a Function with that error of its own, as if
backward had raised (norse's ``LIFSparseAdjointFunction``).  A sparse output is now
compared densely and its gradient is sparse, as in real use: ``to_dense()``,
``torch.sparse.mm`` and an unused output all hand backward a sparse gradient.
``SparseProduct`` handles one and passes; ``DenseOnly`` compares its gradient
with itself (``grad != grad``, no sparse kernel), as norse's backward does, and
fails test_gradcheck with that error of its own, which its real use also raises;
its shapes are searched, as norse's were, and the non-contiguous variant skips
(nothing about memory layout).
"""

from __future__ import annotations

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

torch = pytest.importorskip("torch")

from autograd_lint.gentests.runtime.tensors import comparable, gradient_like  # noqa: E402

SPARSE = '''\
import torch


class SparseProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return (x @ w).to_sparse()

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad = grad.to_dense()
        return grad @ w.mT, x.mT @ grad


class DenseOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return (x @ w).to_sparse()

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad = grad * 1.0
        grad[grad != grad] = 0.0
        grad = grad.to_dense()
        return grad @ w.mT, x.mT @ grad


SparseProduct.apply(torch.randn(3, 4), torch.randn(4, 2))
'''


def test_a_sparse_output_gets_a_sparse_gradient_of_its_layout_and_is_compared_dense() -> None:
    x = torch.tensor([[0.0, 2.0], [3.0, 0.0]], dtype=torch.float64)
    for sparse in (x.to_sparse(), x.to_sparse_csr()):
        gradient = gradient_like(sparse)
        assert gradient.layout == sparse.layout
        assert torch.equal(gradient.to_dense(), torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64))
        assert comparable(sparse).layout == torch.strided
    assert torch.equal(gradient_like(x), torch.ones_like(x))
    assert comparable(x) is x


def test_a_function_with_a_sparse_output_is_checked_without_a_false_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(sparse=SPARSE)
    generated = gen_tests(pytester.path, "sparse.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    result = run_pytest(pytester, "gen", "-rs", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    output = result.stdout.str()
    assert outcomes["TestSparseProduct"] == {"passed": 3}, output
    assert outcomes["TestDenseOnly"] == {"failed": 2, "skipped": 1}, output
    assert "fill_" not in output
    result.stdout.fnmatch_lines(["*DenseOnly*NotImplementedError: Could not run 'aten::ne.Tensor'*SparseCPU*"])
    result.stdout.fnmatch_lines(["SKIPPED *DenseOnly: backward fails on contiguous inputs too (test_gradcheck "
                                 "reports it): not a question of memory layout"])
