"""AGL006: backward arity does not match the number of forward outputs."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules._common import only_raises, plural
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)


class BackwardArity(Rule):
    """Checks that ``backward`` (or ``vjp``) accepts one gradient per forward output:
    with the output count known (every forward ``return`` is a tuple literal of the
    same length, or a single tensor), the grad parameters after ctx must not require
    more arguments than there are outputs, nor accept fewer.  Outputs passed to
    ``mark_non_differentiable`` and non-tensor outputs still get an argument
    (``None``).  With ``boxed_grads_call = True`` the grads arrive as one list, so
    backward must take exactly ``(ctx, grads)``.  Signatures with ``*args`` are skipped,
    and so is a backward that only raises (``raise NotImplementedError``): it raises either
    way, and the TypeError changes nothing a user meets."""

    code = "AGL006"
    title = "backward arity does not match the number of forward outputs"
    severity = Severity.ERROR
    why = (
        "Too few parameters: `TypeError: F.backward() takes 2 positional arguments but 3 were "
        "given`. Too many: `TypeError: F.backward() missing 1 required positional argument: "
        "'g2'`. With `boxed_grads_call = True` and `(ctx, g1, g2)`: the same `missing 1 required "
        "positional argument: 'g2'`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            if method is None or method.has_var_positional or only_raises(method.node):
                continue
            grads = method.positional[1:]
            required = sum(1 for p in grads if p.is_required_positional)
            boxed = function.attribute("boxed_grads_call")
            if boxed is not None and boxed.text not in ("True", "False"):
                continue  # the calling convention is unknown
            if function.attribute_is_true("boxed_grads_call"):
                if required > 1 or not grads:
                    yield Report(
                        method.position,
                        f"{function.name}.{name} takes {plural(len(grads), 'gradient parameter')}"
                        f"{'' if required == len(grads) else f' ({required} required)'}, but "
                        "boxed_grads_call = True passes all gradients as one list: use "
                        f"{name}(ctx, grads)",
                    )
                continue
            n_outputs = function.n_outputs  # a torch call that may give a tuple (topk) is not counted
            if n_outputs is None:
                continue
            if required > n_outputs:
                yield Report(
                    method.position,
                    f"{function.name}.{name} requires {plural(required, 'gradient')}, but "
                    f"forward returns {plural(n_outputs, 'output')}",
                )
            elif len(grads) < n_outputs:
                yield Report(
                    method.position,
                    f"{function.name}.{name} takes {plural(len(grads), 'gradient')}, but "
                    f"forward returns {plural(n_outputs, 'output')} and each gets one "
                    "(None for non-differentiable ones)",
                )

    VALID = [
        # A backward written to refuse: it raises whatever the arity.
        Valid(
            """
            import torch

            class NotDifferentiable(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, grad):
                    raise NotImplementedError("no backward")
            """
        ),
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    idx = x.argmax()
                    ctx.mark_non_differentiable(idx)
                    return x * 2, idx

                @staticmethod
                def backward(ctx, g_out, g_idx):
                    return g_out * 2
            """
        ),
        # Trap 3: *grad_outputs accepts any number of gradients.
        Valid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, *grad_outputs):
                    return grad_outputs[0] * 2 + grad_outputs[1] * 3
            """
        ),
        # Trap 4: outputs that differ per branch make the count unknown; a
        # defaulted parameter can take an optional output's gradient.
        Valid(
            """
            import torch

            class Maybe(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, with_state):
                    if with_state:
                        return x * 2, x.sum()
                    return x * 2

                @staticmethod
                def backward(ctx, grad, g_state=None):
                    return grad * 2, None
            """
        ),
        # Trap 4: a torch call that returns a tuple is not one output.
        Valid(
            """
            import torch

            class Sort(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out = torch.sort(x)
                    return out

                @staticmethod
                def backward(ctx, g_values, g_indices):
                    return g_values
            """
        ),
        # Trap 5: forward in the base class, backward in the subclass; boxed grads.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x + y, x - y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

            class Sub(Base):
                @staticmethod
                def backward(ctx, g_sum, g_diff):
                    return g_sum + g_diff, g_sum - g_diff

            class Boxed(Base):
                boxed_grads_call = True

                @staticmethod
                def backward(ctx, grads):
                    g_sum, g_diff = grads
                    grads.clear()
                    return g_sum + g_diff, g_sum - g_diff
            """
        ),
        # Positional-only parameters (`/`): one gradient per output.
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, /):
                    return x.clone(), x.clone()

                @staticmethod
                def backward(ctx, grad_a, grad_b, /):
                    return grad_a + grad_b
            """,
        ),
        # A generic Function with a generic `type` alias (Python 3.12+).
        Valid(
            """
            import torch

            type Pair[T] = tuple[T, T]

            class Split[T: torch.Tensor](torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: T) -> Pair[T]:
                    return x.clone(), x.clone()

                @staticmethod
                def backward(ctx, grad_a, grad_b):
                    return grad_a + grad_b
            """,
            min_python=(3, 12),
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """,
            line=9,
            message="Pair.backward takes 1 gradient, but forward returns 2 outputs",
        ),
        Invalid(
            """
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, grad, g2):
                    (x,) = ctx.saved_tensors
                    return 2 * x * grad
            """,
            line=10,
            message="Square.backward requires 2 gradients, but forward returns 1 output",
        ),
        # mark_non_differentiable does not remove the output's gradient argument.
        Invalid(
            """
            from torch.autograd import Function

            class ArgMax(Function):
                @staticmethod
                def forward(ctx, x):
                    idx = x.argmax()
                    ctx.mark_non_differentiable(idx)
                    return x.max(), idx

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=11,
            message="forward returns 2 outputs",
        ),
        Invalid(
            """
            import torch

            class Boxed(torch.autograd.Function):
                boxed_grads_call = True

                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, g1, g2):
                    return g1 * 2 + g2 * 3
            """,
            line=11,
            # Both gradients required: no "(N required)" aside.
            message="Boxed.backward takes 2 gradient parameters, but boxed_grads_call = True passes all gradients "
            "as one list",
        ),
        # Positional-only parameters (`/`) in forward and backward.
        Invalid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, /):
                    return x.clone(), x.clone()

                @staticmethod
                def backward(ctx, grad, /):
                    return grad
            """,
            line=9,
            message="Split.backward takes 1 gradient, but forward returns 2 outputs",
        ),
        # A generic Function with a generic `type` alias (Python 3.12+).
        Invalid(
            """
            import torch

            type Pair[T] = tuple[T, T]

            class Split[T: torch.Tensor](torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: T) -> Pair[T]:
                    return x.clone(), x.clone()

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=11,
            message="Split.backward takes 1 gradient, but forward returns 2 outputs",
            min_python=(3, 12),
        ),
    ]
