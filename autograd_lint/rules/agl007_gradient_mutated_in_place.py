"""AGL007: backward (or vjp) mutates an incoming gradient in place."""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.flow import (
    InplaceWrite,
    ScopeVisitor,
    inplace_writes,
    is_inplace_name,
    method_body,
)
from autograd_lint.model.imports import ImportMap
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model import semantic
from autograd_lint.model.spec import MethodSpec, ParamKind

# List methods that change which tensors a boxed grads list holds, not the tensors.
_LIST_METHODS = frozenset("append extend insert pop remove clear reverse sort".split())


def _element_index(node: cst.BaseExpression, sequence: str) -> bool:
    """Whether ``node`` is ``<sequence>[<int>]``."""
    return (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Name)
        and node.value.value == sequence
        and len(node.slice) == 1
        and isinstance(node.slice[0].slice, cst.Index)
        and isinstance(node.slice[0].slice.value, cst.Integer)
    )


def _changes_sequence(statement: cst.CSTNode, sequence: str) -> bool:
    """Whether ``statement`` rebinds ``sequence``, replaces one of its items or calls a
    list method on it: from there on its items may no longer be the incoming gradients."""
    found = False

    class _Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name):
                    found = found or t.value.value == sequence
                elif isinstance(t, cst.Name):
                    found = found or t.value == sequence

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                found = found or (func.value.value == sequence and func.attr.value in _LIST_METHODS)

    traverse.visit(statement, _Visitor())
    return found


def _element_writes(
    body: Sequence[cst.BaseStatement], sequence: str, imports: ImportMap
) -> list[InplaceWrite]:
    """In-place writes on ``<sequence>[<int>]`` directly, and on names unpacked from
    ``sequence`` (``g0, g1 = grads``, ``g = grads[0]``) by a top-level statement,
    until the sequence or its items are changed (in text order)."""
    found: list[InplaceWrite] = []
    for index, statement in enumerate(body):
        if _changes_sequence(statement, sequence):
            break
        found.extend(_direct_writes(statement, sequence, imports))
        unpacked = _unpacked_names(statement, sequence)
        if unpacked:
            found.extend(inplace_writes(body[index + 1:], unpacked, imports, lambda name: True))
    return found


def _unpacked_names(statement: cst.CSTNode, sequence: str) -> set[str]:
    names: set[str] = set()
    if not isinstance(statement, cst.SimpleStatementLine):
        return names
    for small in statement.body:
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            continue
        target = small.targets[0].target
        if isinstance(small.value, cst.Name) and small.value.value == sequence:
            if isinstance(target, (cst.Tuple, cst.List)):
                names.update(
                    e.value.value for e in target.elements if isinstance(e.value, cst.Name)
                )
        elif _element_index(small.value, sequence) and isinstance(target, cst.Name):
            names.add(target.value)
    return names


def _direct_writes(statement: cst.CSTNode, sequence: str, imports: ImportMap) -> list[InplaceWrite]:
    found: list[InplaceWrite] = []

    class _Visitor(ScopeVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute):
                name = dotted_name(func)
                qualified = imports.resolve(name) if name else None
                if qualified and qualified.startswith("torch."):
                    short = qualified.rsplit(".", 1)[-1]
                    if is_inplace_name(short) and node.args and _element_index(node.args[0].value, sequence):
                        found.append(InplaceWrite(sequence, node, f"{name}()"))
                elif is_inplace_name(func.attr.value) and _element_index(func.value, sequence):
                    found.append(InplaceWrite(sequence, node, f"{func.attr.value}()"))
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "out" and _element_index(arg.value, sequence):
                    found.append(InplaceWrite(sequence, node, "out="))

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Subscript) and _element_index(t.value, sequence):
                    found.append(InplaceWrite(sequence, node, "[...] ="))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            t = node.target
            if _element_index(t, sequence) or (isinstance(t, cst.Subscript) and _element_index(t.value, sequence)):
                found.append(InplaceWrite(sequence, node, "op="))

    traverse.visit(statement, _Visitor())
    return found


# In-place methods that change only a tensor's view of its data (shape, strides), not the data.
_METADATA_ONLY = frozenset("unsqueeze_ squeeze_ transpose_ t_ swapdims_ swapaxes_ as_strided_ resize_as_ resize_".split())


def _gradient_writes(method: MethodSpec, grads: list[str]) -> Iterator[tuple[semantic.InplaceWrite, str]]:
    """In-place writes (from the semantic model) to the data of a gradient parameter,
    directly or through a view; a metadata-only change (``unsqueeze_``) of a view bound
    to another name leaves the incoming gradient as it is."""
    model = method.semantic
    if model is None:
        return
    params = {model.params[g] for g in grads if g in model.params}
    for write in model.inplace_writes:
        touched = write.origins & params
        if len(touched) != 1 or write.self_copy:
            continue
        if write.how.removesuffix("()") in _METADATA_ONLY and not _is_the_parameter(model, write.target):
            continue
        yield write, next(iter(touched)).name


def _is_the_parameter(model: semantic.MethodModel, target: cst.BaseExpression) -> bool:
    return isinstance(target, cst.Name) and all(
        b.how is semantic.How.PARAMETER for b in model.reaching(target)
    )


class GradientMutatedInPlace(Rule):
    """Reports an in-place write (``g.mul_(...)``, ``g += ...``, ``g[...] = ...``,
    ``out=g``, ``torch.<op>_(g)``, also through a view of ``g``) to a gradient that
    backward or vjp receives, before the name is rebound (``g = g.clone()``).  With
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
        imports = ctx.analysis.imports
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            if method is None or not ctx.own(method) or method.node is None:
                continue
            body = method_body(method.node)
            grads = self._grad_parameters(method)
            sequences = [p.name for p in method.params if p.kind is ParamKind.VAR_POSITIONAL]
            if boxed and len(grads) == 1:
                sequences.append(grads[0])
                grads = []
            writes = [(w.node, w.how, name_) for w, name_ in _gradient_writes(method, grads)]
            for sequence in sequences:
                writes.extend((w.node, w.how, w.name) for w in _element_writes(body, sequence, imports))
            reported: set[int] = set()
            for node, how, grad in writes:
                if id(node) in reported:
                    continue
                reported.add(id(node))
                yield Report(
                    ctx.position(method, node),
                    f"{function.name}.{name} writes the incoming gradient `{grad}` in "
                    f"place ({how}); clone it first",
                )

    @staticmethod
    def _grad_parameters(method: MethodSpec) -> list[str]:
        """The positional parameters after ctx (after cls and ctx for a classmethod)."""
        skip = 1
        return [p.name for p in method.positional[skip:]]

    VALID = [
        # A metadata-only change of a view bound to a new name leaves the gradient's data alone.
        Valid(
            """
            import torch

            class Logdet(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor):
                    return x.sum((-1, -2))

                @staticmethod
                def backward(ctx, g):
                    g = g.unsqueeze(-1)
                    g.unsqueeze_(-1)
                    return g.expand(*g.shape[:-2], 3, 3).clone()
            """
        ),
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
    ]
    INVALID = [
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
    ]
