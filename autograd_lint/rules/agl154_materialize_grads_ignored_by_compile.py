"""AGL154: under torch.compile, set_materialize_grads(False) is dropped and a backward's ``is None`` branch never runs."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.flow import ScopeVisitor
from autograd_lint.rules._common import ctx_writers
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid


_ZEROS = frozenset({"zeros_like", "zeros", "new_zeros"})


def _zeros_substitution(statement: cst.If, name: str) -> bool:
    """``if g is None: g = torch.zeros_like(...)``: the None branch does what compile does."""
    if statement.orelse is not None:
        return False
    if isinstance(statement.body, cst.IndentedBlock):
        body = statement.body.body
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
            return False
        small = body[0].body
    else:  # `if g is None: g = torch.zeros_like(out)` on one line
        small = statement.body.body
    if len(small) != 1 or not isinstance(small[0], cst.Assign):
        return False
    assign = small[0]
    value = assign.value
    called = value.func if isinstance(value, cst.Call) else None
    return (
        len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and assign.targets[0].target.value == name
        and isinstance(called, (cst.Attribute, cst.Name))
        and (called.attr.value if isinstance(called, cst.Attribute) else called.value) in _ZEROS
    )


def _none_tests(node: cst.FunctionDef, names: set[str]) -> list[tuple[cst.Comparison, str]]:
    """``g is None`` / ``g is not None`` comparisons on ``names`` in ``node``'s own body, except an
    ``if g is None: g = zeros_like(...)`` (the same gradient either way)."""
    found: list[tuple[cst.Comparison, str]] = []
    substituted: set[int] = set()

    class _Visitor(ScopeVisitor):
        def visit_If(self, statement: cst.If) -> None:
            test = statement.test
            if isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name):
                if _zeros_substitution(statement, test.left.value):
                    substituted.add(id(test))

        def visit_Comparison(self, comparison: cst.Comparison) -> None:
            if not isinstance(comparison.left, cst.Name) or comparison.left.value not in names:
                return
            if id(comparison) in substituted:
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
        model = backward.semantic
        for comparison, name in _none_tests(backward.node, gradients):
            # Only a test the incoming gradient reaches (the semantic model's reaching bindings):
            # after `g = g if g is not None else ...` on every path, `g` is no longer what arrived.
            if model is not None and model.node is backward.node:
                parameter = model.params.get(name)
                if parameter is None or parameter not in model.reaching(comparison.left):  # type: ignore[arg-type]
                    continue
            yield Report(
                ctx.position(backward, comparison),
                f"{function.name}.backward tests `{name}` against None, but torch.compile drops "
                f"ctx.set_materialize_grads(False): `{name}` arrives as zeros there, so compiled code never takes "
                "the None branch (gradients differ unless that branch equals a zero gradient)",
            )

    VALID = [
        # flash-attention's cute interface: the None branch substitutes zeros, as compile does.
        Valid(
            """
            import torch

            class Attn(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q):
                    ctx.set_materialize_grads(False)
                    out = q * 2
                    ctx.save_for_backward(out)
                    return out, q.sum(-1)

                @staticmethod
                def backward(ctx, dout, dlse):
                    (out,) = ctx.saved_tensors
                    if dout is None:
                        dout = torch.zeros_like(out)
                    return dout * 2
            """
        ),
        # The same substitution written on one line.
        Valid(
            """
            import torch

            class Attn(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q):
                    ctx.set_materialize_grads(False)
                    out = q * 2
                    ctx.save_for_backward(out)
                    return out, q.sum(-1)

                @staticmethod
                def backward(ctx, dout, dlse):
                    (out,) = ctx.saved_tensors
                    if dout is None: dout = torch.zeros_like(out)
                    return dout * 2
            """
        ),
        # The same with another `if` whose test is no comparison (a flag): only None tests count.
        Valid(
            """
            import torch

            class Attn(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, scaled: bool):
                    ctx.set_materialize_grads(False)
                    ctx.scaled = scaled
                    out = q * 2
                    ctx.save_for_backward(out)
                    return out, q.sum(-1)

                @staticmethod
                def backward(ctx, dout, dlse):
                    (out,) = ctx.saved_tensors
                    if dout is None:
                        dout = torch.zeros_like(out)
                    if ctx.scaled:
                        dout = dout * 0.5
                    return dout * 2, None
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
            line=14,
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
            line=11,
            message="Guarded.backward tests `g` against None",
        ),
    ]
