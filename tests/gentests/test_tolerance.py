"""Declared gradcheck tolerances: a Function whose forward is an approximation.

``TruncatedExp`` computes exp by seven terms of its Taylor series, and its
backward is exp's exact derivative: the pattern of an iterative forward
(Lanczos, conjugate gradients) with a backward for the exact function.  gradcheck
fails at its default tolerances and passes 100 times looser; declared, the
generated tests use the declared tolerances and pass.
"""

from __future__ import annotations

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

pytest.importorskip("torch")

APPROXIMATION = '''\
import math

import torch


{declaration}
class TruncatedExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return sum(x ** k / math.factorial(k) for k in range(7))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.exp(x)
'''


def _generate(pytester: pytest.Pytester, declaration: str, pyproject: str = "") -> tuple[int, str, str]:
    """gen-tests on the module: exit code, stderr, and the generated test module."""
    pytester.makepyfile(approx=APPROXIMATION.format(declaration=declaration))
    if pyproject:
        pytester.makefile(".toml", pyproject=pyproject)
    generated = gen_tests(pytester.path, "approx.py", "--out", "gen")
    return generated.returncode, generated.stderr, (pytester.path / "gen" / "test_gradcheck_approx.py").read_text()


def _outcomes(pytester: pytest.Pytester) -> tuple[dict, pytest.RunResult]:
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    return {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}, result


def test_undeclared_the_failure_says_the_mismatch_is_small_and_names_the_declaration(
        pytester: pytest.Pytester) -> None:
    code, stderr, _ = _generate(pytester, "")
    assert code == 0, stderr
    outcomes, result = _outcomes(pytester)
    # The non-contiguous gradcheck skips: it fails contiguous too, not a question of layout.
    assert outcomes == {"TestTruncatedExp": {"failed": 1, "passed": 1, "skipped": 1}}
    text = result.stdout.str()
    assert ("fails at atol=1e-05, rtol=0.001; passes 100 times looser: the mismatch is small (within about "
            "10%): an approximate forward (e.g. an iterative solver), ill-conditioned numerics, or a formula "
            "slightly off; if forward is an approximation, declare the tolerance on the class: "
            "# autograd-lint: gradcheck atol=0.001 rtol=0.1") in text
    assert "wrong formula unless" not in text


def test_declared_by_comment_the_gradchecks_use_it_and_pass(pytester: pytest.Pytester) -> None:
    code, stderr, generated = _generate(pytester, "# autograd-lint: gradcheck atol=1e-3 rtol=0.1")
    assert code == 0, stderr
    assert "check_gradcheck(subject.TruncatedExp, case, atol=0.001, rtol=0.1)" in generated
    assert "check_gradgradcheck(subject.TruncatedExp, case, atol=0.001, rtol=0.1)" in generated
    assert "check_gradcheck_non_contiguous(subject.TruncatedExp, case, atol=0.001, rtol=0.1)" in generated
    outcomes, result = _outcomes(pytester)
    assert outcomes == {"TestTruncatedExp": {"passed": 3}}, result.stdout.str()


def test_declared_in_the_configuration(pytester: pytest.Pytester) -> None:
    code, stderr, generated = _generate(pytester, "", pyproject='[tool.autograd-lint]\n'
                                        'gradcheck-tolerances = {"approx.TruncatedExp" = "rtol=0.1, atol=1e-3"}\n')
    assert code == 0, stderr
    assert "check_gradcheck(subject.TruncatedExp, case, atol=0.001, rtol=0.1)" in generated
    outcomes, _ = _outcomes(pytester)
    assert outcomes == {"TestTruncatedExp": {"passed": 3}}


@pytest.mark.parametrize(("declaration", "pyproject", "error"), [
    ("# autograd-lint: gradcheck atol=fast", "",
     "approx.py:6: gradcheck tolerance 'atol=fast' is not atol=NUMBER or rtol=NUMBER (a number >= 0)"),
    ("# autograd-lint: gradcheck", "",
     "approx.py:6: gradcheck declaration without a tolerance (write atol=NUMBER, rtol=NUMBER)"),
    ("", '[tool.autograd-lint]\ngradcheck-tolerances = {"approx.TruncatedExp" = "atol=1e-3 atol=1e-2"}\n',
     "[tool.autograd-lint] gradcheck-tolerances 'approx.TruncatedExp': gradcheck tolerance 'atol=1e-2' "
     "is given twice"),
])
def test_a_bad_declaration_is_one_line_and_the_tests_are_generated_without_it(
        pytester: pytest.Pytester, declaration: str, pyproject: str, error: str) -> None:
    code, stderr, generated = _generate(pytester, declaration, pyproject)
    assert code == 2
    assert stderr.splitlines() == [error]
    assert "check_gradcheck(subject.TruncatedExp, case)" in generated


def test_a_configured_value_that_is_not_a_table_of_strings_is_a_configuration_error(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(approx=APPROXIMATION.format(declaration=""))
    pytester.makefile(".toml", pyproject='[tool.autograd-lint]\n'
                      'gradcheck-tolerances = {"approx.TruncatedExp" = 1e-3}\n')
    generated = gen_tests(pytester.path, "approx.py", "--out", "gen")
    assert generated.returncode == 2
    assert "gradcheck-tolerances: expected a table of 'pkg.module.Function' = 'atol=..., rtol=...'" in generated.stderr
    assert not (pytester.path / "gen").exists()
