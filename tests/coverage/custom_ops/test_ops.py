import torch

import grads  # noqa: F401  (registers cube's backward)
import opslib


def test_scale():
    x = torch.ones(2, requires_grad=True)
    opslib.scale(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_cube_twice():
    for _ in range(2):
        x = torch.full((2,), 2.0, requires_grad=True)
        opslib.cube(x).sum().backward()
        assert x.grad.tolist() == [12.0, 12.0]


def test_never_forward_only():
    assert opslib.never(torch.ones(2)).tolist() == [3.0, 3.0]


def test_twice():
    x = torch.ones(2, requires_grad=True)
    opslib.Twice.apply(x).sum().backward()
