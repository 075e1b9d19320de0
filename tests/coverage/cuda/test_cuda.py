import torch
from cudalib import (
    CompiledCuda,
    CudaCube,
    CudaSquare,
    NeverBackwardCuda,
    SingleThreaded,
    cuda_hook,
    scale,
)


def cuda_ones():
    return torch.ones(3, device="cuda", requires_grad=True)


def test_backward_on_device_thread():
    x = cuda_ones()
    CudaSquare.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_second_backward_on_the_same_device_thread():
    x = cuda_ones()
    CudaCube.apply(x).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_multithreading_disabled():
    x = cuda_ones()
    with torch.autograd.set_multithreading_enabled(False):
        SingleThreaded.apply(x).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0, 5.0]


def test_tensor_hook_on_device_thread():
    x = cuda_ones()
    x.register_hook(cuda_hook)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0, 6.0]


def test_custom_op_backward_on_device_thread():
    x = cuda_ones()
    scale(x).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_compiled_inductor_on_cuda():
    x = cuda_ones()
    out = torch.compile(lambda t: CompiledCuda.apply(t).sum(), backend="inductor")(x)
    out.backward()
    assert torch.allclose(x.grad, torch.cos(torch.ones(3, device="cuda")))


def test_forward_only():
    NeverBackwardCuda.apply(cuda_ones())


def test_triton_op_backward_on_device_thread():
    from tritonlib import double

    x = cuda_ones()
    double(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
