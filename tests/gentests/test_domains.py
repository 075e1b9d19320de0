"""Searched inputs in the domain forward needs: symmetric positive-definite matrices.

``LogDet`` takes the log-determinant through a Cholesky factor, as Gaussian-process
and linear-algebra libraries do: random matrices of any sign make ``cholesky``
raise, so before the positive-definite domain its harness was skipped ("forward
accepted none of the candidate shapes and values").  Its backward is right
(``A⁻¹`` for a symmetric ``A``): every generated test must pass.  ``WrongLogDet``
returns ``A⁻ᵀ A⁻¹``: gradcheck must fail on it.
"""

from __future__ import annotations

import pytest

from gentests_support import gen_tests, outcomes_by_class

pytest.importorskip("torch")

LOGDET = '''\
import torch


class LogDet(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        factor = torch.linalg.cholesky(a)
        ctx.save_for_backward(a)
        return 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return grad[..., None, None] * torch.linalg.inv(a)


class WrongLogDet(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        factor = torch.linalg.cholesky(a)
        ctx.save_for_backward(a)
        return 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        inverse = torch.linalg.inv(a)
        return grad[..., None, None] * inverse.mT @ inverse
'''


def test_a_cholesky_forward_gets_positive_definite_inputs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(logdet=LOGDET)
    generated = gen_tests(pytester.path, "logdet.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    pytester.runpytest_subprocess("gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert set(outcomes["TestLogDet"]) == {"passed"}, outcomes
    assert outcomes["TestWrongLogDet"].get("failed", 0) >= 1, outcomes


UNTESTABLE = '''\
import torch


class NoisyScale(torch.autograd.Function):
    """A reparameterised sample: forward draws noise, backward is the pathwise gradient."""

    @staticmethod
    def forward(ctx, scale):
        noise = torch.randn_like(scale)
        ctx.save_for_backward(noise)
        return scale * noise

    @staticmethod
    def backward(ctx, grad):
        (noise,) = ctx.saved_tensors
        return grad * noise
'''


def test_a_forward_that_draws_random_numbers_is_skipped_with_the_reason(pytester: pytest.Pytester) -> None:
    # Found on torch's own Functions (torch.distributions' _Dirichlet, lobpcg): finite
    # differences of a random forward failed without a bug.
    pytester.makepyfile(untestable=UNTESTABLE)
    assert gen_tests(pytester.path, "untestable.py", "--out", "gen").returncode == 0
    result = pytester.runpytest_subprocess("gen", "-p", "no:cacheprovider", "-rs", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert set(outcomes["TestNoisyScale"]) == {"skipped"}, outcomes
    result.stdout.fnmatch_lines(["*NoisyScale: forward gives different outputs for the same inputs*"])
