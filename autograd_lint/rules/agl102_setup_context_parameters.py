"""AGL102: a custom op's setup_context does not take ``ctx, inputs, output`` by those names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.rules._custom_ops import registrations
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


def _signature(node: cst.FunctionDef | cst.Lambda) -> tuple[list[str], list[str], list[str], bool]:
    """(names that take keywords, required names, positional-only names, has **kwargs)."""
    params = node.params
    keywordable = [p.name.value for p in (*params.params, *params.kwonly_params)]
    required = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.default is None]
    positional_only = [p.name.value for p in params.posonly_params]
    return keywordable, required, positional_only, params.star_kwarg is not None


class SetupContextParameters(Rule):
    """Reports a ``setup_context`` handed to ``register_autograd`` whose parameters are not
    ``ctx``, ``inputs`` and ``output`` (plus ``keyword_only_inputs`` when the op has
    keyword-only parameters), in any order.  PyTorch calls it by keyword; an
    ``autograd.Function``'s setup_context is called positionally, so code moved from one
    to the other breaks."""

    code = "AGL102"
    title = "setup_context parameters are not ctx, inputs, output"
    severity = Severity.ERROR
    why = (
        "The hidden Function calls `setup_context(ctx=ctx, inputs=inputs, output=output)` (and "
        "`keyword_only_inputs=` for an op with keyword-only parameters), so a renamed parameter fails at "
        "the first differentiable call: `TypeError: sc() got an unexpected keyword argument 'inputs'`."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op, registration in registrations(analysis, "autograd"):
            setup = registration.setup_context
            if setup is None or not isinstance(setup.node, (cst.FunctionDef, cst.Lambda)):
                continue
            passed = ["ctx", "inputs", "output"] + (["keyword_only_inputs"] if op.keyword_only else [])
            keywordable, required, positional_only, var_keyword = _signature(setup.node)
            unexpected = [k for k in passed if k not in keywordable and not var_keyword]
            missing = [r for r in required if r not in passed or r in positional_only]
            if not unexpected and not missing:
                continue
            problem = (
                f"TypeError: got an unexpected keyword argument '{unexpected[0]}'"
                if unexpected
                else f"TypeError: missing required argument '{missing[0]}'"
            )
            yield Report(
                setup.position,
                f"setup_context `{setup.name}` of {op.display} takes ({', '.join(required) or '...'}) but PyTorch "
                f"calls it with keywords {', '.join(passed)}: {problem} at the first differentiable call",
            )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                ctx.y = inputs[1]

            mul.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=setup_context)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::kw", mutates_args=())
            def kw(x: Tensor, *, val: float) -> Tensor:
                return x * val

            def setup_context(ctx, inputs, keyword_only_inputs, output):
                ctx.val = keyword_only_inputs["val"]

            kw.register_autograd(lambda ctx, g: g * ctx.val, setup_context=setup_context)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            def setup_context(ctx, output, **kwargs):
                ctx.save_for_backward(kwargs["inputs"][0])

            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * x.cos()

            sin.register_autograd(backward, setup_context=setup_context)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def sc(ctx, args, out):
                ctx.y = args[1]

            mul.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=sc)
            """,
            line=8,
            message="unexpected keyword argument 'inputs'",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::kw", mutates_args=())
            def kw(x: Tensor, *, val: float) -> Tensor:
                return x * val

            def setup_context(ctx, inputs, output):
                ctx.v = 1.0

            kw.register_autograd(lambda ctx, g: g * ctx.v, setup_context=setup_context)
            """,
            line=8,
            message="'keyword_only_inputs'",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * x.cos()

            torch.library.register_autograd(
                "demo::sin", backward, setup_context=lambda ctx, inputs, outputs: ctx.save_for_backward(inputs[0])
            )
            """,
            line=13,
            message="'output'",
        ),
    ]
