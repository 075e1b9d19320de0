"""The non-contiguous gradcheck: a Function that assumes contiguous memory fails it, a correct one passes.

``RowMajorKernel`` reads a saved input's memory as if it were row-major (what a
kernel given a raw pointer does): right on contiguous inputs, silently wrong on
a transposed one.  ``RowSums`` views a saved input flat, which raises on one.
"""

from __future__ import annotations

import re

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

pytest.importorskip("torch")

LAYOUTS = '''\
import math

import torch


class Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.mT, x.mT @ grad


class RowMajorKernel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        rows, columns = x.shape
        x_memory = x.as_strided((rows, columns), (columns, 1))
        return grad @ w.mT, x_memory.mT @ grad


class RowSums(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sum(-1)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad[:, None] * torch.ones_like(x.view(-1)).view(x.shape)


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


class TruncatedExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return sum(x ** k / math.factorial(k) for k in range(7))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.exp(x)


Scale.apply(torch.randn(5))
TruncatedExp.apply(torch.randn(3, 4))
'''
CONTIGUITY = ("were passed non-contiguous (the same values, memory laid out transposed: x.mT.contiguous().mT); "
              "gradcheck passes with all inputs contiguous: the Function assumes contiguous memory")


def test_a_function_assuming_contiguous_memory_fails_and_says_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(layouts=LAYOUTS)
    generated = gen_tests(pytester.path, "layouts.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    text = (pytester.path / "gen" / "test_gradcheck_layouts.py").read_text()
    assert "check_gradcheck_non_contiguous(subject.Matmul, case)" in text
    # Only vectors: nothing to pass non-contiguous with its shape kept.
    assert "check_gradcheck_non_contiguous(subject.Scale, case)" not in text

    result = run_pytest(pytester, "gen", "-rs", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert outcomes == {
        "TestMatmul": {"passed": 3},
        "TestRowMajorKernel": {"passed": 2, "failed": 1},
        "TestRowSums": {"passed": 2, "failed": 1},
        "TestScale": {"passed": 2},
        # gradcheck fails contiguous too (an approximate forward): not a layout question.
        "TestTruncatedExp": {"failed": 1, "passed": 1, "skipped": 1},
    }, result.stdout.str()
    output = result.stdout.str()
    result.stdout.fnmatch_lines([
        ("RowMajorKernel: backward and the finite-difference Jacobian of forward disagree on non-contiguous inputs "
         "(gradcheck)"),
        f"inputs #0, #1 {CONTIGUITY}*",
        "gradcheck said: Jacobian mismatch for output 0 with respect to input 1,",
    ])
    result.stdout.fnmatch_lines([
        ("RowSums: gradcheck with non-contiguous inputs raised RuntimeError: view size is not compatible with input "
         "tensor's size and stride*(*layouts.py:*, in backward)"),
        f"inputs #0 {CONTIGUITY}*",
    ])
    result.stdout.fnmatch_lines([("SKIPPED *TruncatedExp: gradcheck fails on contiguous inputs too (GradcheckError; "
                                  "test_gradcheck reports it): not a question of memory layout")])
    # A layout failure is not a question of precision: no looser or float32 re-run.
    layout_failures = [part for part in re.split(r"_{3,} Test", output)
                       if part.startswith(("RowMajorKernel.", "RowSums."))]
    assert len(layout_failures) == 2
    assert not any("times looser" in part or "in float32" in part for part in layout_failures)
