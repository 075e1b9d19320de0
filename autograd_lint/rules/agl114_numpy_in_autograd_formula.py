"""AGL114: a custom op's backward or setup_context calls NumPy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.exprs import dotted_name
from autograd_lint.rules._custom_ops import calls_in, gradient_names, registrations
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class NumpyInAutogradFormula(Rule):
    """Reports a call of ``.numpy()`` in a ``backward`` or ``setup_context`` handed to
    ``register_autograd``, and a ``numpy`` function called on a backward's gradient
    argument (NumPy on Python numbers, such as shapes, is fine).  (``.item()`` is not reported:
    measured on torch 2.13 it compiled and was right in a backward, and in a
    ``setup_context`` it failed for float32 but not float64.)"""

    code = "AGL114"
    title = "register_autograd formula calls NumPy"
    severity = Severity.WARNING
    why = (
        "Eager is fine, but torch.compile traces the autograd formula with FakeTensors: "
        "`BackendCompilerFailed: backend='aot_eager' raised: RuntimeError: .numpy() is not supported for tensor "
        "subclasses.` The op can't be used in a compiled model that needs its gradient."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        unit = analysis.custom_ops.unit if analysis.custom_ops else None
        for op, registration in registrations(analysis, "autograd"):
            for role, function in (("backward", registration.function), ("setup_context", registration.setup_context)):
                if function is None or function.node is None:
                    continue
                gradients = gradient_names(function) if role == "backward" else frozenset()
                for call in calls_in(function.node):
                    name = dotted_name(call.func)
                    qualified = analysis.imports.resolve(name) if name else None
                    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "numpy" and not call.args:
                        what = "`.numpy()`"
                    elif (
                        qualified is not None
                        and (qualified == "numpy" or qualified.startswith("numpy."))
                        and any(isinstance(a.value, cst.Name) and a.value.value in gradients for a in call.args)
                    ):
                        what = f"`{name}()` on a gradient"
                    else:
                        continue
                    yield Report(
                        unit.position(call),
                        f"{role} `{function.name}` of {op.display} calls {what}: torch.compile fails on it "
                        "(BackendCompilerFailed: .numpy() is not supported); compute it with torch",
                    )
                    break

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(inputs[0])

            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * x.cos()

            sin.register_autograd(backward, setup_context=setup_context)
            """
        ),
        # NumPy in the op itself is opaque to the compiler: fine.
        Valid(
            """
            import numpy as np
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::npsin", mutates_args=())
            def npsin(x: Tensor) -> Tensor:
                return torch.from_numpy(np.sin(x.numpy()))

            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * torch.cos(x)

            npsin.register_autograd(backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]))
            """
        ),
        # NumPy on Python numbers (shapes) traces fine: PyTorch's own custom_op_db does it.
        Valid(
            """
            import numpy as np
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::cat", mutates_args=())
            def cat(xs: list[Tensor], dim: int) -> Tensor:
                return torch.cat(xs, dim)

            def setup_context(ctx, inputs, output):
                xs, dim = inputs
                ctx.sizes = [x.shape[dim] for x in xs]
                ctx.dim = dim

            def backward(ctx, grad):
                splits = list(np.cumsum(ctx.sizes)[:-1])
                return list(torch.tensor_split(grad, splits, ctx.dim)), None

            cat.register_autograd(backward, setup_context=setup_context)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import numpy as np
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::npsin", mutates_args=())
            def npsin(x: Tensor) -> Tensor:
                return torch.from_numpy(np.sin(x.detach().numpy()))

            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(inputs[0])

            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * torch.from_numpy(np.cos(x.detach().numpy()))

            npsin.register_autograd(backward, setup_context=setup_context)
            """,
            line=14,
            message="backward `backward` of demo::npsin calls `.numpy()`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, s: Tensor) -> Tensor:
                return x * s

            def setup_context(ctx, inputs, output):
                ctx.s = float(inputs[1].numpy())

            scale.register_autograd(lambda ctx, g: (g * ctx.s, None), setup_context=setup_context)
            """,
            line=9,
            message="setup_context `setup_context`",
        ),
        Invalid(
            """
            import numpy
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::clip", mutates_args=())
            def clip(x: Tensor) -> Tensor:
                return x.clamp(-1, 1)

            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return torch.as_tensor(numpy.where(numpy.abs(x.detach().cpu().numpy()) <= 1, numpy.asarray(g), 0))

            torch.library.register_autograd(
                "demo::clip", backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0])
            )
            """,
            line=11,
            message="`.numpy()`",
        ),
    ]
