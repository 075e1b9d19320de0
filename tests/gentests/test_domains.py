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
from pytest_process import run_pytest

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
    run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
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


def test_a_forward_that_draws_random_numbers_skips_the_derivative_checks_and_keeps_the_contract(
    pytester: pytest.Pytester,
) -> None:
    # Found on torch's own Functions (torch.distributions' _Dirichlet, lobpcg): finite
    # differences of a random forward failed without a bug.  The derivative checks skip with
    # the reason; the gradient contract (count, shapes, finite values, grad_output untouched,
    # the same sample twice) still holds for such a forward and is checked.
    pytester.makepyfile(untestable=UNTESTABLE)
    assert gen_tests(pytester.path, "untestable.py", "--out", "gen").returncode == 0
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "-rA", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert outcomes["TestNoisyScale"] == {"skipped": 3, "passed": 1}, outcomes
    result.stdout.fnmatch_lines(["*NoisyScale: forward gives different outputs for the same inputs*"])
    result.stdout.fnmatch_lines(["PASSED *TestNoisyScale::test_surrogate_gradients*"])


EIGH = '''\
import torch
from torch.autograd.function import once_differentiable


class Eigenvalues(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        values, vectors = torch.linalg.eigh(a)
        ctx.save_for_backward(vectors)
        return values

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (vectors,) = ctx.saved_tensors
        return vectors @ torch.diag_embed(grad) @ vectors.mT
'''


def test_evidence_in_forward_puts_its_domain_first(pytester: pytest.Pytester) -> None:
    """``eigh`` accepts any matrix (it reads the lower triangle), so the search alone took a random
    one, and gradcheck, perturbing the upper triangle too, failed without a bug.  ``eigh`` in forward
    asks for symmetric positive-definite inputs first; symmetric inputs are perturbed symmetrically."""
    pytester.makepyfile(eig=EIGH)
    generated = gen_tests(pytester.path, "eig.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    text = (pytester.path / "gen" / "test_gradcheck_eig.py").read_text()
    assert 'domains=("positive_definite",)' in text
    run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert set(outcomes["TestEigenvalues"]) == {"passed"}, outcomes

    # The same test without the evidence: the first domain forward accepts, a false failure.
    (pytester.path / "gen" / "test_gradcheck_eig.py").write_text(text.replace(', domains=("positive_definite",)', ""))
    run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert outcomes["TestEigenvalues"].get("failed", 0) >= 1, outcomes


@pytest.mark.parametrize(("call", "domains"), [
    ("torch.log(x)", ("positive",)),
    ("x.sqrt() + torch.linalg.cholesky(x).sum()", ("positive_definite", "positive")),
    ("torch.special.logit(x)", ("unit",)),
    ("x * 2", ()),
])
def test_preferred_domains_from_forward(call: str, domains: tuple[str, ...]) -> None:
    from autograd_lint.gentests.domains import preferred_domains
    from autograd_lint.model.analysis import analyze
    from autograd_lint.model.source import SourceFile
    from autograd_lint.settings import Settings

    source = f'''\
import torch


class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return {call}

    @staticmethod
    def backward(ctx, grad):
        return grad
'''
    (spec,) = analyze(SourceFile("f.py", source, "f"), {}, Settings()).functions
    assert preferred_domains(spec, source.splitlines()) == domains
