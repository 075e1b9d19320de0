"""AGL101: a register_autograd backward returns fewer gradients than the op has positional parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from autograd_lint.rules._common import plural
from autograd_lint.rules._custom_ops import gradient_counts, registrations
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class CustomOpGradientCount(Rule):
    """Reports a backward registered with ``register_autograd`` whose every ``return`` gives
    fewer gradients than the op has positional parameters (defaults included; a trailing
    ``*((None,) * k)`` counts k).  Keyword-only parameters need no gradient, and extra
    trailing values are accepted, so only too few is reported."""

    code = "AGL101"
    title = "register_autograd backward returns too few gradients"
    severity = Severity.ERROR
    why = (
        "PyTorch drops trailing arguments equal to their defaults before the hidden Function's apply, so a "
        "short backward works until a caller passes a non-default value for a trailing argument: "
        "`RuntimeError: function GeneratedBackwardFor_ns_op_defaultBackward returned an incorrect number of "
        "gradients (expected 4, got 3)`.  With fewer gradients than required parameters it fails on every "
        "backward."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op, registration in registrations(analysis, "autograd"):
            backward = registration.function
            if backward is None or any(p.kind.value == "*args" for p in op.params):
                continue
            counts = gradient_counts(backward)
            expected = len(op.positional)
            if not counts or max(counts) >= expected:
                continue
            required = sum(1 for p in op.positional if p.default is None)
            when = (
                "on every backward"
                if max(counts) < required
                else "as soon as a caller passes a non-default value for "
                + ", ".join(f"`{p.name}`" for p in op.positional[max(counts):])
            )
            yield Report(
                registration.position,
                f"backward `{backward.name}` for {op.display} returns {plural(max(counts), 'gradient')} but the op "
                f"has {plural(expected, 'positional parameter')} ({', '.join(p.name for p in op.positional)}): "
                f"RuntimeError 'returned an incorrect number of gradients' {when}",
            )

    VALID = [
        # One input, one gradient: `2 * grad` is a tensor, whatever its left operand is.
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::double", mutates_args=())
            def double(x: Tensor) -> Tensor:
                return x * 2

            def backward(ctx, grad):
                return 2 * grad

            double.register_autograd(backward)
            """
        ),
        # A negated gradient is one tensor too.
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::neg", mutates_args=())
            def neg(x: Tensor) -> Tensor:
                return -x

            def backward(ctx, grad):
                return -grad

            neg.register_autograd(backward)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, a: float = 1.0, b: bool = False) -> Tensor:
                return x * a

            def backward(ctx, grad):
                return grad * ctx.a, None, None

            def setup_context(ctx, inputs, output):
                ctx.a = inputs[1]

            scale.register_autograd(backward, setup_context=setup_context)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::pad", mutates_args=())
            def pad(x: Tensor, a: int = 0, b: int = 0, c: int = 0) -> Tensor:
                return x.clone()

            def backward(ctx, grad):
                return grad, *((None,) * 3)

            pad.register_autograd(backward)
            """
        ),
        # Keyword-only parameters need no gradient.
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::kw", mutates_args=())
            def kw(x: Tensor, *, val: float = 1.0) -> Tensor:
                return x * val

            kw.register_autograd(lambda ctx, g: g * 2.0)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, a: float = 1.0, b: bool = False, c: int = 0) -> Tensor:
                return x * a

            def setup_context(ctx, inputs, output):
                ctx.a = inputs[1]

            def backward(ctx, grad):
                return grad * ctx.a, None

            scale.register_autograd(backward, setup_context=setup_context)
            """,
            line=14,
            message="non-default value for `b`, `c`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, w: Tensor) -> Tensor:
                return x * w

            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(*inputs)

            def backward(ctx, grad):
                x, w = ctx.saved_tensors
                return grad * w

            torch.library.register_autograd("demo::mul", backward, setup_context=setup_context)
            """,
            line=15,
            message="on every backward",
        ),
        Invalid(
            """
            from torch import Tensor
            from torch.library import custom_op

            @custom_op("demo::pad", mutates_args=())
            def pad(x: Tensor, a: int = 0, b: int = 0, c: int = 0) -> Tensor:
                return x.clone()

            pad.register_autograd(lambda ctx, g: (g, *((None,) * 2)))
            """,
            line=8,
            message="returns 3 gradients",
        ),
    ]
