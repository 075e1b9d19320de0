"""AGL116: an autograd.Function is applied inside a custom op's implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.exprs import dotted_name
from autograd_lint.rules._custom_ops import calls_in, own_ops
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class FunctionApplyInOp(Rule):
    """Reports ``SomeFunction.apply(...)``, for a Function defined in the same file, in the
    body of a ``custom_op`` or of a kernel registered on it, when no ``register_autograd``
    for the op exists in the run (so, like AGL110, only ``autograd-lint check`` decides it).  The op is opaque to autograd: the Function's backward
    is never used."""

    code = "AGL116"
    title = "autograd.Function applied inside a custom op"
    severity = Severity.ERROR
    why = (
        "PyTorch's custom-op tutorial names this composition a source of silent incorrectness. On torch "
        "2.13 a backward through the op raises `RuntimeError: Trying to backward through ns::op but no "
        "autograd formula was registered`, and `opcheck` fails in `test_aot_dispatch_dynamic`. Register the "
        "gradient with `register_autograd` instead."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        module = analysis.custom_ops
        # Whether a register_autograd exists can only be said from the whole run (not under flake8).
        if module is None or not analysis.functions or not module.whole_run or module.has_unresolved_registration:
            return
        functions = {f.qualname: f for f in analysis.functions}
        for op in own_ops(analysis):
            if op.registered("autograd"):
                continue
            bodies = [op.body] + [r.function.method for r in op.registered("kernel") if r.function]
            for body in bodies:
                if body is None or not isinstance(body.node, cst.FunctionDef) or body.path != op.path:
                    continue
                for call in calls_in(body.node):
                    func = call.func
                    if not (isinstance(func, cst.Attribute) and func.attr.value == "apply"):
                        continue
                    name = dotted_name(func.value)
                    if name in functions:
                        yield Report(
                            module.unit.position(call),
                            f"{op.display} applies autograd.Function `{name}` in its implementation, and no "
                            "register_autograd exists for the op: backward through the op raises 'no autograd "
                            "formula was registered'; register the gradient with register_autograd",
                        )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2

            @torch.library.custom_op("demo::double", mutates_args=())
            def double(x: Tensor) -> Tensor:
                return x * 2

            double.register_autograd(lambda ctx, g: g * 2)

            def use(x):
                return Double.apply(x) + double(x)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::double", mutates_args=())
            def double(x: Tensor) -> Tensor:
                return x * 2

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return double(x)

                @staticmethod
                def backward(ctx, g):
                    return g * 2
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2

            @torch.library.custom_op("demo::double", mutates_args=())
            def double(x: Tensor) -> Tensor:
                return Double.apply(x)

            torch.library.register_autograd("demo::double", lambda ctx, g: g * 2)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2

            @torch.library.custom_op("demo::double", mutates_args=())
            def double(x: Tensor) -> Tensor:
                return Double.apply(x)
            """,
            line=15,
            message="applies autograd.Function `Double`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, s):
                    ctx.s = s
                    return x * s

                @staticmethod
                def backward(ctx, g):
                    return g * ctx.s, None

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, s: float) -> Tensor:
                y = Scale.apply(x, s)
                return y.clone()

            @scale.register_fake
            def _(x, s):
                return torch.empty_like(x)
            """,
            line=16,
            message="`Scale`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2

            @torch.library.custom_op("demo::double", mutates_args=(), device_types="cuda")
            def double(x: Tensor) -> Tensor:
                return x * 2

            @double.register_kernel("cpu")
            def _(x):
                return Double.apply(x)
            """,
            line=19,
            message="demo::double applies autograd.Function `Double`",
        ),
    ]
