"""A custom op every candidate input fails for a reason of this run, not of the op: skipped, not failed.

Found on spikingjelly's Triton ops: kernels registered for CUDA only ("Could not run
'sj_if_linear::forward' with arguments from the 'CPU' backend") and an op taking
only float32/16 spikes; on a CPU machine, in the checks' float64, both failed
"raised on every candidate input", with no bug behind it.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from autograd_lint.gentests import op_harness  # noqa: E402
from autograd_lint.gentests.harness import Case, any_tensor  # noqa: E402


@torch.library.custom_op("agl_refusals::cuda_only", mutates_args=(), device_types="cuda")
def cuda_only(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@torch.library.custom_op("agl_refusals::single_only", mutates_args=())
def single_only(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16):
        raise TypeError("x must have dtype float32 or float16")
    return x.clone()


@torch.library.custom_op("agl_refusals::broken", mutates_args=())
def broken(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("the op is broken")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's missing kernel is what is checked")
def test_an_op_without_a_kernel_here_is_skipped_with_the_backend() -> None:
    with pytest.raises(pytest.skip.Exception, match="no kernel for the CPU backend"):
        op_harness.op_args(cuda_only, Case((any_tensor(),)))


def test_an_op_refusing_float64_is_skipped_and_a_broken_op_still_fails() -> None:
    with pytest.raises(pytest.skip.Exception, match="refuses the float64 inputs"):
        op_harness.op_args(single_only, Case((any_tensor(),)))
    with pytest.raises(pytest.fail.Exception, match="raised on every candidate input: RuntimeError: the op is broken"):
        op_harness.op_args(broken, Case((any_tensor(),)))
