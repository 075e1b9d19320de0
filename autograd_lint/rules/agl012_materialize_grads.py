"""AGL012: ``set_materialize_grads(False)`` but backward does not handle ``None``."""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import Classifier, dotted_name, is_none
from autograd_lint.model.extract import ParsedUnit
from autograd_lint.model.flow import ScopeVisitor, child_bodies, method_body
from autograd_lint.model.semantic import MethodModel
from autograd_lint.model.imports import ImportMap
from autograd_lint.rules._common import ctx_writers, short
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import FunctionSpec, Kind, MethodSpec


def _materialize_off(function: FunctionSpec) -> bool:
    """True when forward/setup_context call ``ctx.set_materialize_grads(False)`` and nothing else."""
    arguments = {
        (call.args[0].text if len(call.args) == 1 and not call.has_starred else None)
        for method in ctx_writers(function)
        for call in method.calls("set_materialize_grads")
    }
    return arguments == {"False"}


def _units(body: Sequence[cst.BaseStatement]) -> Iterator[list[cst.CSTNode]]:
    """The body's statements in text order, each as the parts to scan.

    A simple statement line is one unit; a compound statement gives its header (the
    ``if``/``while`` test, the ``for`` target and iterable, the ``with`` items) as a
    unit, then the units of its blocks.  Nested ``def``/``class`` bodies are skipped.
    """
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            yield [statement]
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        else:
            if isinstance(statement, (cst.If, cst.While)):
                yield [statement.test]
            elif isinstance(statement, cst.For):
                yield [statement.target, statement.iter]
            elif isinstance(statement, cst.With):
                yield list(statement.items)
            for block in child_bodies(statement):
                yield from _units(block)


