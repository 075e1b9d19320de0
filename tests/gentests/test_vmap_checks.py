"""test_vmap checks gradients under ``torch.vmap`` (torch.func), not under gradcheck's prototype vmap.

``NumpyMul`` is torch's own ``autograd_function_db.NumpyMul``: forward in numpy,
a right ``vmap`` staticmethod, backward through ``NumpyMul`` again.  gradcheck's
``check_batched_grad`` vmaps with ``torch._vmap_internals``, which ignores the
``vmap`` staticmethod, so it failed with "Batching rule not implemented for
aten::detach" though ``torch.func.jacrev`` works.  ``ZerosThenCopy`` declares
``generate_vmap_rule`` and its backward writes the batched gradient into an
unbatched ``torch.zeros(g.shape)``: right unbatched, it raises under
``torch.vmap(torch.func.vjp(...))``, a real bug of its vmap support.
"""

from __future__ import annotations

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

FUNCTIONS = '''\
import torch


class NumpyMul(torch.autograd.Function):
    @staticmethod
    def forward(x, y):
        return torch.tensor(x.cpu().numpy() * y.cpu().numpy(), device=x.device)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return NumpyMul.apply(grad_output, y), NumpyMul.apply(grad_output, x)

    @staticmethod
    def vmap(info, in_dims, x, y):
        x_bdim, y_bdim = in_dims
        x = x.movedim(x_bdim, -1) if x_bdim is not None else x.unsqueeze(-1)
        y = y.movedim(y_bdim, -1) if y_bdim is not None else y.unsqueeze(-1)
        return NumpyMul.apply(x, y).movedim(-1, 0), 0

    @staticmethod
    def jvp(ctx, x_tangent, y_tangent):
        x, y = ctx.saved_tensors
        return x_tangent * y + y_tangent * x


class ZerosThenCopy(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return 2 * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        result = torch.zeros(grad.shape, dtype=grad.dtype)
        result.copy_(2 * grad)
        return result
'''


def test_vmap_of_a_numpy_function_with_a_vmap_rule_passes_and_a_backward_broken_under_vmap_fails(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(numpy_fns=FUNCTIONS)
    generated = gen_tests(pytester.path, "numpy_fns.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert outcomes == {
        # gradcheck, its non-contiguous twin, gradgradcheck, forward AD, vmap
        "TestNumpyMul": {"passed": 5},
        "TestZerosThenCopy": {"passed": 3, "failed": 1},
    }, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*TestZerosThenCopy.test_vmap*",
        "ZerosThenCopy: backward (torch.func.vjp) raises under torch.vmap (RuntimeError: *",
        "inputs (float64, batch of 2): #0: tensor (3, 4) float64, requires_grad; seed 0; reproduce with: *",
    ])
