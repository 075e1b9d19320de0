"""AGL008: forward mutates an input in place without ``ctx.mark_dirty``."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.model.flow import inplace_writes, method_body, passed_to_call
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import Kind, MethodSpec

# InplaceWrite.how values of writes that mutate a tensor only when the name is one:
# on a list or dict `x[k] = v` is an item assignment, on a number `x += 1` rebinds.
_TENSOR_ONLY_WRITES = frozenset({"[...] =", "[...] op="})


# `x.set_(y)` swaps x's storage for y's: a deliberate re-pointing of a placeholder
# (dynamo's TracableCreateParameter, FSDP), never a forgotten mark_dirty; marking
# a leaf that requires grad would even raise.
_STORAGE_SWAP = "set_()"


def _is_tensor_only_write(how: str) -> bool:
    return how in _TENSOR_ONLY_WRITES or not (how.endswith("()") or how == "out=")


def _passes_ctx(method: MethodSpec) -> bool:
    """Whether ``method`` hands its ctx to another call (which may call mark_dirty)."""
    if method.node is None or method.ctx_name is None:
        return True
    return passed_to_call(method.node, method.ctx_name)


class InputMutatedWithoutMarkDirty(Rule):
    """Reports the first in-place write (``x.add_(...)``, ``x[...] = ...``,
    ``x += ...``, ``out=x``, ``torch.<op>_(x)``, also through a view of ``x``) to
    each forward input that has not been rebound (``x = x.clone()``) when no
    ``ctx.mark_dirty(...)`` names it.  Item assignment and augmented assignment
    count only on names known to be tensors; a storage swap (``x.set_(y)``) does
    not count.  The rule stays silent when it can't
    tell what is marked: mark_dirty called in setup_context (split style) or with
    something other than input names, or ctx handed to a helper."""

    code = "AGL008"
    title = "forward mutates an input in place without ctx.mark_dirty"
    severity = Severity.ERROR
    why = (
        "Silently wrong gradients: when the caller keeps using the original tensor the "
        "custom backward is skipped for it (`a0.grad` 1.0, correct 2.0); a write that bumps "
        "no version (numpy, an extension) corrupts earlier consumers' gradients (8.0, correct "
        "6.0). With an earlier consumer and a torch op: `RuntimeError: one of the variables "
        "needed for gradient computation has been modified by an inplace operation`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        forward = function.method("forward")
        split = function.is_split_style
        if forward is None or not ctx.own(forward) or forward.node is None or split is None:
            return
        skip = 0 if split else (2 if forward.is_classmethod else 1)
        inputs = {p.name for p in forward.positional[skip:]}
        marked = self._marked(function.method("setup_context") if split else forward, inputs)
        if marked is None:
            return
        tracked = {
            name for name in inputs - marked if forward.param_kinds.get(name) is not Kind.NON_TENSOR
        }
        writes = inplace_writes(method_body(forward.node), tracked, ctx.analysis.imports, lambda name: True)
        reported: set[str] = set()
        for write in writes:
            if write.name in reported or write.how == _STORAGE_SWAP:
                continue
            if _is_tensor_only_write(write.how) and forward.param_kinds.get(write.name) is not Kind.TENSOR:
                continue
            reported.add(write.name)
            yield Report(
                ctx.position(forward, write.node),
                f"{function.name}.forward writes its input `{write.name}` in place ({write.how}) "
                f"but never calls ctx.mark_dirty({write.name})",
            )

    @staticmethod
    def _marked(method: MethodSpec | None, inputs: set[str]) -> set[str] | None:
        """The inputs ``method`` passes to mark_dirty; ``None`` when that can't be told."""
        if method is None or _passes_ctx(method):
            return None
        marked: set[str] = set()
        for call in method.calls("mark_dirty"):
            if call.has_starred or method.name == "setup_context":
                return None  # setup_context names differ from forward's
            for arg in call.args:
                if arg.name not in inputs:
                    return None  # an alias (`out = x.add_(1)`), not mapped to an input
                marked.add(arg.name)
        return marked

    VALID = [
        Valid(
            """
            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.mark_dirty(x)
                    x.add_(1)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """
        ),
        # Trap 12: rebinding to a clone, buffers made in forward, requires_grad_().
        Valid(
            """
            import torch

            class Relu(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    x = x.clone()
                    x.clamp_(min=0)
                    out = torch.empty_like(y)
                    out.copy_(y)
                    out[out < 0] = 0
                    y.detach().requires_grad_()
                    return x, out

                @staticmethod
                def backward(ctx, gx, gy):
                    return gx, gy
            """
        ),
        # `+=` and item assignment on inputs not known to be tensors (a count, a dict).
        Valid(
            """
            import torch

            class Counted(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, step, cache: dict):
                    step += 1
                    cache["x"] = x
                    return x * step

                @staticmethod
                def backward(ctx, grad):
                    return grad, None, None
            """
        ),
        # Trap 5: split style marks the input in setup_context, under another name.
        Valid(
            """
            import torch

            class Exp_(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    x.exp_()
                    return x

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.mark_dirty(x)
                    ctx.save_for_backward(output)

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y
            """
        ),
        # mark_dirty given an alias of the input: which input it is can't be told.
        Valid(
            """
            import torch

            class Scale_(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out = x.mul_(2)
                    ctx.mark_dirty(out)
                    return out

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """
        ),
        # A storage swap on a sacrificial placeholder (dynamo's TracableCreateParameter).
        Valid(
            """
            import torch

            class CreateParameter(torch.autograd.Function):
                @staticmethod
                def forward(ctx, tensor, placeholder):
                    return placeholder.set_(tensor.detach())

                @staticmethod
                def backward(ctx, grad):
                    return None, grad
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    x.add_(1)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=6,
            message="AddOne.forward writes its input `x` in place (add_()) but never calls ctx.mark_dirty(x)",
        ),
        Invalid(
            """
            import torch

            class Update(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    ctx.mark_dirty(x)
                    x.add_(y)
                    flat = y.view(-1)
                    flat[0] = 0
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad, None
            """,
            line=9,
            message="input `y` in place ([...] =)",
        ),
        Invalid(
            """
            import torch

            class Accumulate(torch.autograd.Function):
                @staticmethod
                def forward(acc: torch.Tensor, x):
                    acc += x
                    return acc.clone()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad
            """,
            line=6,
            message="`acc` in place (AddAssign)",
        ),
        Invalid(
            """
            import torch

            class Sigmoid(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    torch.sigmoid(x, out=x)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=6,
            message="(out=)",
        ),
    ]
