"""Queries the custom-op rules (AGL101-AGL117) share over :mod:`autograd_lint.model.custom_ops`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.custom_ops import CustomOpModule, CustomOpSpec, OpFunction, Registration
from autograd_lint.model.exprs import is_none
from autograd_lint.model.flow import ScopeVisitor, return_statements
from autograd_lint.model.semantic import How

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis

# Annotations infer_schema maps to a Tensor argument.
_TENSOR = re.compile(r"^(?:torch\.)?Tensor$")
_TENSOR_LIKE = re.compile(
    r"^(?:typing\.)?(?:Optional\[(?:torch\.)?Tensor\]|(?:torch\.)?Tensor\s*\|\s*None|None\s*\|\s*(?:torch\.)?Tensor"
    r"|(?:List|list|Sequence)\[(?:torch\.)?Tensor\]|(?:List|list|Sequence)\[Optional\[(?:torch\.)?Tensor\]\])$"
)
# Annotations of arguments that are never tensors (their gradient must be None).
NON_TENSOR_ANNOTATIONS = frozenset(
    "int float bool str complex torch.dtype torch.device dtype device torch.types.Number "
    "SymInt torch.SymInt torch.SymFloat torch.SymBool".split()
)


def module_of(analysis: "FileAnalysis") -> CustomOpModule | None:
    return analysis.custom_ops


def is_tensor_like_annotation(annotation: str | None) -> bool:
    """Tensor, Optional[Tensor], list of Tensors: the annotations of arguments a kernel can write to."""
    if annotation is None:
        return False
    text = annotation.strip().replace(" ", "")
    return _TENSOR.match(text) is not None or _TENSOR_LIKE.match(annotation.strip()) is not None


def is_tensor_annotation(annotation: str | None) -> bool:
    """``Tensor`` or ``torch.Tensor``: an argument that is one tensor."""
    return annotation is not None and _TENSOR.match(annotation.strip().replace(" ", "")) is not None


def is_non_tensor_annotation(annotation: str | None) -> bool:
    return annotation is not None and annotation.strip() in NON_TENSOR_ANNOTATIONS


def registrations(analysis: "FileAnalysis", kind: str) -> Iterator[tuple[CustomOpSpec, Registration]]:
    """The registrations of ``kind`` written in this file, each with its op."""
    module = module_of(analysis)
    if module is None:
        return
    for op, registration in module.registrations_here():
        if registration.kind == kind:
            yield op, registration


def own_ops(analysis: "FileAnalysis") -> Iterator[CustomOpSpec]:
    module = module_of(analysis)
    if module is not None:
        yield from module.ops




def returned_values(function: OpFunction) -> list[cst.BaseExpression | None] | None:
    """The expressions ``function`` returns (a lambda's body; each ``return`` of a def)."""
    node = function.node
    if isinstance(node, cst.Lambda):
        return [node.body]
    if isinstance(node, cst.FunctionDef):
        return [r.value for r in return_statements(node)]
    return None


def value_count(value: cst.BaseExpression | None, function: OpFunction) -> int | None:
    """How many values a returned expression holds: a tuple literal's elements (a
    starred ``*((None,) * k)`` or ``*[None] * k`` counts k), 1 for an expression that is
    certainly one value; None when syntax can't tell."""
    if value is None:
        return None
    if isinstance(value, cst.Tuple):
        count = 0
        for element in value.elements:
            if isinstance(element, cst.StarredElement):
                repeated = _repeated_none(element.value)
                if repeated is None:
                    return None
                count += repeated
            else:
                count += 1
        return count
    if isinstance(value, cst.Name):
        if value.value in gradient_names(function):
            return 1  # a gradient argument is one tensor
        return _name_count(value.value, function)
    if isinstance(value, cst.UnaryOperation) and not isinstance(value.operator, cst.Not):
        return 1
    if isinstance(value, cst.BinaryOperation):
        if not isinstance(value.operator, (cst.Add, cst.Multiply, cst.Modulo)):
            return 1
        # `+` and `*` build tuples too; with a gradient (a tensor) as an operand they can't.
        return 1 if _uses_gradient(value, gradient_names(function)) else None
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value in _SINGLE_METHODS and _uses_gradient(value.func.value, gradient_names(function)):
            return 1
    return None


# Tensor methods that return one tensor.
_SINGLE_METHODS = frozenset(
    "clone sum mul div add sub neg exp log sin cos view reshape expand expand_as contiguous to float "
    "masked_fill matmul mm bmm t transpose permute unsqueeze squeeze abs sign sqrt mul_ add_ div_".split()
)


def gradient_names(function: OpFunction) -> frozenset[str]:
    """The parameters of a backward that receive the output gradients (all but ctx)."""
    node = function.node
    if isinstance(node, (cst.FunctionDef, cst.Lambda)):
        params = [p.name.value for p in node.params.params]
        return frozenset(params[1:])
    return frozenset()


def _uses_gradient(value: cst.BaseExpression, names: frozenset[str]) -> bool:
    if isinstance(value, cst.Name):
        return value.value in names
    if isinstance(value, cst.BinaryOperation):
        return _uses_gradient(value.left, names) or _uses_gradient(value.right, names)
    if isinstance(value, cst.UnaryOperation):
        return _uses_gradient(value.expression, names)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        return value.func.attr.value in _SINGLE_METHODS and _uses_gradient(value.func.value, names)
    return False


def _repeated_none(value: cst.BaseExpression) -> int | None:
    """k for ``(None,) * k`` / ``[None] * k`` / ``(None,) * k`` in parentheses, with k an integer literal."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        left, right = value.left, value.right
        if isinstance(left, cst.Integer):
            left, right = right, left
        if isinstance(left, (cst.Tuple, cst.List)) and isinstance(right, cst.Integer):
            if all(isinstance(e, cst.Element) and is_none(e.value) for e in left.elements):
                return len(left.elements) * int(right.value)
    if isinstance(value, (cst.Tuple, cst.List)) and all(isinstance(e, cst.Element) for e in value.elements):
        return len(value.elements)
    return None


def _name_count(name: str, function: OpFunction) -> int | None:
    """The count of a local bound exactly once (the semantic model's bindings: any other
    binding, a parameter, a loop, ``+=``, a walrus, makes it unknown), to a tuple literal."""
    model = function.method.semantic if function.method is not None else None
    if model is None or not isinstance(function.node, cst.FunctionDef) or model.node is not function.node:
        return None
    bindings = model.bindings_of(name)
    if len(bindings) != 1:
        return None
    (binding,) = bindings
    if binding.how is How.ASSIGNMENT and isinstance(binding.value, cst.Tuple):
        return value_count(binding.value, function)
    return None


def gradient_counts(function: OpFunction) -> set[int] | None:
    """How many gradients each ``return`` of a backward gives; None when one can't be counted."""
    values = returned_values(function)
    if not values:
        return None
    counts: set[int] = set()
    for value in values:
        count = value_count(value, function)
        if count is None:
            return None
        counts.add(count)
    return counts


def tensor_parameters(function: OpFunction, op: CustomOpSpec) -> set[str]:
    """The names ``function`` (a fake kernel, a kernel) gives the op's Tensor parameters, matched by position."""
    node = function.node
    if not isinstance(node, (cst.FunctionDef, cst.Lambda)):
        return set()
    names = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
    return {
        name for name, param in zip(names, op.positional) if is_tensor_like_annotation(param.annotation)
    }




def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    """Every call in ``node``'s body, nested scopes excluded."""
    found: list[cst.Call] = []

    class _Calls(ScopeVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.append(call)

    if isinstance(node, cst.FunctionDef):
        for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else (node.body,):
            traverse.visit(statement, _Calls())
    elif isinstance(node, cst.Lambda):
        traverse.visit(node.body, _Calls())
    else:
        traverse.visit(node, _Calls())
    return found
