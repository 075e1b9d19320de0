"""AGL002: a Function is used the legacy way (instantiated, called as an instance, or non-static)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

import libcst as cst

from autograd_lint.model.analysis import ModuleNeed
from autograd_lint.rules.base import (
    Diagnostic,
    FixSafety,
    Fixer,
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import FUNCTION_METHODS, FunctionSpec, MethodSpec
from autograd_lint.model.usage import UseKind

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

# Trap 7: torch-internal Functions built on _SingleLevelFunction have their own
# calling conventions; Function.__init__/__call__ do not apply to them.
_SINGLE_LEVEL = frozenset({"torch.autograd.function._SingleLevelFunction"})
# Trap 7: InplaceFunction(inplace=...) is instantiated by the legacy code it exists for.
_INPLACE = frozenset({"torch.autograd.InplaceFunction", "torch.autograd.function.InplaceFunction"})


def _derives_from(function: FunctionSpec, names: frozenset[str]) -> bool:
    return any(not names.isdisjoint(spec.bases) for spec in function.mro())


def _decorators_known(method: MethodSpec) -> bool:
    """Every decorator is one of torch's (none of which returns a staticmethod)."""
    return all(
        d.qualified_name is not None
        and (d.qualified_name.startswith("torch.") or d.qualified_name == "builtins.classmethod")
        for d in method.decorators
    )


