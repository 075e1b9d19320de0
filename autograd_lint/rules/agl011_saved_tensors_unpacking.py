"""AGL011: ``saved_tensors`` unpacking does not match what was saved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from autograd_lint.model.exprs import SAVED_ATTRIBUTES, ctx_attribute
from autograd_lint.rules._common import plural
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.semantic import Binding
from autograd_lint.model.spec import CtxCall, FunctionSpec, Kind, MethodSpec

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
    if method.ctx_name is not None and (method.semantic is None or method.semantic.escapes(method.ctx_name)):
        return None
    calls = method.calls(api)
    if len(calls) != 1 or calls[0].has_starred:
        return None
    return Saved(len(calls[0].args), method.name, calls[0])


def _saved_reads(method: MethodSpec) -> list[cst.Assign]:
    """The assignments of ``method`` whose value is ``<ctx>.saved_tensors`` (with ctx not
    rebound), in text order: the sites of the bindings they make."""
    semantic = method.semantic
    assert semantic is not None and method.ctx_name is not None
    if semantic.is_rebound(method.ctx_name):
        return []
    sites: dict[int, cst.Assign] = {}
    for name in semantic.bindings:
        for binding in semantic.bindings_of(name):
            site = binding.site
            if isinstance(site, cst.Assign) and ctx_attribute(site.value, method.ctx_name) in SAVED_ATTRIBUTES:
                sites.setdefault(id(site), site)
    return list(sites.values())


def _tensor_uses(method: MethodSpec, binding: Binding) -> list[tuple[cst.CSTNode, str]]:
    """Uses of the tuple that ``binding`` holds (where no other binding reaches) that fail
    for any tuple: a tensor attribute or method, a unary operator, or arithmetic with a
    number, a tensor or the tuple itself (``+`` of two tuples and ``*`` by an integer
    are legal and give a tuple again)."""
    semantic = method.semantic
    assert semantic is not None and method.node is not None

    def is_tuple(node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return semantic.reaching(node) == {binding}
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
        return is_tuple(node) or (isinstance(node, cst.Name) and semantic.name_kind(node) is Kind.TENSOR)

    found: list[tuple[cst.CSTNode, str]] = []
    for use in semantic.uses(binding):
        if not is_tuple(use):
            continue
        # The expression the tuple sits in, past any `+`/`*` that gives a tuple again.
        node: cst.CSTNode = use
        parent = semantic.parent(node)
        while isinstance(parent, cst.BinaryOperation) and is_tuple(parent):
            node, parent = parent, semantic.parent(parent)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            attr = parent.attr.value
            if attr not in TUPLE_ATTRIBUTES and not attr.startswith("__"):
                found.append((parent, f".{attr}"))
        elif isinstance(parent, cst.UnaryOperation) and not isinstance(parent.operator, cst.Not):
            found.append((parent, "a unary operator"))
        elif isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is node else parent.left
            if is_other_operand(other):
                found.append((parent, "arithmetic"))
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
            if method.semantic is None:
                continue
            reads = _saved_reads(method)
            if not reads:
                continue
            saved = _saved(function, api)
            if saved is None:
                continue
            where = f"{saved.method} saves {plural(saved.count, 'tensor')} (line {saved.call.position.line})"
            for assign in reads:
                attribute = assign.value.attr.value  # type: ignore[attr-defined]
                for target in assign.targets:
                    yield from self._check_target(ctx, method, assign, target.target, attribute, saved, where)

    @staticmethod
    def _check_target(
        ctx: FunctionContext, method: MethodSpec, assign: cst.Assign, node: cst.BaseExpression,
        attribute: str, saved: Saved, where: str,
    ) -> Iterator[Report]:
        function, name = ctx.function, method.name
        if isinstance(node, (cst.Tuple, cst.List)):
            if any(isinstance(e, cst.StarredElement) for e in node.elements):
                return
            if len(node.elements) != saved.count:
                yield Report(
                    ctx.position(method, assign),
                    f"{function.name}.{name} unpacks ctx.{attribute} into "
                    f"{plural(len(node.elements), 'name')}, but {where}",
                )
        elif isinstance(node, cst.Name) and saved.count == 1:
            assert method.semantic is not None
            binding = next((b for b in method.semantic.bindings_of(node.value) if b.site is assign), None)
            if binding is None:
                return
            for use, how in _tensor_uses(method, binding):
                yield Report(
                    ctx.position(method, assign),
                    f"{function.name}.{name} binds {node.value} = ctx.{attribute}, a tuple "
                    f"holding the one saved tensor, then uses it as a tensor ({how}, line "
                    f"{ctx.position(method, use).line}); unpack it: ({node.value},) = ctx.{attribute}",
                )
                return

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
        # The tuple is unwrapped in a loop: the rebinding at the end of the body reaches the use.
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
                    x = ctx.saved_tensors
                    while isinstance(x, tuple):
                        x = x[0]
                    return 2 * x * grad
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
        # Used as a tensor before a later rebinding of the name.
        Invalid(
            """
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, grad):
                    x = ctx.saved_tensors
                    out = 2 * x * grad
                    x = None
                    return out
            """,
            line=11,
            message="binds x = ctx.saved_tensors, a tuple holding the one saved tensor, then uses it as a tensor (arithmetic, line 12)",
        ),
    ]
