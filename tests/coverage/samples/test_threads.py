import _thread
import threading

import torch

from threadlib import Deep, NeverBackward, RawSquare, Twice, double_grad, forward_grad, module_hook


def on_raw_thread(fn):
    """Run fn on a thread started by _thread, as C++ and other libraries start theirs."""
    done = threading.Event()
    errors = []

    def work():
        try:
            fn()
        except BaseException as error:
            errors.append(error)
        finally:
            done.set()

    _thread.start_new_thread(work, ())
    assert done.wait(30)
    assert not errors, errors


def test_backward_on_raw_thread():
    def work():
        x = torch.ones(3, requires_grad=True)
        RawSquare.apply(x).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0]

    on_raw_thread(work)


def test_reentrant_backward_deeper_than_60():
    x = torch.ones(1, requires_grad=True)
    Deep.apply(x, 70).sum().backward()


def test_tensor_hook_on_raw_thread():
    x = torch.ones(3, requires_grad=True)
    x.register_hook(double_grad)
    on_raw_thread(lambda: (x * 3).sum().backward())
    assert x.grad.tolist() == [6.0, 6.0, 6.0]


def test_module_full_backward_hook_on_raw_thread():
    layer = torch.nn.Linear(2, 2)
    layer.register_full_backward_hook(module_hook)
    x = torch.ones(1, 2, requires_grad=True)
    on_raw_thread(lambda: layer(x).sum().backward())


def test_double_backward_and_jvp():
    x = torch.ones(2, requires_grad=True)
    (g,) = torch.autograd.grad(Twice.apply(x).sum(), x, create_graph=True)
    assert forward_grad(torch.ones(2)).tolist() == [2.0, 2.0]


def test_forward_only():
    NeverBackward.apply(torch.ones(2, requires_grad=True))
