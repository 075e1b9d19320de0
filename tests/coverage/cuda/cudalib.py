"""Functions, hooks and ops whose backward the autograd engine runs on a CUDA device thread."""

import torch


class CudaSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # mark: square-fwd
        return x * x  # mark: square-fwd

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors  # mark: square-bwd
        return 2 * x * grad  # mark: square-bwd


class CudaCube(torch.autograd.Function):
    """Run by a second test: does the device thread keep its tracer between backward calls?"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors  # mark: cube-bwd
        return 3 * x ** 2 * grad  # mark: cube-bwd


class SingleThreaded(torch.autograd.Function):
    """Run with torch.autograd.set_multithreading_enabled(False): the calling thread runs backward."""

    @staticmethod
    def forward(ctx, x):
        return x * 5

    @staticmethod
    def backward(ctx, grad):
        return grad * 5  # mark: single-bwd


class CompiledCuda(torch.autograd.Function):
    """Traced by torch.compile (inductor, Triton kernels) on CUDA tensors."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # mark: compiled-fwd
        return torch.sin(x)  # mark: compiled-fwd

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors  # mark: compiled-bwd
        return torch.cos(x) * grad  # mark: compiled-bwd


class NeverBackwardCuda(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + 1

    @staticmethod
    def backward(ctx, grad):
        return grad  # mark: never-bwd


def cuda_hook(grad):
    return grad * 2  # mark: cuda-hook


@torch.library.custom_op("agl_cuda::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@scale.register_fake
def _(x):
    return torch.empty_like(x)


def scale_setup(ctx, inputs, output):
    pass


def scale_backward(ctx, grad):
    return grad * 3  # mark: op-bwd


scale.register_autograd(scale_backward, setup_context=scale_setup)
