"""AGL007: backward (or vjp) mutates an incoming gradient in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import libcst as cst

from autograd_lint.model.exprs import node_code
from autograd_lint.model.semantic import SHAPE_ONLY_INPLACE, Binding, HelperCall, How, InplaceWrite, MethodModel
from autograd_lint.model.spec import ParamKind, Position
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)

# List methods that change which tensors a boxed grads list holds, not the tensors.
_LIST_METHODS = frozenset("append extend insert pop remove clear reverse sort".split())


@dataclass(frozen=True)
class _Write:
    """An in-place write to an incoming gradient, as reported."""

    node: cst.CSTNode
    name: str
    how: str
    helper: HelperCall | None = None


def _is_element(expr: cst.BaseExpression | None, sequence: Binding, semantic: MethodModel) -> bool:
    """Whether ``expr`` is ``<sequence>[<int>]`` with the sequence parameter's own value."""
    return (
        isinstance(expr, cst.Subscript)
        and isinstance(expr.value, cst.Name)
        and sequence in semantic.reaching(expr.value)
        and len(expr.slice) == 1
        and isinstance(expr.slice[0].slice, cst.Index)
        and isinstance(expr.slice[0].slice.value, cst.Integer)
    )


def _writes_parameter_itself(write: InplaceWrite, binding: Binding, semantic: MethodModel) -> bool:
    """Whether ``write`` is a shape-only change of a view of ``binding``, not of its object."""
    if write.how.removesuffix("()") not in SHAPE_ONLY_INPLACE:
        return True
    target = write.target
    return isinstance(target, cst.Name) and any(
        not b.is_rebinding and b.roots() == {binding} for b in semantic.reaching(target)
    )


def _line_column(position: Position) -> tuple[int, int]:
    return position.line, position.column


def _how(write: InplaceWrite) -> str:
    """How ``write`` writes, as the message says it (``+=`` rather than ``AddAssign``)."""
    if isinstance(write.node, cst.AugAssign) and isinstance(write.target, cst.Name):
        return _operator(write.node)
    return write.how


def _operator(node: cst.AugAssign) -> str:
    return node_code(node.operator).strip()


class _Gradients:
    """The in-place writes of one backward/vjp body to the gradients it receives."""

    def __init__(self, semantic: MethodModel, position: Callable[[cst.CSTNode], tuple[int, int]]) -> None:
        self.semantic = semantic
        self.position = position

    def of_parameter(self, binding: Binding, through_helpers: list[InplaceWrite]) -> Iterator[_Write]:
        """Writes to the object of gradient parameter ``binding`` (also through views), in
        the body and in the same-module helpers it hands the object to (``through_helpers``)."""
        for write in self.semantic.writes_to(binding):
            if not write.self_copy and _writes_parameter_itself(write, binding, self.semantic):
                yield _Write(write.node, binding.name, _how(write))
        for write in through_helpers:
            if binding in write.origins:
                yield _Write(write.node, binding.name, write.how, write.helper)

    def of_elements(self, sequence: Binding) -> Iterator[_Write]:
        """Writes to the gradients held by the sequence parameter ``sequence``
        (``grads[0].mul_()``, ``g0, g1 = grads; g0 += 1``), before the sequence
        itself is changed (rebound, an item replaced, a list method called)."""
        semantic = self.semantic
        elements = [
            b for name in semantic.bindings for b in semantic.bindings_of(name) if self._from_sequence(b, sequence)
        ]
        found: list[_Write] = []
        for write in semantic.inplace_writes:
            if write.self_copy:
                continue
            if _is_element(write.target, sequence, semantic):
                found.append(_Write(write.node, sequence.name, _how(write)))
            else:
                held = [root for root in write.origins if root in elements]
                if held:
                    found.append(_Write(write.node, held[0].name, _how(write)))
        for name in semantic.bindings:  # `g0 += 1` on an element whose kind the model leaves open
            for binding in semantic.bindings_of(name):
                site = binding.site
                if (
                    binding.how is How.AUGMENTED
                    and isinstance(site, cst.AugAssign)
                    and isinstance(site.target, cst.Name)
                    and any(b in elements for b in semantic.reaching(site.target))
                ):
                    found.append(_Write(site, name, _operator(site)))
        limit = self._first_change(sequence)
        for write in found:
            if limit is None or self.position(write.node) < limit:
                yield write

    def _first_change(self, sequence: Binding) -> tuple[int, int] | None:
        semantic = self.semantic
        # A write through an element (`grads[0].mul_()`) changes a gradient, not the sequence.
        sites: list[cst.CSTNode] = [w.node for w in semantic.writes_to(sequence) if w.through is None]
        sites += [b.site for b in semantic.bindings_of(sequence.name) if b.is_rebinding]
        for callee, call in semantic.calls:
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in _LIST_METHODS
                and isinstance(func.value, cst.Name)
                and sequence in semantic.reaching(func.value)
            ):
                sites.append(call)
        return min((self.position(site) for site in sites), default=None)

    def _from_sequence(self, binding: Binding, sequence: Binding) -> bool:
        """Whether ``binding`` takes one of the sequence's gradients (``g0, g1 = grads``, ``g = grads[0]``)."""
        unpacking = self.semantic.unpacking_of(binding)
        if unpacking is not None:
            value = unpacking.value
            return isinstance(value, cst.Name) and sequence in self.semantic.reaching(value)
        return binding.how is How.ASSIGNMENT and _is_element(binding.value, sequence, self.semantic)


