import pytest
import torch

from breaking import FUNCTIONS, loss, loss_and_backward, module_hook_inside

BACKENDS = ["eager", "aot_eager", "inductor"]
EXPECTED_GRAD = {"Printing": 2.0, "ExplicitBreak": 3.0, "DataDependent": 4.0, "Item": 6.0, "BreakingBackward": 5.0}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_backward_outside(backend, function):
    torch._dynamo.reset()
    x = torch.ones(3, requires_grad=True)
    torch.compile(loss, backend=backend)(function, x).backward()
    assert x.grad.tolist() == [EXPECTED_GRAD[function.__name__]] * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_backward_inside(backend, function):
    torch._dynamo.reset()
    x = torch.ones(3, requires_grad=True)
    torch.compile(loss_and_backward, backend=backend)(function, x)
    assert x.grad.tolist() == [EXPECTED_GRAD[function.__name__]] * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_module_hook_registered_inside(backend):
    torch._dynamo.reset()
    assert torch.compile(module_hook_inside, backend=backend)(torch.ones(1, 3)) == 1
