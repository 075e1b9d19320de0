"""Surrogate-gradient Functions, searched-input kinds, and [tool.autograd-lint] in gen-tests.

The gradient-reversal layer below is the pattern of ``pytorch-revgrad``: forward
is the identity, backward returns ``-alpha * grad``.  gradcheck must fail on it;
declared a surrogate, it gets checks that pass, and a failing one when its
declared reference has a sign error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

pytest.importorskip("torch")

REVERSAL = '''\
import torch
from torch.autograd import Function


{declaration}
class GradientReversal(Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(x, alpha)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        _, alpha = ctx.saved_tensors
        return -grad_output * alpha, None
'''


def _run(pytester: pytest.Pytester, declaration: str, pyproject: str = "") -> tuple[dict, pytest.RunResult]:
    pytester.makepyfile(revgrad=REVERSAL.format(declaration=declaration))
    if pyproject:
        pytester.makefile(".toml", pyproject=pyproject)
    generated = gen_tests(pytester.path, "revgrad.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "-v", "--junitxml=report.xml")
    return {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}, result


def test_undeclared_gradient_reversal_is_recognised_and_gradcheck_is_expected_to_fail(
        pytester: pytest.Pytester) -> None:
    outcomes, result = _run(pytester, "")
    # Recognised statically (forward the identity, backward the gradient scaled): surrogate
    # checks, and gradcheck kept as an expected failure (xfail is "skipped" in JUnit XML).
    assert outcomes == {"TestGradientReversal": {"skipped": 1, "passed": 1}}
    result.stdout.fnmatch_lines(["*test_gradcheck*XFAIL*"])
    text = (pytester.path / "gen" / "test_gradcheck_revgrad.py").read_text()
    assert "@pytest.mark.xfail(reason=\"backward plainly is not the derivative of forward: forward returns its " \
           "input 'x' unchanged and backward returns the output gradient scaled" in text
    # Run as a normal test, the gradcheck failure explains itself.
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--runxfail", "-k", "not surrogate")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    # The searched alpha is a tensor (it is saved for backward), not a number, and gets no gradient.
    assert "TypeError: save_for_backward" not in text
    assert "GradientReversal: backward differs from the finite-difference Jacobian of forward (gradcheck)" in text
    assert "#0: tensor (3, 4) float64, requires_grad; #1: tensor (3, 4) float64; seed 0; reproduce with: pytest" in text
    assert "and 100 times looser: not a precision problem; a wrong formula unless the gradient is deliberately " \
           "not the derivative" in text


def test_declared_by_comment_with_its_reference_passes(pytester: pytest.Pytester) -> None:
    outcomes, result = _run(
        pytester, "# autograd-lint: surrogate-gradient reference=lambda x, alpha: -alpha * x")
    assert outcomes == {"TestGradientReversal": {"passed": 2}}, result.stdout.str()
    result.stdout.fnmatch_lines(["*::test_surrogate_gradients[[]search-?-?[]] PASSED*",
                                 "*::test_surrogate_reference[[]search-?-?[]] PASSED*"])
    generated = (pytester.path / "gen" / "test_gradcheck_revgrad.py").read_text()
    assert "check_surrogate_reference(subject.GradientReversal, case, reference=lambda x, alpha: -alpha * x)" \
        in generated
    assert "gradcheck(" not in generated


def test_a_sign_error_in_the_declared_reference_fails(pytester: pytest.Pytester) -> None:
    outcomes, result = _run(pytester, "# autograd-lint: surrogate-gradient reference=lambda x, alpha: alpha * x")
    assert outcomes == {"TestGradientReversal": {"passed": 1, "failed": 1}}
    result.stdout.fnmatch_lines([
        "*GradientReversal: the surrogate gradient of input #0 differs from the gradient of its declared "
        "reference <lambda> (same inputs, same seeded output gradient)",
    ])


def test_declared_in_the_configuration(pytester: pytest.Pytester) -> None:
    outcomes, _ = _run(pytester, "", pyproject='[tool.autograd-lint]\n'
                       'surrogate-gradients = {"revgrad.GradientReversal" = "lambda x, alpha: -alpha * x"}\n')
    assert outcomes == {"TestGradientReversal": {"passed": 2}}


def test_a_reference_that_is_not_an_expression_is_one_line_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(revgrad=REVERSAL.format(declaration="# autograd-lint: surrogate-gradient reference=lambda x:"))
    generated = gen_tests(pytester.path, "revgrad.py", "--out", "gen")
    assert generated.returncode == 2
    assert generated.stderr.splitlines() == [
        "revgrad.py:5: surrogate-gradient reference is not a Python expression: invalid syntax"]
    assert (pytester.path / "gen" / "test_gradcheck_revgrad.py").exists()


def test_gen_tests_honours_configured_function_bases(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(base="import torch\n\n\nclass MyFunction(torch.autograd.Function):\n    pass\n")
    pytester.makepyfile(ops='''\
from base import MyFunction


class Double(MyFunction):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2
''')
    pytester.makefile(".toml", pyproject='[tool.autograd-lint]\nextra-function-bases = ["base.MyFunction"]\n')
    generated = gen_tests(pytester.path, "ops.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    assert "class TestDouble:" in (pytester.path / "gen" / "test_gradcheck_ops.py").read_text()
    isolated = gen_tests(pytester.path, "ops.py", "--out", "gen2", "--isolated")
    assert not Path(pytester.path / "gen2" / "test_gradcheck_ops.py").exists(), isolated.stdout


HINTS = '''\
import torch
from torch.autograd import Function


class Stitch(Function):
    """torchdiffeq's _StitchGradient: the output is `out`, the gradient goes to `x1`."""

    @staticmethod
    def forward(ctx, x1, out):
        return out

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out, None


class RoundSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Assign(Function):
    """torchdiffeq's _UncheckedAssign: the overwritten slice gets the gradient too."""

    @staticmethod
    def forward(ctx, scratch, value):
        scratch.data[0] = value
        return scratch

    @staticmethod
    def backward(ctx, grad_scratch):
        return grad_scratch, grad_scratch[0]


class Identity(Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


class Add(Function):
    @staticmethod
    def forward(ctx, x, y):
        return x + y

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Double(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
'''


def test_backward_plainly_not_the_derivative_is_hinted_and_nothing_else(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(hints=HINTS)
    generated = gen_tests(pytester.path, "hints.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    hinted = sorted(line.split(": ")[1] for line in generated.stdout.splitlines()
                    if "backward plainly is not the derivative" in line)
    assert hinted == ["Assign", "RoundSTE", "Stitch"]
    assert "on which the output does not depend: a rerouted gradient" in generated.stdout
    assert "a straight-through estimator" in generated.stdout
    assert "also where it was overwritten" in generated.stdout
    run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    for name in ("TestStitch", "TestRoundSTE", "TestAssign"):
        assert outcomes[name] == {"skipped": 1, "passed": 1}, (name, outcomes[name])  # xfailed gradcheck
    for name in ("TestIdentity", "TestAdd", "TestDouble"):
        assert outcomes[name] == {"passed": 3}, (name, outcomes[name])  # gradcheck, non-contiguous, gradgradcheck


SPLIT_STYLE_AND_SEVERAL_OUTPUTS = '''\
import torch
from torch.autograd import Function


class ScaleGrad(Function):
    """torch's autograd_function_db.ScaleGradGenVmap: split style, a class constant."""

    scale = 3.14

    @staticmethod
    def forward(x):
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad * ScaleGrad.scale


class ZeroGradients(Function):
    """torch's autograd_function_db.ZeroGradientsGenVmap: two outputs, zeros for both."""

    @staticmethod
    def forward(x, y):
        return x.clone(), y.clone()

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        pass

    @staticmethod
    def backward(ctx, gx, gy):
        return torch.zeros(gx.shape, dtype=gx.dtype), torch.zeros_like(gy)


class Pair(Function):
    @staticmethod
    def forward(x, y):
        return x.clone(), y.clone()

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        pass

    @staticmethod
    def backward(ctx, gx, gy):
        return gx, gy


class Filled(Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        result = torch.zeros_like(grad)
        result[...] = grad
        return result
'''


def test_split_style_and_several_outputs_are_hinted_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(hints=SPLIT_STYLE_AND_SEVERAL_OUTPUTS)
    generated = gen_tests(pytester.path, "hints.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    hinted = sorted(line.split(": ")[1] for line in generated.stdout.splitlines()
                    if "backward plainly is not the derivative" in line)
    assert hinted == ["ScaleGrad", "ZeroGradients"]
    assert "forward returns its input 'x' unchanged and backward returns zeros for it" in generated.stdout
    run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert outcomes == {
        "TestScaleGrad": {"skipped": 1, "passed": 1},  # xfailed gradcheck, surrogate gradients
        "TestZeroGradients": {"skipped": 1, "passed": 1},
        "TestPair": {"passed": 3},  # gradcheck, its non-contiguous twin, gradgradcheck
        "TestFilled": {"passed": 3},
    }