class GradientMutatedInPlace(Rule):
    """Reports an in-place write (``g.mul_(...)``, ``g += ...``, ``g[...] = ...``,
    ``out=g``, ``torch.<op>_(g)``, a collective such as ``dist.all_reduce(g)``, also
    through a view of ``g``, or a call of a function of the same module whose body writes
    that parameter so, as ``_all_reduce(g)``) to a gradient that backward or vjp
    receives, before the name is rebound (``g = g.clone()``).  With
    ``boxed_grads_call = True`` or ``*grads``, writes to the elements
    (``grads[0].mul_(...)``, or names unpacked from the list) are reported, and
    operations on the list itself (``grads.clear()``, ``grads[0] = ...``) are not.
    Code that reuses gradient memory on purpose can say so with ``# noqa: AGL007``."""

    code = "AGL007"
    title = "backward mutates an incoming gradient in place"
    severity = Severity.WARNING
    why = (
        "Silently wrong gradients that depend on execution order: the gradient tensor may be "
        "shared with another branch of the graph (`s = Id.apply(b) + F.apply(a)` where "
        "F.backward does `g.mul_(2)` gives `b.grad` 2.0, correct 1.0) or be the tensor the "
        "user passed to `y.backward(gy)`, which is changed. When the gradient is an expanded "
        "tensor: `RuntimeError: unsupported operation: more than one element of the "
        "written-to tensor refers to a single memory location. Please clone() the tensor "
        "before performing the operation.`"
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        boxed = function.attribute_is_true("boxed_grads_call")
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            if method is None or not ctx.own(method) or method.semantic is None:
                continue
            semantic = method.semantic
            gradients = _Gradients(semantic, lambda node: _line_column(ctx.position(method, node)))
            grads = [semantic.params[p.name] for p in method.positional[1:] if p.name in semantic.params]
            sequences = [
                semantic.params[p.name] for p in method.params
                if p.kind is ParamKind.VAR_POSITIONAL and p.name in semantic.params
            ]
            if boxed and len(grads) == 1:
                sequences, grads = sequences + grads, []
            through_helpers = ctx.analysis.helper_writes(method) if grads else []
            writes = [w for g in grads for w in gradients.of_parameter(g, through_helpers)]
            writes += [w for s in sequences for w in gradients.of_elements(s)]
            reported: set[int] = set()
            for write in writes:
                if id(write.node) in reported:
                    continue
                reported.add(id(write.node))
                how = f"({write.how})"
                if write.helper is not None:
                    how = write.helper.describe(write.how)
                yield Report(
                    ctx.position(method, write.node),
                    f"{function.name}.{name} writes the incoming gradient `{write.name}` in place {how}; clone it first",
                )

    VALID = [
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    out = grad * 2
                    out.add_(1)
                    return out
            """
        ),
        # Trap 13: the gradient is cloned (rebound) before it is written in place.
        Valid(
            """
            import torch

            class Clip(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.clamp(-1, 1)

                @staticmethod
                def backward(ctx, grad_output):
                    (x,) = ctx.saved_tensors
                    grad_output = grad_output.clone()
                    grad_output[x.abs() > 1] = 0
                    grad_output.mul_(1.0)
                    return grad_output
            """
        ),
        # Trap 13: with boxed_grads_call, list operations on `grads` are intended.
        Valid(
            """
            import torch

            class Boxed(torch.autograd.Function):
                boxed_grads_call = True

                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, grads):
                    grads[0] = grads[0] * 2
                    grads[1] = grads[1] * 3
                    total = grads[0] + grads[1]
                    grads.clear()
                    return total
            """
        ),
        # Trap 12: requires_grad_() does not write tensor data.
        Valid(
            """
            import torch

            class Recompute(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.sin()

                @staticmethod
                def backward(ctx, grad):
                    grad.requires_grad_(False)
                    return grad.neg()
            """
        ),
        # A rebound gradient is a new view: a shape-only in-place change of it leaves the
        # incoming gradient alone (linear_operator's _inv_quad_logdet backward).
        Valid(
            """
            import torch

            class InvQuad(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.sum((-1, -2))

                @staticmethod
                def backward(ctx, g):
                    g = g.unsqueeze(-1)
                    g.unsqueeze_(-1)
                    return g.expand(2, 3, 4)
            """
        ),
        # Helpers whose writes are not the caller's gradient: one rebinds its parameter to
        # a copy first, one writes only when a flag the caller passes says so, one is
        # defined twice (which one runs can't be told), and a call with `*args`.
        Valid(
            """
            import torch

            def _scaled(t, k):
                t = t.clone()
                t.mul_(k)
                return t

            def _maybe_scale(t, k, inplace=False):
                if inplace:
                    t.mul_(k)
                    return t
                return t * k

            def _twice(t):
                return t.add_(1)

            def _twice(t):
                return t + 1

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 4

                @staticmethod
                def backward(ctx, grad):
                    args = (grad, 2)
                    return _scaled(grad, 2) + _maybe_scale(grad, 2) + _twice(grad) + _scaled(*args)
            """
        ),
        # A self-copy does not change the gradient's values.
        Valid(
            """
            import torch

            class Touch(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad_output):
                    grad_output.copy_(grad_output)
                    return grad_output * 2
            """
        ),
    ]
    INVALID = [
        # A helper of the module writes its parameter in place: the caller's gradient
        # (ColossalAI comm_spec `_ReduceGrad`; bench/recreate/helper_inplace.py: a gradient
        # shared with `Id(b)` gives b.grad [2, 4, 6] where [1, 2, 3] is right).
        Invalid(
            """
            import torch
            import torch.distributed as dist

            def _all_reduce(tensor, group=None):
                if not tensor.is_contiguous():
                    tensor = tensor.contiguous()
                dist.all_reduce(tensor, group=group)
                return tensor

            class ReduceGrad(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, group):
                    ctx.group = group
                    return x

                @staticmethod
                def backward(ctx, grad_output):
                    return _all_reduce(grad_output, ctx.group), None
            """,
            line=18,
            message="ReduceGrad.backward writes the incoming gradient `grad_output` in place through "
            "`_all_reduce` (torch.distributed.all_reduce() on line 7); clone it first",
        ),
        # `f(g, ..., inplace=True)` writes g (bench/recreate/inplace_keyword.py: the expanded
        # gradient of `.sum()` raises `more than one element of the written-to tensor ...`).
        Invalid(
            """
            import torch
            from .kernels import apply_rotary

            class Rotary(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, cos):
                    ctx.save_for_backward(cos)
                    return apply_rotary(x, cos)

                @staticmethod
                def backward(ctx, g):
                    (cos,) = ctx.saved_tensors
                    return apply_rotary(g, cos, inplace=True, conjugate=True), None
            """,
            line=13,
            message="Rotary.backward writes the incoming gradient `g` in place (apply_rotary(..., inplace=True))",
        ),
        # A collective on the incoming gradient writes it in place.
        Invalid(
            """
            import torch
            from torch.distributed import all_reduce

            class Copy(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    all_reduce(grad)
                    return grad
            """,
            line=11,
            message="Copy.backward writes the incoming gradient `grad` in place (torch.distributed.all_reduce())",
        ),
        Invalid(
            """
            import torch

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    grad.mul_(2)
                    return grad
            """,
            line=10,
            message="Double.backward writes the incoming gradient `grad` in place (mul_())",
        ),
        Invalid(
            """
            import torch

            class Relu(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.clamp(min=0)

                @staticmethod
                def backward(ctx, grad_output):
                    (x,) = ctx.saved_tensors
                    flat = grad_output.view(-1)
                    flat[x.view(-1) < 0] = 0
                    return grad_output
            """,
            line=13,
            message="`grad_output` in place ([...] =)",
        ),
        Invalid(
            """
            import torch

            class Boxed(torch.autograd.Function):
                boxed_grads_call = True

                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, grads):
                    grads[0].mul_(2)
                    g1 = grads[1]
                    g1 += 1
                    return grads[0] + g1
            """,
            line=12,
            message="Boxed.backward writes the incoming gradient `grads` in place (mul_())",
        ),
        Invalid(
            """
            import torch

            class Many(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def vjp(ctx, *grads):
                    g0, g1 = grads
                    torch.add(g0, g1, out=g0)
                    return g0
            """,
            line=11,
            message="Many.vjp writes the incoming gradient `g0` in place (out=)",
        ),
        # Written in place on one branch only, through a name that aliases the gradient there.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, fast: bool):
                    ctx.fast = fast
                    return x * 2

                @staticmethod
                def backward(ctx, grad_output):
                    if ctx.fast:
                        out = grad_output
                    else:
                        out = grad_output.clone()
                    out.mul_(2)
                    return out, None
            """,
            line=15,
            message="Scale.backward writes the incoming gradient `grad_output` in place (mul_())",
        ),
    ]
