"""AGL021: ``Fn.forward`` / ``Fn.backward`` / ... called directly instead of ``Fn.apply``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

import libcst as cst

from autograd_lint.model.analysis import ModuleNeed
from autograd_lint.rules.base import Diagnostic, Fixer, FixSafety, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import FunctionSpec, Position
from autograd_lint.model.usage import UseKind, is_test_path

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class _Fix(Fixer):
    """Rewrites a reported ``Fn.forward(ctx, *args)`` to ``Fn.apply(*args)`` (split style:
    ``Fn.forward(*args)`` to ``Fn.apply(*args)``), when the style is known and ctx is a
    plain positional argument.  Unsafe: autograd then records a node and runs the
    custom backward, and the expression passed as ctx is no longer evaluated.  Calls of
    backward and the other methods have no ``apply`` form and are left alone."""

    def __init__(self, analysis: "FileAnalysis", diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__(analysis, diagnostics)
        # Position of each reported forward call -> whether forward takes ctx first.
        self.targets: dict[Position, bool] = {
            use.position: not use.function.is_split_style
            for use in analysis.function_uses
            if use.kind is UseKind.METHOD_CALL
            and use.method == "forward"
            and use.function.is_split_style is not None
            and use.position in self.positions
        }

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        takes_ctx = self.targets.get(self.position(original_node))
        func = updated_node.func
        if takes_ctx is None or not isinstance(func, cst.Attribute):
            return updated_node
        args = list(updated_node.args)
        if takes_ctx:
            if not args or args[0].keyword is not None or args[0].star:
                return updated_node
            args = args[1:]
        return updated_node.with_changes(func=func.with_changes(attr=cst.Name("apply")), args=args)


def _ignores_ctx(function: FunctionSpec) -> bool:
    """Whether forward takes a ctx it never uses: calling it directly is calling a plain
    function, and a ctx of None is fine."""
    forward = function.method("forward")
    if forward is None or function.is_split_style is not False or forward.semantic is None:
        return False
    name = forward.ctx_name
    model = forward.semantic
    binding = model.params.get(name or "")
    return binding is not None and not model.uses(binding) and not model.nested_uses.get(name or "")


class DirectMethodCall(Rule):
    """Reports a call ``Fn.forward(...)`` (or ``backward``, ``setup_context``, ``jvp``,
    ``vjp``, ``vmap``) where ``Fn`` is a Function class of the module.  Skipped: calls
    written inside the body of a Function class (``Base.forward(ctx, x)`` from a
    subclass, or one Function's backward reusing another's: autograd records nothing
    inside forward anyway), calls that pass on a ``ctx`` parameter of the enclosing
    function (a helper called from some Function's forward or backward: user code
    has no ctx of its own), calls under a guard that turns autograd off or marks
    inference or export (``not torch.is_grad_enabled()``, ``torch.no_grad()``,
    ``self.training``, ONNX export, scripting, tracing, including an earlier ``if``
    that returns), calls in ``pytest.raises``/``assertRaises`` blocks, and test files."""

    code = "AGL021"
    title = "`Cls.forward`/`Cls.backward` called directly instead of `Cls.apply`"
    severity = Severity.WARNING
    needs = frozenset({ModuleNeed.FUNCTION_USES})
    fix = FixSafety.UNSAFE  # forward calls only; autograd then records a node
    fixer = _Fix
    why = (
        "No autograd node is recorded, so the custom backward is silently ignored: "
        "`F.forward(FakeCtx(), a)` gave `grad_fn=ExpBackward0` and the default gradient, and "
        "the custom backward never ran. With `None` as ctx: `AttributeError: 'NoneType' "
        "object has no attribute 'save_for_backward'`. The docs say: call `apply`; do not "
        "call forward() directly."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        if is_test_path(analysis.source.path):
            return
        for use in analysis.function_uses:
            if use.kind is not UseKind.METHOD_CALL or use.inside is not None:
                continue
            if use.guard is not None or use.expects_failure or use.passes_ctx:
                continue
            if use.method == "forward" and _ignores_ctx(use.function):
                continue  # a plain function that happens to live on the class (dequantize helpers)
            name = use.function.name
            consequence = (
                f"autograd records no node, so {name}'s custom backward is never used"
                if use.method in ("forward", "setup_context")
                else f"autograd calls {use.method}, user code should not"
            )
            yield Report(
                use.position,
                f"`{use.text}` calls {name}.{use.method} directly ({consequence}); "
                f"use {name}.apply(...)",
            )

    VALID = [
        # forward never uses its ctx: `Fn.forward(None, ...)` is a plain call on purpose.
        Valid(
            """
            import torch

            class Dequantize(torch.autograd.Function):
                @staticmethod
                def forward(_ctx, t, dtype):
                    return t.to(dtype)

                @staticmethod
                def backward(ctx, grad):
                    return grad, None

            def dequantize(t):
                return Dequantize.forward(None, t, torch.float32)
            """
        ),
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y

            def exp(x):
                return Exp.apply(x)
            """
        ),
        # Trap 10: deliberate direct calls when autograd is off, in eval mode or under ONNX export.
        Valid(
            """
            import torch

            class Fused(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2

            def fused(x, training):
                if not torch.is_grad_enabled():
                    return Fused.forward(None, x)
                return Fused.apply(x)

            def fused_fast(x):
                if torch.is_grad_enabled():
                    return Fused.apply(x)
                return Fused.forward(None, x)

            class Block(torch.nn.Module):
                def forward(self, x):
                    if not self.training or torch.onnx.is_in_onnx_export():
                        return Fused.forward(None, x)
                    return Fused.apply(x)

            @torch.no_grad()
            def infer(x):
                return Fused.forward(None, x)

            def infer2(x):
                with torch.inference_mode():
                    return Fused.forward(None, x)
            """
        ),
        # A guarded direct call whose forward does use its ctx (given a stand-in): the guard
        # alone exempts it, autograd being off (torch 2.13 ran it and returned x * 2).
        Valid(
            """
            import types

            import torch

            class Scaled(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.scale = 2
                    return x * ctx.scale

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.scale

            def scaled(x):
                if not torch.is_grad_enabled():
                    return Scaled.forward(types.SimpleNamespace(), x)
                return Scaled.apply(x)
            """
        ),
        # A subclass calling its base's forward, and one Function reusing another's backward.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2

            class Derived(Base):
                @staticmethod
                def forward(ctx, x):
                    return Base.forward(ctx, x) + 1

            class Twice(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return Base.backward(ctx, grad)
            """
        ),
        # A parameter that shadows the class name is not the class; a helper that is
        # handed a ctx runs inside some Function's forward or backward.
        Valid(
            """
            import torch

            class Op(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x + 1

                @staticmethod
                def backward(ctx, grad):
                    return grad

            def run(Op, x):
                return Op.forward(None, x)

            def fused_forward(ctx, x):
                return Op.forward(ctx, x) * 2
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y

            def exp(x):
                return Exp.forward(None, x)
            """,
            line=16,
            message="`Exp.forward(None, x)` calls Exp.forward directly",
            fixed="""
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y

            def exp(x):
                return Exp.apply(x)
            """,
        ),
        Invalid(
            """
            from torch.autograd import Function

            class Square(Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return 2 * x * grad

            class Model:
                def __call__(self, x):
                    y = Square.forward(self, x)
                    return y
            """,
            line=16,
            message="so Square's custom backward is never used",
            fixed="""
            from torch.autograd import Function

            class Square(Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return 2 * x * grad

            class Model:
                def __call__(self, x):
                    y = Square.apply(x)
                    return y
            """,
        ),
        Invalid(
            """
            import torch

            class Outer:
                class Clip(torch.autograd.Function):
                    @staticmethod
                    def forward(ctx, x):
                        return x.clamp(0, 1)

                    @staticmethod
                    def backward(ctx, grad):
                        return grad

            grad = Outer.Clip.backward(None, torch.ones(3))
            """,
            line=13,
            message="calls Clip.backward directly",
        ),
        # Split style: forward takes no ctx, so the fix keeps every argument.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(x, factor):
                    return x * factor

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.factor = inputs[1]

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor, None

            def scale(x, factor=2.0):
                return Scale.forward(
                    x,  # the input
                    factor,
                )
            """,
            line=17,
            message="calls Scale.forward directly",
            fixed="""
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(x, factor):
                    return x * factor

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.factor = inputs[1]

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor, None

            def scale(x, factor=2.0):
                return Scale.apply(
                    x,  # the input
                    factor,
                )
            """,
        ),
    ]
