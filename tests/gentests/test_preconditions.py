"""A backward that raises on purpose, or needs torch.distributed, is skipped with the reason, not failed.

Found on torch's own ``dist_autograd_test``: ``SimulateBackwardError`` raises
while a class flag says so, ``MyBackwardFunc`` asserts a state its distributed
test sets up, ``TestDebugInfoFunc`` reads the distributed autograd context.  The
generated tests, in one process, can provide none of it: no bug is behind their
failure.  A backward that fails by torch's own error (gradients of the wrong
shape) still fails.
"""

from __future__ import annotations

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without torch.distributed")]

FUNCTIONS = '''\
import torch
import torch.distributed as dist
import torch.distributed.autograd as dist_autograd


class SimulateBackwardError(torch.autograd.Function):
    _simulate_error = True

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        if SimulateBackwardError._simulate_error:
            raise Exception("Simulate error on backward pass")
        return grad


class AllReduceGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class DebugInfo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        info = dist_autograd._get_debug_info()
        return grad * len(info)


class WrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return torch.cat([grad, grad])
'''


def test_deliberate_and_distributed_backward_errors_skip_and_a_wrong_shape_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(preconditions=FUNCTIONS)
    generated = gen_tests(pytester.path, "preconditions.py", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "-rs", "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert outcomes == {
        # gradcheck, its non-contiguous twin, gradgradcheck; DebugInfo, an undeclared surrogate: gradcheck, surrogate
        "TestSimulateBackwardError": {"skipped": 3},
        "TestAllReduceGrad": {"skipped": 3},
        "TestDebugInfo": {"skipped": 2},
        # gradcheck and gradgradcheck fail; the non-contiguous twin skips: backward failed on every
        # contiguous candidate, which is not a question of memory layout (reported once, not twice).
        "TestWrongShape": {"failed": 2, "skipped": 1},
    }, result.stdout.str()
    result.stdout.fnmatch_lines([
        "SKIPPED * SimulateBackwardError.backward raised Exception: Simulate error on backward pass, and it raises on "
        "purpose: a `raise` statement of its module, at preconditions.py:16 (a state or input its own tests provide)",
        "SKIPPED * AllReduceGrad.backward raised ValueError: Default process group has not been initialized*, and it "
        "calls torch.distributed (`dist.all_reduce(grad)`, preconditions.py:28), which needs an initialised "
        "process group or RPC agent; the generated tests run in one process without one",
        "SKIPPED * DebugInfo.backward raised RuntimeError: *, and it calls torch.distributed "
        "(`info = dist_autograd._get_debug_info()`, preconditions.py:39), *",
        "SKIPPED * not a question of memory layout",
    ], consecutive=False)
