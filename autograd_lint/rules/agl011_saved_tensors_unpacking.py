"""AGL011: ``saved_tensors`` unpacking does not match what was saved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from autograd_lint.model import flow
from autograd_lint.model.exprs import SAVED_ATTRIBUTES, ctx_attribute
from autograd_lint.rules._common import plural
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import CtxCall, FunctionSpec, MethodSpec

# The save API whose tensors each reading method sees as ctx.saved_tensors.
SAVE_API = {"backward": "save_for_backward", "vjp": "save_for_backward", "jvp": "save_for_forward"}
# The only public attributes a tuple has.
TUPLE_ATTRIBUTES = frozenset({"count", "index"})


@dataclass(frozen=True)
class Saved:
    """The single save call: how many tensors it saves, and where."""

    count: int
    method: str
    call: CtxCall


def _saved(function: FunctionSpec, api: str) -> Saved | None:
    """The tensors saved by the one ``ctx.<api>(...)`` call of forward/setup_context."""
    split = function.is_split_style
    if split is None:
        return None
    method = function.method("setup_context" if split else "forward")
    if method is None or method.node is None or method.is_classmethod:
        return None
    # ctx handed to a helper, stored or used by a nested function: the calls we see
    # may not be all of them.
    if method.ctx_name is not None and flow.escapes(method.node, method.ctx_name, in_nested_scopes=True):
        return None
    calls = method.calls(api)
    if len(calls) != 1 or calls[0].has_starred:
        return None
    return Saved(len(calls[0].args), method.name, calls[0])


class _SavedReads(flow.ScopeVisitor):
    """Assignments whose value is ``ctx.saved_tensors``, and every binding of a name."""

    def __init__(self, ctx_name: str) -> None:
        self.ctx_name = ctx_name
        self.reads: list[tuple[cst.Assign, cst.AssignTarget]] = []
        self.bindings: dict[str, int] = {}

    def _bind(self, target: cst.BaseExpression) -> None:
        for name in flow.target_names(target):
            self.bindings[name] = self.bindings.get(name, 0) + 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._bind(node.name)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._bind(node.name)
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        is_read = ctx_attribute(node.value, self.ctx_name) in SAVED_ATTRIBUTES
        for target in node.targets:
            self._bind(target.target)
            if is_read:
                self.reads.append((node, target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target)  # shadows the name inside the comprehension

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._bind(node.target)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self._bind(item.name)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self._bind(item.name)


def _tensor_uses(method: MethodSpec, name: str, tensors: frozenset[str]) -> list[tuple[cst.CSTNode, str]]:
    """Uses of the tuple bound to ``name`` that fail for any tuple: a tensor attribute
    or method, a unary operator, or arithmetic with a number, a tensor in
    ``tensors`` or the tuple itself (``+`` of two tuples and ``*`` by an integer are
    legal and give a tuple again)."""

    def is_tuple(node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value == name
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Add):
                return is_tuple(node.left) and is_tuple(node.right)
            if isinstance(node.operator, cst.Multiply):
                return (is_tuple(node.left) and isinstance(node.right, cst.Integer)) or (
                    isinstance(node.left, cst.Integer) and is_tuple(node.right)
                )
        return False

    def is_other_operand(node: cst.BaseExpression) -> bool:
        if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
            return True
        return is_tuple(node) or (isinstance(node, cst.Name) and node.value in tensors)

    found: list[tuple[cst.CSTNode, str]] = []

    class _Uses(flow.ScopeVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            attr = node.attr.value
            if is_tuple(node.value) and attr not in TUPLE_ATTRIBUTES and not attr.startswith("__"):
                found.append((node, f".{attr}"))

        def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
            if not isinstance(node.operator, cst.Not) and is_tuple(node.expression):
                found.append((node, "a unary operator"))

        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if is_tuple(node):
                return
            left, right = node.left, node.right
            if (is_tuple(left) and is_other_operand(right)) or (is_tuple(right) and is_other_operand(left)):
                found.append((node, "arithmetic"))

    assert method.node is not None
    flow.visit_body(method.node, _Uses())
    return found


class SavedTensorsUnpacking(Rule):
    """Checks ``ctx.saved_tensors`` against the one ``save_for_backward`` call of
    forward (or setup_context): (a) ``a, b, c = ctx.saved_tensors`` must unpack as
    many names as were saved; (b) with one tensor saved, ``x = ctx.saved_tensors``
    binds a 1-tuple, so using ``x`` as a tensor (a tensor attribute or method,
    arithmetic) fails.  The same check runs between jvp and ``save_for_forward``.
    Skipped when the save call is not the only one, has a starred argument, or ctx
    is handed to a helper that might save again; reading into a local and
    unpacking, indexing or measuring it later is fine."""

    code = "AGL011"
    title = "`saved_tensors` unpacking does not match what was saved"
    severity = Severity.ERROR
    why = (
        "(a) `ValueError: not enough values to unpack (expected 3, got 2)` (or `too many values "
        "to unpack`) when backward runs. (b) The error depends on the use of the tuple, e.g. "
        "`TypeError: only integer tensors of a single element can be converted to an index` "
        "for `2 * x * g`, or `AttributeError: 'tuple' object has no attribute 'shape'`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for name, api in SAVE_API.items():
            method = function.methods.get(name)
            if method is None or method.node is None or method.ctx_name is None or method.is_classmethod:
                continue
            if ctx.unit(method) is None:
                continue
            visitor = _SavedReads(method.ctx_name)
            flow.visit_body(method.node, visitor)
            if not visitor.reads:
                continue
            saved = _saved(function, api)
            if saved is None:
                continue
            for param in method.params:
                visitor.bindings[param.name] = visitor.bindings.get(param.name, 0) + 1
            where = f"{saved.method} saves {plural(saved.count, 'tensor')} (line {saved.call.position.line})"
            for assign, target in visitor.reads:
                node = target.target
                attribute = assign.value.attr.value  # type: ignore[attr-defined]
                if isinstance(node, (cst.Tuple, cst.List)):
                    if any(isinstance(e, cst.StarredElement) for e in node.elements):
                        continue
                    if len(node.elements) != saved.count:
                        yield Report(
                            ctx.position(method, assign),
                            f"{function.name}.{name} unpacks ctx.{attribute} into "
                            f"{plural(len(node.elements), 'name')}, but {where}",
                        )
                elif isinstance(node, cst.Name) and saved.count == 1 and visitor.bindings[node.value] == 1:
                    line = ctx.position(method, assign).line
                    tensors = frozenset(p.name for p in method.positional[1:] if visitor.bindings[p.name] == 1)
                    for use, how in _tensor_uses(method, node.value, tensors):
                        use_line = ctx.position(method, use).line
                        if use_line <= line:
                            continue
                        yield Report(
                            ctx.position(method, assign),
                            f"{function.name}.{name} binds {node.value} = ctx.{attribute}, a tuple "
                            f"holding the one saved tensor, then uses it as a tensor ({how}, line "
                            f"{use_line}); unpack it: ({node.value},) = ctx.{attribute}",
                        )
                        break

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """
        ),
        # Trap 14: read once into a local, then unpacked, indexed or measured.
        Valid(
            """
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, grad):
                    saved = ctx.saved_tensors
                    assert len(saved) == 1
                    (x,) = saved
                    return 2 * saved[0] * grad
            """
        ),
        # Save calls in exclusive branches, a starred save and starred targets
        # leave the count to runtime.
        Valid(
            """
            import torch

            class Maybe(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, bias):
                    if bias is None:
                        ctx.save_for_backward(x, w)
                    else:
                        ctx.save_for_backward(x, w, bias)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    x, w, *rest = ctx.saved_tensors
                    return grad * w, grad * x, None
            """
        ),
        # Trap 14: ctx handed to a helper (which may save more) is not followed.
        Valid(
            """
            import torch

            def _save_extra(ctx, x):
                ctx.save_for_backward(x, x.exp())

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    _save_extra(ctx, x)
                    return x.exp()

                @staticmethod
                def backward(ctx, grad):
                    x, y = ctx.saved_tensors
                    return grad * y
            """
        ),
        # A nested function that uses ctx may save again when it is called.
        Valid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    def save_both():
                        ctx.save_for_backward(x, y)

                    ctx.save_for_backward(x)
                    save_both()
                    return x * y

                @staticmethod
                def backward(ctx, grad):
                    x, y = ctx.saved_tensors
                    return grad * y, grad * x
            """
        ),
        # A single saved tensor whose name is rebound before use.
        Valid(
            """
            import torch

            class Neg(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return -x

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(output)

                @staticmethod
                def backward(ctx, grad):
                    out = ctx.saved_tensors
                    out = out[0]
                    return -grad + 0 * out.sum()
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Lerp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, w):
                    ctx.save_for_backward(a, b)
                    return a + w * (b - a)

                @staticmethod
                def backward(ctx, grad):
                    a, b, w = ctx.saved_tensors
                    return grad * (1 - w), grad * w, grad * (b - a)
            """,
            line=11,
            message="Lerp.backward unpacks ctx.saved_tensors into 3 names, but forward saves 2 tensors",
        ),
        Invalid(
            """
            import torch

            class Sigmoid(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out = torch.sigmoid(x)
                    ctx.save_for_backward(out)
                    return out

                @staticmethod
                def backward(ctx, grad):
                    out = ctx.saved_tensors
                    return grad * out * (1 - out)
            """,
            line=12,
            message="binds out = ctx.saved_tensors, a tuple holding the one saved tensor",
        ),
        # Split style: setup_context saves; a tensor method on the tuple.
        Invalid(
            """
            import torch

            class Cube(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x ** 3

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.save_for_backward(x)

                @staticmethod
                def backward(ctx, grad):
                    x = ctx.saved_tensors
                    return 3 * grad * x.pow(2)
            """,
            line=15,
            message="uses it as a tensor (.pow, line 16)",
        ),
        # jvp reads what save_for_forward saved.
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.exp()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_forward(output)

                @staticmethod
                def jvp(ctx, tangent):
                    y, extra = ctx.saved_tensors
                    return tangent * y
            """,
            line=14,
            message="setup_context saves 1 tensor",
        ),
    ]
