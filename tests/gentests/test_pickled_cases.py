"""Recorded calls with objects among their arguments are pickled and replayed as they were.

Objects that hold tensors also passed as arguments (an ODE function and its
parameters), callables defined in the test module, sparse tensors: the replay
rebuilds each tensor once, in float64, so gradcheck's perturbation reaches them.
"""

from __future__ import annotations

import json

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

OPS = '''\
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class Operator:
    """A LinearOperator-like object: rebuilds a matrix from flat tensors."""

    def __init__(self, scale):
        self.scale = scale

    def __call__(self, *parts):
        return self.scale * parts[0]


class Matmul(Function):
    @staticmethod
    def forward(ctx, operator, rhs, *matrix_args):
        ctx.operator = operator
        ctx.save_for_backward(rhs, *matrix_args)
        return operator(*matrix_args) @ rhs

    @staticmethod
    def backward(ctx, grad):
        rhs, *matrix_args = ctx.saved_tensors
        matrix = ctx.operator(*matrix_args)
        return (None, matrix.t() @ grad, ctx.operator.scale * grad @ rhs.t()) + (None,) * (len(matrix_args) - 1)


class Integrate(Function):
    """Calls func, whose parameters are also passed, like torchdiffeq's adjoint."""

    @staticmethod
    def forward(ctx, func, y0, *params):
        ctx.func = func
        ctx.save_for_backward(y0, *params)
        with torch.no_grad():
            return func(y0)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        y0, *params = ctx.saved_tensors
        with torch.enable_grad():
            y0 = y0.detach().requires_grad_(True)
            out = ctx.func(y0)
            grads = torch.autograd.grad(out, (y0, *params), grad, allow_unused=True)
        return (None, *grads)


class SparseMatmul(Function):
    @staticmethod
    def forward(ctx, sparse, dense):
        ctx.sparse = sparse
        return torch.sparse.mm(sparse, dense)

    @staticmethod
    def backward(ctx, grad):
        return None, torch.sparse.mm(ctx.sparse.t(), grad)


def make_scale(factor):
    class Scaled(Function):
        @staticmethod
        def forward(ctx, x):
            return x * factor

        @staticmethod
        def backward(ctx, grad):
            return grad * factor

    return Scaled.apply
'''

WRONG = {"ctx.operator.scale * grad @ rhs.t()": "grad @ rhs.t()",
         "torch.sparse.mm(ctx.sparse.t(), grad)": "torch.sparse.mm(ctx.sparse, grad)",
         "return grad * factor": "return grad",
         "grads = torch.autograd.grad(out, (y0, *params), grad, allow_unused=True)":
         "grads = torch.autograd.grad(out, (y0, *params), grad, allow_unused=True)\n"
         "            grads = (grads[0], *(2 * g for g in grads[1:]))"}

TESTS = '''\
import torch
from ops import Integrate, Matmul, Operator, SparseMatmul, make_scale


class Field(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 3, dtype=torch.float64))

    def forward(self, y):
        return torch.tanh(y @ self.weight)


def test_matmul():
    rhs = torch.randn(3, 2, requires_grad=True)
    matrix = torch.randn(4, 3, requires_grad=True)
    Matmul.apply(Operator(2.0), rhs, matrix).sum().backward()


def test_integrate():
    field = Field()
    Integrate.apply(field, torch.randn(2, 3, dtype=torch.float64), *field.parameters())


def test_sparse():
    sparse = torch.tensor([[1.0, 2.0, 0.0], [0.0, 3.0, 0.0], [4.0, 0.0, 5.0]]).to_sparse()
    SparseMatmul.apply(sparse, torch.randn(3, 2, requires_grad=True))


def test_local_class():
    make_scale(3.0)(torch.randn(2, requires_grad=True))
'''


def _project(pytester: pytest.Pytester, name: str, wrong: bool) -> None:
    directory = pytester.mkdir(name)
    source = OPS
    if wrong:
        for old, new in WRONG.items():
            assert old in source
            source = source.replace(old, new)
    (directory / "ops.py").write_text(source)
    (directory / "test_usage.py").write_text(TESTS)


def test_object_arguments_are_pickled_replayed_and_checked(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for name, wrong in (("correct", False), ("wrong", True)):
        _project(pytester, name, wrong)
        project = pytester.path / name
        monkeypatch.chdir(project)
        result = run_pytest(pytester, "test_usage.py", "--autograd-record", "-p", "no:cacheprovider")
        result.assert_outcomes(passed=4)
        result.stdout.fnmatch_lines(["autograd-lint: recorded inputs of 4 Function(s) to *inputs.json"])
        data = json.loads((project / ".autograd-lint" / "inputs.json").read_text())
        cases = {entry["qualname"] if "<locals>" in key else key.rsplit(".", 1)[-1]: entry["cases"] for key, entry in data["functions"].items()}
        assert cases["Matmul"][0]["args"][0] == {"object": "ops.Operator"}
        assert all("pickled" in entry[0] for entry in cases.values())
        assert cases["SparseMatmul"][0]["args"][0]["tensor"]["layout"] == "sparse_coo"
        # Field is defined in the test module: pickled by value, the generated suite can't import it.
        assert cases["Integrate"][0]["args"][0] == {"object": "test_usage.Field"}

        generated = gen_tests(project, "ops.py", "--out", "generated")
        assert generated.returncode == 0, generated.stderr
        assert "4 recorded" in generated.stdout, generated.stdout
        text = (project / "generated" / "test_gradcheck_ops.py").read_text()
        # A class defined inside a function is pickled with its recorded call.
        assert cases["make_scale.<locals>.Scaled"][0]["with_function"] is True
        assert "check_gradcheck(recorded_function(case), case)" in text
        assert "recorded(" in text and 'id="recorded-Operator-3x2-4x3"' in text
        monkeypatch.chdir(pytester.path)
        (project / "test_usage.py").unlink()  # the replay must not need the test module
        run_pytest(pytester, str(project / "generated"), "-p", "no:cacheprovider",
                                      f"--junitxml={project / 'report.xml'}")
    correct = outcomes_by_class(pytester.path / "correct" / "report.xml")
    # The non-contiguous gradcheck too (not for Scaled's vector): Integrate's Field sees its weight laid out so.
    assert {name: dict(counts) for name, counts in correct.items()} == {
        "TestMatmul": {"passed": 4}, "TestIntegrate": {"passed": 4}, "TestSparseMatmul": {"passed": 3},
        "Testmake_scale_Scaled": {"passed": 2}}
    wrong = outcomes_by_class(pytester.path / "wrong" / "report.xml")
    assert all(counts["failed"] >= 1 for counts in wrong.values()), wrong
