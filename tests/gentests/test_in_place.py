"""An in-place Function (``ctx.mark_dirty``) is checked on clones of its inputs.

Its forward modifies its input: called on a leaf that requires grad, autograd
refuses ("a leaf Variable that requires grad has been used in an in-place
operation"), and gradcheck's finite differences would see an input changed by
the previous call.  torch's own OpInfos call such a Function on a clone
(``NumpyExp_.apply(x.clone())`` in ``autograd_function_db``); so do the
generated tests.  A wrong backward still fails.
"""

from __future__ import annotations

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

FUNCTIONS = '''\
import torch


class Exp_(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.exp_()
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class Sin_(torch.autograd.Function):
    """Split style; backward forgets the chain rule."""

    @staticmethod
    def forward(x):
        return x.sin_()

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.mark_dirty(x)
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.sqrt(1 - y * y)
'''


def test_in_place_functions_are_called_on_clones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(in_place_fns=FUNCTIONS)
    generated = gen_tests(pytester.path, "in_place_fns.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    text = (pytester.path / "gen" / "test_gradcheck_in_place_fns.py").read_text()
    assert "check_gradcheck(in_place(subject.Exp_), case)" in text
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    # Sin_'s non-contiguous gradcheck skips: gradcheck fails on contiguous inputs too.
    assert outcomes == {"TestExp_": {"passed": 3}, "TestSin_": {"failed": 2, "skipped": 1}}, result.stdout.str()
    result.stdout.fnmatch_lines(["Sin_: backward differs from the finite-difference Jacobian of forward (gradcheck)"])
    assert "leaf Variable" not in result.stdout.str()