class _Fix(Fixer):
    """(b) only: adds ``@staticmethod`` (outermost) to a reported autograd method that
    has no ``@staticmethod`` and no ``@classmethod``, when nothing in the file
    instantiates the class or a subclass of it.  ``apply`` passes ctx as the first
    argument either way, so calls through ``apply`` behave the same; an instance would
    bind its own ``self`` instead.  A ``@classmethod`` takes ``cls`` first and is left
    alone."""

    def __init__(self, analysis: "FileAnalysis", diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__(analysis, diagnostics)
        instantiated = {
            spec.full_name
            for use in analysis.function_uses
            if use.kind in (UseKind.INSTANTIATION, UseKind.INSTANCE_CALL)
            for spec in use.function.mro()
        }
        # Lines of the `def`s to decorate.
        self.targets = {
            method.position.line
            for function in analysis.functions
            if function.full_name not in instantiated
            for name, method in function.methods.items()
            if name in FUNCTION_METHODS
            and method.defined_in == function.qualname
            and not (method.is_staticmethod or method.is_classmethod)
            and method.position.line in self.lines
        }

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if self.position(original_node.name).line not in self.targets:
            return updated_node
        return updated_node.with_changes(decorators=[cst.Decorator(cst.Name("staticmethod")), *updated_node.decorators])


class LegacyUse(Rule):
    """Reports the legacy, instance-based use of a Function: (a) ``Fn(...)`` (an
    instantiation) and ``Fn(...)(...)`` (an instance call) anywhere in the module, where
    ``Fn`` is a Function class of the module; (b) an effective autograd method
    (``forward``, ``setup_context``, ``backward``, ``vjp``, ``jvp``, ``vmap``) that the
    class defines without ``@staticmethod``.  A ``@classmethod`` method is not reported
    here: it works in eager mode, gradcheck and torch.func, and what it costs (a graph
    break under torch.compile) is AGL153's, in the compile family that is on when the
    project says it compiles (``uses-compile = true``).  Classes built on
    ``_SingleLevelFunction`` are skipped; so are instantiations of ``InplaceFunction``
    subclasses, classes that define ``__init__``/``__new__`` (instantiation) or
    ``__call__`` (instance call), uses inside ``pytest.raises``/``assertRaises``
    blocks, and methods with decorators that do not resolve to torch."""

    code = "AGL002"
    title = "legacy / instance use of a Function"
    severity = Severity.ERROR  # the instance call; instantiation and (b) are info (compatibility)
    needs = frozenset({ModuleNeed.FUNCTION_USES})
    fix = FixSafety.SAFE  # (b) only: adds @staticmethod
    fixer = _Fix
    why = (
        "An instance call raises `RuntimeError: Legacy autograd function with non-static "
        "forward method is deprecated. Please use new-style autograd function with static "
        "forward method.` Instantiating warns `DeprecationWarning: <class '...F'> should not "
        "be instantiated. Methods on autograd functions are all static, so you should invoke "
        "them on the class itself. Instantiating an autograd function will raise an error in a "
        "future version of PyTorch.` A method without `@staticmethod` is called by `apply` with "
        "ctx first, as a static one is (eager and `torch.compile`): one written for ctx works, only "
        "the documented contract is broken; one that reads state a legacy `__init__` set on `self` "
        "finds ctx instead. A `@classmethod` "
        "method works in eager mode, gradcheck and torch.func, but `torch.compile` graph-breaks at "
        "each `apply` and `fullgraph=True` fails: `Unsupported: failed to bind arguments when "
        "attempting to inline`."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for use in analysis.function_uses:
            function = use.function
            if use.expects_failure or use.class_methods is None or _derives_from(function, _SINGLE_LEVEL):
                continue
            if use.kind is UseKind.INSTANCE_CALL and "__call__" not in use.class_methods:
                yield Report(
                    use.position,
                    f"`{use.text}` calls an instance of {function.name}, which raises "
                    f"RuntimeError (legacy autograd Function); use {function.name}.apply(...)",
                )
            elif (
                use.kind is UseKind.INSTANTIATION
                and use.class_methods.isdisjoint({"__init__", "__new__"})
                and not _derives_from(function, _INPLACE)
            ):
                yield Report(
                    use.position,
                    f"`{use.text}` instantiates {function.name}, which is deprecated "
                    f"(DeprecationWarning); call {function.name}.apply(...) on the class",
                    Severity.INFO,
                )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        if _derives_from(function, _SINGLE_LEVEL):
            return
        for name in FUNCTION_METHODS:
            method = function.methods.get(name)
            if method is None or method.is_staticmethod or method.is_classmethod:
                continue  # a classmethod works in eager mode; its compile cost is AGL153's
            if _decorators_known(method):
                # apply passes ctx first either way (checked on torch 2.13, torch.compile
                # fullgraph included): a method written for ctx works the same, one that
                # reads state a legacy __init__ set on `self` finds ctx instead.
                consequence = (
                    "is not a @staticmethod: apply calls it with ctx as its first argument, "
                    "whatever that parameter is named; the documented contract is a @staticmethod"
                )
            else:
                continue
            yield Report(method.position, f"{function.name}.{name} {consequence}", Severity.INFO)

    VALID = [
        # A @classmethod forward/backward works in eager mode, gradcheck and torch.func;
        # its torch.compile graph break is AGL153's.
        Valid(
            """
            import torch

            class Cube(torch.autograd.Function):
                @classmethod
                def forward(cls, ctx, x):
                    ctx.save_for_backward(x)
                    return x ** 3

                @classmethod
                def backward(cls, ctx, grad):
                    (x,) = ctx.saved_tensors
                    return 3 * x ** 2 * grad

            y = Cube.apply(torch.ones(1))
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
        # Trap 9: old code names ctx `self`, but the method is static, which is all that counts.
        Valid(
            """
            import torch
            from torch.autograd import Function
            from torch.autograd.function import once_differentiable

            class Double(Function):
                @staticmethod
                def forward(self, x):
                    return x * 2

                @staticmethod
                @once_differentiable
                def backward(self, grad):
                    return grad * 2

            y = Double.apply(torch.ones(2))
            """
        ),
        # Trap 7: NestedIOFunction's instance API, _SingleLevelFunction internals and
        # InplaceFunction(inplace=...) instantiation are legitimate.
        Valid(
            """
            import torch
            from torch.autograd.function import InplaceFunction, NestedIOFunction, _SingleLevelFunction

            class Nested(NestedIOFunction):
                def forward_extended(self, x):
                    return x

            class Internal(_SingleLevelFunction):
                def forward(*args):
                    return args

            class AddInplace(InplaceFunction):
                @staticmethod
                def forward(ctx, x):
                    return x.add_(1)

                @staticmethod
                def backward(ctx, grad):
                    return grad

            nested = Nested()(torch.ones(1))
            internal = Internal()
            op = AddInplace(inplace=True)
            """
        ),
        # A name that shadows the class, and a test that expects the legacy call to fail.
        Valid(
            """
            import pytest
            import torch

            class Sq(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * x

                @staticmethod
                def backward(ctx, grad):
                    return grad

            def build(Sq):
                return Sq()

            def test_legacy_call_fails():
                with pytest.raises(RuntimeError):
                    Sq()(torch.ones(1))
            """
        ),
        # A class that defines __call__ (and __init__) makes its instances callable.
        Valid(
            """
            import torch

            class Op(torch.autograd.Function):
                def __init__(self, scale):
                    self.scale = scale

                def __call__(self, x):
                    return Op.apply(x)

                @staticmethod
                def forward(ctx, x):
                    return x * 3

                @staticmethod
                def backward(ctx, grad):
                    return grad * 3

            y = Op(2)(torch.ones(1))
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
                    return x.exp()

                @staticmethod
                def backward(ctx, grad):
                    return grad

            def exp(x):
                return Exp()(x)
            """,
            line=13,
            message="calls an instance of Exp, which raises RuntimeError",
        ),
        Invalid(
            """
            from torch.autograd import Function

            class Exp(Function):
                @staticmethod
                def forward(ctx, x):
                    return x.exp()

                @staticmethod
                def backward(ctx, grad):
                    return grad

            fn = Exp()
            """,
            line=12,
            message="instantiates Exp, which is deprecated",
        ),
        Invalid(
            """
            import torch

            class Legacy(torch.autograd.Function):
                def forward(self, x):
                    return x * 2

                def backward(self, grad):
                    return grad * 2
            """,
            line=4,
            message="Legacy.forward is not a @staticmethod",
            fixed="""
            import torch

            class Legacy(torch.autograd.Function):
                @staticmethod
                def forward(self, x):
                    return x * 2

                @staticmethod
                def backward(self, grad):
                    return grad * 2
            """,
        ),
        # The fix adds @staticmethod only where no instance of the class (or of a
        # subclass) is made in the file: Legacy's methods stay as they are.
        Invalid(
            """
            import torch
            from torch.autograd.function import once_differentiable

            class Legacy(torch.autograd.Function):
                def forward(self, x):
                    return x * 2

                def backward(self, grad):
                    return grad * 2

            class Sub(Legacy):
                pass

            class Other(torch.autograd.Function):
                # y = 2x
                def forward(ctx, x):
                    return x * 2

                @once_differentiable
                def backward(ctx, grad):
                    return grad * 2

            legacy = Sub()
            """,
            line=20,
            message="Other.backward is not a @staticmethod",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Legacy(torch.autograd.Function):
                def forward(self, x):
                    return x * 2

                def backward(self, grad):
                    return grad * 2

            class Sub(Legacy):
                pass

            class Other(torch.autograd.Function):
                # y = 2x
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    return grad * 2

            legacy = Sub()
            """,
        ),
        Invalid(
            """
            import torch

            class Outer:
                class Cube(torch.autograd.Function):
                    @classmethod
                    def forward(cls, ctx, x):
                        return x ** 3

                    @staticmethod
                    def backward(ctx, grad):
                        return grad

            y = Outer.Cube()(torch.ones(1))
            """,
            line=13,
            message="calls an instance of Cube",
        ),
    ]
