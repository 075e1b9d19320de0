"""AGL115: the autograd.Function rules, applied to a custom op's registered backward and setup_context."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.custom_ops import CustomOpSpec, Registration, hidden_function
from autograd_lint.model.extract import ParsedUnit
from autograd_lint.rules._custom_ops import calls_in, is_non_tensor_annotation, registrations
from autograd_lint.rules.agl003_ctx_tensor_attribute import CtxTensorAttribute
from autograd_lint.rules.agl004_non_tensor_ctx_api_argument import NonTensorCtxApiArgument
from autograd_lint.rules.agl014_gradient_for_non_tensor import GradientForNonTensor
from autograd_lint.rules.agl016_container_return import ContainerReturn
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

# The Function rules that hold for the hidden Function PyTorch builds per op.
_CARRIED = (CtxTensorAttribute, NonTensorCtxApiArgument, GradientForNonTensor, ContainerReturn)


class AutogradFunctionRulesForOps(Rule):
    """Runs the ``autograd.Function`` rules that hold for the Function PyTorch builds for a
    custom op (AGL003 tensor on a ctx attribute, AGL004 non-tensor passed to a ctx API,
    AGL014 gradient for a non-Tensor parameter, AGL016 list returned from backward) on the
    ``backward`` and ``setup_context`` handed to ``register_autograd``, and reports
    ``ctx.save_for_backward(*inputs)`` when the op has a non-Tensor positional parameter."""

    code = "AGL115"
    title = "register_autograd backward or setup_context breaks an autograd.Function rule"
    severity = Severity.ERROR
    why = (
        "PyTorch runs the registered functions as the methods of a hidden autograd.Function, so they fail "
        "as a Function's would: `TypeError: save_for_backward can only save variables, but argument 1 is of "
        "type float`; `RuntimeError: function GeneratedBackwardFor_ns_op_defaultBackward returned a gradient "
        "different than None at position 2, but the corresponding forward input was not a Variable`; a list "
        "returned gives `returned an incorrect number of gradients (expected 3, got 2)`."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        unit = analysis.custom_ops.unit if analysis.custom_ops else None
        for op, registration in registrations(analysis, "autograd"):
            spec = hidden_function(op, registration)
            if spec is None or spec.method("backward") is None or unit is None:
                continue
            view = replace(analysis, units={**analysis.units, spec.qualname: unit}, functions=[spec])
            context = FunctionContext(spec, view, settings)
            for rule in _CARRIED:
                for report in rule().check_function(context):
                    yield replace(report, message=f"{report.message} [{rule.code}]", severity=report.severity or rule.severity)
            yield from _saved_inputs(op, registration, unit)

    VALID = [
        # Only the tensor inputs saved, unpacked from a tuple of their own: not `*inputs`.
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, factor: float) -> Tensor:
                return x * factor

            def setup_context(ctx, inputs, output):
                x, factor = inputs
                tensors = (x,)
                ctx.save_for_backward(*tensors)
                ctx.factor = factor

            def backward(ctx, grad):
                return grad * ctx.factor, None

            scale.register_autograd(backward, setup_context=setup_context)
            """
        ),
        Valid(
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
                return grad * w, grad * x

            mul.register_autograd(backward, setup_context=setup_context)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, n: int) -> Tensor:
                return x * n

            def setup_context(ctx, inputs, output):
                ctx.n = inputs[1]

            def backward(ctx, grad):
                return grad * ctx.n, None

            scale.register_autograd(backward, setup_context=setup_context)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                x, y = inputs
                ctx.save_for_backward(x)
                ctx.y = y

            def backward(ctx, grad):
                return grad * ctx.y, None

            scale.register_autograd(backward, setup_context=setup_context)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(*inputs)

            def backward(ctx, grad):
                return grad, None

            scale.register_autograd(backward, setup_context=setup_context)
            """,
            line=9,
            message="saves *inputs, which holds `y: float`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, n: int) -> Tensor:
                return x * n

            def setup_context(ctx, inputs, output):
                ctx.n = inputs[1]

            def backward(ctx, grad):
                return grad * ctx.n, grad

            scale.register_autograd(backward, setup_context=setup_context)
            """,
            line=12,
            message="[AGL014]",
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
                return [grad * w, grad * x]

            mul.register_autograd(backward, setup_context=setup_context)
            """,
            line=13,
            message="[AGL016]",
        ),
    ]


def _saved_inputs(op: CustomOpSpec, registration: Registration, unit: ParsedUnit) -> Iterator[Report]:
    """``ctx.save_for_backward(*inputs)`` in setup_context when the op has a non-Tensor positional parameter."""
    setup = registration.setup_context
    non_tensors = [p for p in op.positional if is_non_tensor_annotation(p.annotation)]
    if setup is None or setup.node is None or not non_tensors:
        return
    for call in calls_in(setup.node):
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "save_for_backward"
            and any(a.star == "*" and isinstance(a.value, cst.Name) and a.value.value == "inputs" for a in call.args)
        ):
            first = non_tensors[0]
            yield Report(
                unit.position(call),
                f"setup_context `{setup.name}` of {op.display} saves *inputs, which holds `{first.name}: "
                f"{first.annotation}`: TypeError 'save_for_backward can only save variables' at the first "
                "differentiable call; save the tensors only",
            )
