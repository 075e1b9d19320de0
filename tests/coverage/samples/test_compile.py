import pytest
import torch

from compilelib import AotFwdBwd, AotFwdOnly, EagerFwdBwd, EagerFwdOnly, run

CASES = [
    ("eager", EagerFwdOnly, False),
    ("aot_eager", AotFwdOnly, False),
    ("eager", EagerFwdBwd, True),
    ("aot_eager", AotFwdBwd, True),
]


@pytest.mark.parametrize("backend, function, backward", CASES, ids=lambda v: getattr(v, "__name__", v))
def test_compiled(backend, function, backward):
    x = torch.ones(3, requires_grad=True)
    out = torch.compile(run, backend=backend)(function, x)
    if backward:
        out.backward()
        assert x.grad is not None
