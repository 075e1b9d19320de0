import pytest
import torch

from ops import chain


@pytest.mark.parametrize("seed", range(20))
def test_chain(seed):
    torch.manual_seed(seed)
    bias = torch.zeros(8, requires_grad=True)
    for _ in range(100):
        x = torch.randn(4, 8, requires_grad=True)
        chain(x, bias).backward()
        assert x.grad is not None
