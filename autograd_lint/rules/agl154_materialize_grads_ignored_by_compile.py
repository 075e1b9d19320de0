"""AGL154: under torch.compile, set_materialize_grads(False) is dropped and a backward's ``is None`` branch never runs."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.flow import ScopeVisitor
from autograd_lint.rules._common import ctx_writers
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid


def _none_tests(node: cst.FunctionDef, names: set[str]) -> list[tuple[cst.Comparison, str]]:
    """``g is None`` / ``g is not None`` comparisons on ``names`` in ``node``'s own body."""
    found: list[tuple[cst.Comparison, str]] = []

    class _Visitor(ScopeVisitor):
        def visit_Comparison(self, comparison: cst.Comparison) -> None:
            if not isinstance(comparison.left, cst.Name) or comparison.left.value not in names:
                return
            for target in comparison.comparisons:
                if isinstance(target.operator, (cst.Is, cst.IsNot)) and isinstance(target.comparator, cst.Name) \
                        and target.comparator.value == "None":
                    found.append((comparison, comparison.left.value))

    if isinstance(node.body, cst.IndentedBlock):
        for statement in node.body.body:
            traverse.visit(statement, _Visitor())
    return found


class MaterializeGradsIgnoredByCompile(Rule):
    """Reports, in a Function whose forward or setup_context calls
    ``ctx.set_materialize_grads(False)``, a backward test ``g is None`` / ``g is not None``
    on a gradient (compile compatibility family: off unless selected or
    ``uses-compile = true``).  Under torch.compile the call is dropped: gradients arrive
    as zeros, never ``None``, so the backward takes the other branch."""

    code = "AGL154"
    title = "set_materialize_grads(False) is dropped under torch.compile"
    severity = Severity.WARNING
    enabled_by_default = False
    on_when_compiling = True
    why = (
        "Measured on torch 2.13 (eager, aot_eager, with and without fullgraph): a backward that adds 100 when "
        "`g2 is not None` gives gradient 2.0 eagerly and 102.0 compiled, silently. The result differs whenever "
        "the `None` branch does anything other than treat the gradient as zeros."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        if not any(
            call.args and call.args[0].text == "False"
            for method in ctx_writers(function)
            for call in method.calls("set_materialize_grads")
        ):
            return
        backward = function.methods.get("backward")
        if backward is None or backward.node is None or ctx.unit(backward) is None:
            return
        gradients = {p.name for p in backward.positional[1:]}
        for comparison, name in _none_tests(backward.node, gradients):
            yield Report(
                ctx.position(backward, comparison),
                f"{function.name}.backward tests `{name}` against None, but torch.compile drops "
                f"ctx.set_materialize_grads(False): `{name}` arrives as zeros there, so this test never sees None "
                "and compiled gradients can differ from eager ones",
            )

    VALID = [
        Valid(
            """
            import torch

            class Two(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, g1, g2):
                    return g1 * 2 + g2 * 3
            """
        ),
        Valid(
            """
            import torch

            class Two(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(False)
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, g1, g2):
                    return g1 * 2 + g2 * 3
            """
        ),
        Valid(
            """
            import torch

            class Two(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, g1, g2):
                    if g2 is None:
                        return g1 * 2
                    return g1 * 2 + g2 * 3
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Two(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(False)
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, g1, g2):
                    out = g1 * 2
                    if g2 is not None:
                        out = out + 100
                    return out
            """,
            line=12,
            message="`g2`",
        ),
        Invalid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 2, x * 3

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.set_materialize_grads(False)

                @staticmethod
                def backward(ctx, g1, g2):
                    a = 0 if g1 is None else g1 * 2
                    b = 0 if g2 is None else g2 * 3
                    return a + b
            """,
            message="drops ctx.set_materialize_grads(False)",
        ),
        Invalid(
            """
            from torch.autograd import Function

            class Guarded(Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(False)
                    return x.sin()

                @staticmethod
                def backward(ctx, g):
                    if g is None:
                        return None
                    return g * 2
            """,
        ),
    ]
