"""AGL012: ``set_materialize_grads(False)`` but backward does not handle ``None``."""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from autograd_lint.model.exprs import Classifier, dotted_name, is_none
from autograd_lint.model.extract import ParsedUnit
from autograd_lint.model.flow import child_bodies, method_body
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
    """The body's statements in text order, each as its parts (a use or a test counts
    from the unit it is in).

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


def _unit_order(body: Sequence[cst.BaseStatement]) -> dict[int, int]:
    """``id`` of each part of each unit (and of each small statement of a line, since a
    one-line block's line is made up) -> the unit's place in text order."""
    order: dict[int, int] = {}
    for index, parts in enumerate(_units(body)):
        for part in parts:
            order[id(part)] = index
            if isinstance(part, cst.SimpleStatementLine):
                for small in part.body:
                    order[id(small)] = index
    return order


def _unit_of(semantic: MethodModel, node: cst.CSTNode, order: dict[int, int]) -> int | None:
    """The place of the unit holding ``node`` (None: a part no unit scans, e.g. a decorator)."""
    if id(node) in order:
        return order[id(node)]
    for ancestor, _ in semantic.ancestors(node):
        if id(ancestor) in order:
            return order[id(ancestor)]
    return None


def _is_test(semantic: MethodModel, node: cst.Name) -> bool:
    """Whether ``node`` is tested for None where it is read: an operand of ``==``/``!=``/``is``
    /``is not`` with a ``None`` operand, of ``and``/``or``, of ``not``, the test of an
    ``if``/``while`` statement or an ``x if c else y``, or ``isinstance``/``callable``'s
    first argument."""
    parent = semantic.parent(node)
    if isinstance(parent, cst.Comparison):
        operands = [parent.left, *(c.comparator for c in parent.comparisons)]
        equality = (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)
        return any(isinstance(c.operator, equality) for c in parent.comparisons) and any(map(is_none, operands))
    if isinstance(parent, cst.BooleanOperation):
        return True
    if isinstance(parent, (cst.IfExp, cst.If, cst.While)):
        return parent.test is node
    if isinstance(parent, cst.UnaryOperation):
        return isinstance(parent.operator, cst.Not)
    if isinstance(parent, cst.Arg):
        call = semantic.parent(parent)
        return (
            isinstance(call, cst.Call)
            and dotted_name(call.func) in ("isinstance", "callable")
            and call.args[0].value is node
        )
    return False


class _Grads:
    """The gradient parameters of one backward/vjp/jvp, and where each is used as a tensor."""

    def __init__(self, grads: set[str], semantic: MethodModel, imports: ImportMap) -> None:
        self.grads = grads
        self.semantic = semantic
        self.imports = imports

    def parameter_use(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` reads a gradient parameter that the parameter's own value reaches."""
        if not isinstance(node, cst.Name) or node.value not in self.grads:
            return False
        return self.semantic.params.get(node.value) in self.semantic.reaching(node)

    def use_site(self, use: cst.Name) -> cst.CSTNode | None:
        """The expression that takes ``use`` as a tensor: arithmetic (one parameter per
        operation, the left one first), a method call on it, a tensor-valued ``torch`` call
        taking it, ``+=``; None for any other read."""
        semantic = self.semantic
        parent = semantic.parent(use)
        if isinstance(parent, cst.UnaryOperation):
            return None if isinstance(parent.operator, cst.Not) else parent
        if isinstance(parent, cst.BinaryOperation):
            return parent if parent.left is use or not self.parameter_use(parent.left) else None
        if isinstance(parent, cst.AugAssign):
            return parent if parent.target is use or not self.parameter_use(parent.target) else None
        if isinstance(parent, cst.Attribute) and parent.value is use:
            call = semantic.parent(parent)
            return call if isinstance(call, cst.Call) and call.func is parent else None
        if isinstance(parent, cst.Arg) and parent.value is use and parent.keyword is None and not parent.star:
            call = semantic.parent(parent)
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
                name = dotted_name(call.func)
                qualified = self.imports.resolve(name) if name else None
                if qualified is not None and Classifier._torch_call(qualified) is Kind.TENSOR:  # noqa: SLF001
                    return call
        return None


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
        semantic = method.semantic
        assert method.node is not None and semantic is not None
        grads = _Grads({p.name for p in method.positional[1:]}, semantic, ctx.analysis.imports)
        order = _unit_order(method_body(method.node))
        for name in sorted(grads.grads):
            parameter = semantic.params.get(name)
            if parameter is None:
                continue
            # A test in an earlier unit, or in the same one (`g * 2 if g is not None else None`).
            tests = [
                place
                for binding in semantic.bindings_of(name)
                for use in semantic.uses(binding)
                if _is_test(semantic, use) and (place := _unit_of(semantic, use, order)) is not None
            ]
            first_test = min(tests, default=len(order) + 1)
            found: list[tuple[int, int, int, int, cst.CSTNode]] = []
            for use in semantic.uses(parameter):
                if not grads.parameter_use(use):
                    continue
                site = grads.use_site(use)
                place = None if site is None else _unit_of(semantic, site, order)
                if site is None or place is None or place >= first_test:
                    continue
                depth = sum(1 for _ in semantic.ancestors(site))
                position = ctx.position(method, site)
                found.append((place, position.line, position.column, depth, site))
            if not found:
                continue
            node = min(found, key=lambda item: item[:4])[4]
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
        # A truth test of a scalar gradient handles None too (None is false).
        Valid(
            """
            import torch

            class Loss(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(False)
                    ctx.save_for_backward(x)
                    return (x * x).sum()

                @staticmethod
                def backward(ctx, grad_loss):
                    (x,) = ctx.saved_tensors
                    if grad_loss:
                        return 2 * x * grad_loss
                    return None
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
