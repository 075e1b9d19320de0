"""Custom ops whose registered backward the per-Function report lists, with its lines."""

import torch


@torch.library.custom_op("covlib::scale", mutates_args=())
def scale(x: torch.Tensor, s: float = 2.0) -> torch.Tensor:
    return x * s


def scale_setup(ctx, inputs, output):
    x, s = inputs  # mark: scale_setup
    ctx.s = s  # mark: scale_setup


def scale_backward(ctx, grad):
    if ctx.s == 0:  # mark: scale_backward
        return None, None  # mark: scale_backward_missing
    return grad * ctx.s, None  # mark: scale_backward


scale.register_autograd(scale_backward, setup_context=scale_setup)


@torch.library.custom_op("covlib::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x ** 3


@torch.library.custom_op("covlib::never", mutates_args=())
def never(x: torch.Tensor) -> torch.Tensor:
    return x * 3


def never_backward(ctx, grad):
    return grad * 3  # mark: never_backward_missing


torch.library.register_autograd("covlib::never", never_backward)


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2
