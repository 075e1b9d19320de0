"""Re-creations behind the messages and severities changed for issue 23 (torch 2.13, CPU).

Usage:  python bench/recreate/issue23_messages.py [SUBSTRING ...]

With substrings, only the cases whose names contain one of them run.

Each case prints one line, ``NAME: outcome``; the outcome is the exception type
and the first line of its message, or ``ok``.  ``torch.compile`` runs with its
default backend (inductor), the one the rules' messages name.
"""

from __future__ import annotations

import traceback
import warnings
from typing import Callable

import torch

warnings.filterwarnings("ignore")


def outcome(thunk: Callable[[], object]) -> str:
    try:
        thunk()
    except Exception as error:  # noqa: BLE001 - the point is to show what is raised
        text = str(error).strip().splitlines()
        return f"{type(error).__name__}: {text[0] if text else ''}"
    return "ok"


def fresh(fn: Callable, **options) -> Callable:
    torch._dynamo.reset()
    return torch.compile(fn, **options)


# AGL001: the only output is marked non-differentiable, and backward returns too few gradients.
class Argmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        out = x.argmax(dim).float()
        ctx.mark_non_differentiable(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad  # one gradient for two inputs: never runs


def agl001_non_differentiable_output() -> str:
    x = torch.randn(3, 4, requires_grad=True)
    out = Argmax.apply(x, 1)
    return f"requires_grad={out.requires_grad}; backward: " + outcome(lambda: out.sum().backward())


# AGL153: classmethod forward / setup_context under torch.compile.
class ClassForward(torch.autograd.Function):
    @classmethod
    def forward(cls, ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class ClassSetup(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 2

    @classmethod
    def setup_context(cls, ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * 2


class ClassBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @classmethod
    def backward(cls, ctx, g):
        return g * 2


def compiled(function: type, fullgraph: bool) -> str:
    def f(x):
        return function.apply(x).sin()

    x = torch.randn(4, requires_grad=True)
    return outcome(lambda: fresh(f, fullgraph=fullgraph)(x).sum().backward())


# AGL152: .item() in forward, for a scale and for a value that fixes a shape.
class ItemScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.s = x.sum().item()
        return x * ctx.s

    @staticmethod
    def backward(ctx, g):
        return g * ctx.s


class ItemShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        n = int(x.shape[0] - x.new_ones(()).item())
        ctx.n = n
        return x[:n] * 2

    @staticmethod
    def backward(ctx, g):
        out = g.new_zeros(ctx.n + 1)
        out[: ctx.n] = g * 2
        return out


class ItemTolist(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        sizes = x.tolist()
        ctx.k = len(sizes)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class ItemIntShape(torch.autograd.Function):
    """An integer ``.item()`` that fixes the output's shape (the unbacked size is in the output)."""

    @staticmethod
    def forward(ctx, x):
        n = (x > 0).sum().item()
        ctx.shape = x.shape
        return x.new_ones(n) * 2

    @staticmethod
    def backward(ctx, g):
        return g.sum().expand(ctx.shape) * 0


class TolistInt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        sizes = (x > 0).int().tolist()
        ctx.k = len(sizes)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


# AGL028: the input handed back as output 1, then changed in place.
class PassSecond(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x.view_as(x)

    @staticmethod
    def backward(ctx, g0, g1):
        return g0 * 2 + g1


def agl028_output_index() -> str:
    x = torch.randn(3, requires_grad=True)
    _, b = PassSecond.apply(x.clone())
    return outcome(lambda: b.add_(1))


# AGL106: a custom op returning its input, or a view of it.
@torch.library.custom_op("recreate::ident", mutates_args=())
def ident(x: torch.Tensor) -> torch.Tensor:
    return x


@torch.library.custom_op("recreate::flat", mutates_args=())
def flat(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1)


# AGL009: an input's name rebound before saving (a saved intermediate), and a 0/1 mask saved.
class Sig2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = torch.sigmoid(x)
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x * (1 - x)


class MaskRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        mask = (x > 0).double()
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask


def gradgradcheck(function: type) -> str:
    x = torch.randn(5, dtype=torch.double, requires_grad=True)
    return outcome(lambda: torch.autograd.gradgradcheck(function.apply, (x,)))


# AGL005: a classmethod backward reading saved_tensors twice, under non-reentrant checkpointing.
class Twice(torch.autograd.Function):
    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @classmethod
    def backward(cls, ctx, grad):
        (x,) = ctx.saved_tensors
        (y,) = ctx.saved_tensors
        return grad * x + grad * y


def checkpointed(function: type) -> str:
    from torch.utils.checkpoint import checkpoint

    x = torch.randn(3, requires_grad=True)
    return outcome(lambda: checkpoint(function.apply, x, use_reentrant=False).sum().backward())


# AGL008: writing a mask into the input through .detach().
class DetachMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        mask = x.detach().apply_(lambda v: v > 0)
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask


def agl008_detach() -> str:
    w = torch.tensor([-1.0, 2.0, -3.0], requires_grad=True)
    a = w * 1
    DetachMask.apply(a)
    b = w.exp()
    DetachMask.apply(b).sum().backward()
    return f"caller's input after: {a.tolist()}; w.grad through exp: {w.grad.tolist()} (correct: exp(w))"


# AGL034: gradients bound only under needs_input_grad guards, returned unguarded.
class GuardedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            grad_x = grad @ w
        if ctx.needs_input_grad[1]:
            grad_w = grad.t() @ x
        return grad_x, grad_w


def agl034_unbound() -> str:
    x, w = torch.randn(2, 3), torch.randn(4, 3, requires_grad=True)
    return outcome(lambda: GuardedLinear.apply(x, w).sum().backward())


# AGL035: forward returns early, before save_for_backward.
class EarlyMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        if x.numel() == 0:
            return x.clone()
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, grad * x


def agl035_early_return() -> str:
    x, w = torch.randn(0, requires_grad=True), torch.randn(0, requires_grad=True)
    return outcome(lambda: EarlyMul.apply(x, w).sum().backward())


# AGL003: an (extension's) output list kept on ctx holds the returned tensor.
class OutputList(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        outputs = [x * 2, x * 3]
        ctx.outputs = outputs
        return outputs[0]

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def agl003_output_list() -> str:
    import gc
    import weakref

    enabled = gc.isenabled()
    gc.disable()
    try:
        y = OutputList.apply(torch.randn(3, requires_grad=True))
        ref = weakref.ref(y)
        del y
        after_del = ref() is not None
        gc.collect()
        return f"output alive after del: {after_del}; after gc.collect(): {ref() is not None}"
    finally:
        if enabled:
            gc.enable()


CASES: dict[str, Callable[[], str]] = {
    "AGL003 output list kept on ctx": agl003_output_list,
    "AGL035 early return before save, empty input": agl035_early_return,
    "AGL034 guarded gradient returned unguarded, x without grad": agl034_unbound,
    "AGL009 rebound input saved, gradgradcheck": lambda: gradgradcheck(Sig2),
    "AGL009 0/1 mask saved, gradgradcheck": lambda: gradgradcheck(MaskRelu),
    "AGL005 classmethod backward reads saved_tensors twice, checkpoint": lambda: checkpointed(Twice),
    "AGL008 write through .detach()": agl008_detach,
    "AGL001 only output non-differentiable": agl001_non_differentiable_output,
    "AGL153 classmethod forward, compile": lambda: compiled(ClassForward, False),
    "AGL153 classmethod forward, fullgraph": lambda: compiled(ClassForward, True),
    "AGL153 classmethod setup_context, compile": lambda: compiled(ClassSetup, False),
    "AGL153 classmethod setup_context, fullgraph": lambda: compiled(ClassSetup, True),
    "AGL153 classmethod backward, compile": lambda: compiled(ClassBackward, False),
    "AGL153 classmethod backward, fullgraph": lambda: compiled(ClassBackward, True),
    "AGL152 .item() scale, compile": lambda: compiled(ItemScale, False),
    "AGL152 .item() scale, fullgraph": lambda: compiled(ItemScale, True),
    "AGL152 .item() shape, compile": lambda: compiled(ItemShape, False),
    "AGL152 .item() shape, fullgraph": lambda: compiled(ItemShape, True),
    "AGL152 integer .item() fixing the output shape, compile": lambda: compiled(ItemIntShape, False),
    "AGL152 integer .item() fixing the output shape, fullgraph": lambda: compiled(ItemIntShape, True),
    "AGL152 integer .tolist(), fullgraph": lambda: compiled(TolistInt, True),
    "AGL152 .tolist(), compile": lambda: compiled(ItemTolist, False),
    "AGL152 .tolist(), fullgraph": lambda: compiled(ItemTolist, True),
    "AGL028 in-place on output 1": agl028_output_index,
    "AGL106 returns input": lambda: outcome(lambda: ident(torch.randn(3))),
    "AGL106 returns a view": lambda: outcome(lambda: flat(torch.randn(3))),
}


if __name__ == "__main__":
    import sys

    print(f"torch {torch.__version__}")
    for name, case in CASES.items():
        if sys.argv[1:] and not any(part in name for part in sys.argv[1:]):
            continue
        try:
            print(f"{name}: {case()}", flush=True)
        except Exception:  # noqa: BLE001
            print(f"{name}: harness failed\n{traceback.format_exc()}", flush=True)