class _Scan(ScopeVisitor):
    """Collects, in one unit, uses of grad parameters that the parameter's own value
    reaches (the semantic model says which), and None tests on them."""

    def __init__(self, grads: set[str], semantic: MethodModel, imports: ImportMap) -> None:
        self.grads = grads
        self.semantic = semantic
        self.imports = imports
        self.uses: list[tuple[str, cst.CSTNode]] = []
        self.guarded: set[str] = set()

    def _grad(self, node: cst.CSTNode | None) -> str | None:
        if not isinstance(node, cst.Name) or node.value not in self.grads:
            return None
        parameter = self.semantic.params.get(node.value)
        return node.value if parameter in self.semantic.reaching(node) else None

    def _tested(self, node: cst.CSTNode | None) -> str | None:
        return node.value if isinstance(node, cst.Name) and node.value in self.grads else None

    def _use(self, name: str | None, node: cst.CSTNode) -> None:
        if name is not None:
            self.uses.append((name, node))

    def _guard(self, node: cst.CSTNode | None) -> None:
        name = self._tested(node)
        if name is not None:
            self.guarded.add(name)

    # -- None tests ----------------------------------------------------------------
    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        equality = (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)
        if any(isinstance(c.operator, equality) for c in node.comparisons) and any(map(is_none, operands)):
            for operand in operands:
                self._guard(operand)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        # `g and ...` / `g or ...` is a truth test, which a None grad passes safely.
        self._guard(node.left)
        self._guard(node.right)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._guard(node.test)

    def visit_If(self, node: cst.If) -> None:
        self._guard(node.test)

    # -- uses ------------------------------------------------------------------------
    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            self._guard(node.expression)
        else:
            self._use(self._grad(node.expression), node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._use(self._grad(node.left) or self._grad(node.right), node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = dotted_name(func)
        if name in ("isinstance", "callable") and node.args:
            self._guard(node.args[0].value)
        if not isinstance(func, cst.Attribute):
            return
        self._use(self._grad(func.value), node)
        qualified = self.imports.resolve(name) if name else None
        if qualified is not None and Classifier._torch_call(qualified) is Kind.TENSOR:
            for arg in node.args:
                if arg.keyword is None and not arg.star:
                    self._use(self._grad(arg.value), node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._use(self._grad(node.target) or self._grad(node.value), node)


class MaterializeGradsOff(Rule):
    """With ``ctx.set_materialize_grads(False)`` called in forward (combined style) or
    setup_context, the engine passes ``None`` instead of zeros for outputs that get no
    gradient.  This rule reports the first place in backward, vjp or jvp that uses a
    grad parameter in arithmetic, as the receiver of a method call, or as an argument of
    a tensor-valued ``torch`` op, where the parameter's own value reaches the use (not
    only a rebinding), with no ``is None``/``is not None`` test (or ``isinstance``/truth
    test) on it in an earlier statement or the same one.  That is more lenient than
    dominance: a test anywhere before the use silences it, as syntax can't follow every
    way of handling None."""

    code = "AGL012"
    title = "`set_materialize_grads(False)` but backward does not handle `None`"
    severity = Severity.ERROR
    why = (
        "When an output gets no gradient (for example it is unused), backward receives `None` "
        "for it and fails: `TypeError: unsupported operand type(s) for +: 'Tensor' and "
        "'NoneType'`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        if function.attribute_is_true("boxed_grads_call") or not _materialize_off(function):
            return
        for name in ("backward", "vjp", "jvp"):
            method = function.methods.get(name)
            if method is None or not ctx.own(method) or method.is_classmethod:
                continue
            unit = ctx.unit(method)
            if unit is None or method.node is None or method.semantic is None:
                continue
            yield from self._check(ctx, method, unit)

    def _check(self, ctx: FunctionContext, method: MethodSpec, unit: ParsedUnit) -> Iterator[Report]:
        grads = {p.name for p in method.positional[1:]}
        assert method.node is not None and method.semantic is not None
        guarded: set[str] = set()
        for parts in _units(method_body(method.node)):
            scan = _Scan(grads, method.semantic, ctx.analysis.imports)
            for part in parts:
                traverse.visit(part, scan)
            # A test in the same statement counts (`g * 2 if g is not None else None`).
            guarded |= scan.guarded
            for name, node in scan.uses:
                if name in guarded:
                    continue
                guarded.add(name)  # report each parameter once
                yield Report(
                    ctx.position(method, node),
                    f"{ctx.function.name}.{method.name} uses `{name}` in "
                    f"`{short(unit.code(node), 60)}` without testing `{name} is None`, but forward "
                    "calls ctx.set_materialize_grads(False), so it is None when that output "
                    "gets no gradient",
                )

    VALID = [
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(False)
                    return x.clone(), x.clone()

                @staticmethod
                def backward(ctx, g1, g2):
                    if g1 is None and g2 is None:
                        return None
                    if g1 is None:
                        return g2
                    if g2 is None:
                        return g1
                    return g1 + g2
            """
        ),
        # Trap 3 and 5: *grads is not a named parameter; split style with the setting in
        # an inherited setup_context, and conditional expressions that test first.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 2, x * 3

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.set_materialize_grads(False)

            class Scale(Base):
                @staticmethod
                def backward(ctx, ga, gb):
                    da = ga * 2 if ga is not None else None
                    db = None if gb is None else gb * 3
                    return da if db is None else (db if da is None else da + db)

            class Sink(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *inputs):
                    ctx.set_materialize_grads(False)
                    return tuple(i.clone() for i in inputs)

                @staticmethod
                def backward(ctx, *grads):
                    return tuple(g * 1 for g in grads)
            """
        ),
        # Without set_materialize_grads(False), grads are zeros, never None.
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(True)
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y, y.clone()

                @staticmethod
                def backward(ctx, g1, g2):
                    (y,) = ctx.saved_tensors
                    return (g1 + g2) * y
            """
        ),
        # An early return, a helper that materializes, then a rebinding: later uses are fine.
        Valid(
            """
            import torch

            class ToLocal(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, placements):
                    ctx.set_materialize_grads(False)
                    return x.view_as(x)

                @staticmethod
                def backward(ctx, grad_output):
                    if grad_output is None:
                        return None, None
                    return grad_output.contiguous(), None

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(False)
                    return x.clone(), x.clone()

                @staticmethod
                def backward(ctx, g1, g2):
                    g1 = torch.zeros(()) if g1 is None else g1
                    g2 = materialize(g2)
                    return g1 * 2 + g2
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(False)
                    return x.clone(), x.clone()

                @staticmethod
                def backward(ctx, g1, g2):
                    return g1 + g2
            """,
            line=11,
            message="Split.backward uses `g1` in `g1 + g2` without testing `g1 is None`",
        ),
        # A test that comes after the use does not protect it; a method call is a use.
        Invalid(
            """
            import torch
            from torch.autograd import Function

            class Norm(Function):
                @staticmethod
                def forward(x):
                    return x / x.norm(), x.norm()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.set_materialize_grads(False)
                    ctx.save_for_backward(inputs[0])

                @staticmethod
                def backward(ctx, g_out, g_norm):
                    (x,) = ctx.saved_tensors
                    flat = g_out.flatten()
                    if g_out is None:
                        return None
                    return flat.view_as(x)
            """,
            line=17,
            message="Norm.backward uses `g_out` in `g_out.flatten()`",
        ),
        # A torch op on the grad; ctx is not named ctx.
        Invalid(
            """
            import torch

            class MatMul(torch.autograd.Function):
                @staticmethod
                def forward(self, a, b):
                    self.set_materialize_grads(False)
                    self.save_for_backward(a, b)
                    return a @ b

                @staticmethod
                def backward(self, grad):
                    a, b = self.saved_tensors
                    return torch.matmul(grad, b.t()), torch.matmul(a.t(), grad)
            """,
            line=13,
            message="MatMul.backward uses `grad` in `torch.matmul(grad, b.t())`",
        ),
        # jvp receives None tangents too.
        Invalid(
            """
            import torch

            class Sin(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.sin()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.set_materialize_grads(False)
                    ctx.save_for_forward(inputs[0])

                @staticmethod
                def jvp(ctx, tangent):
                    (x,) = ctx.saved_tensors
                    return -tangent * x.cos()
            """,
            line=16,
            message="Sin.jvp uses `tangent`",
        ),
    ]
