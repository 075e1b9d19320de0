"""Small helpers that several rules share: message wording, which methods get ctx, and repeats on one path."""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst

from autograd_lint.model import flow, traverse
from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.semantic import MethodModel, none_padding
from autograd_lint.model.spec import CTX_METHODS, FunctionSpec, Kind, MethodSpec


def plural(count: int, word: str) -> str:
    """``1 input``, ``2 inputs``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def short(text: str, limit: int) -> str:
    """``text`` on one line, cut to at most ``limit`` characters (ending in ``...`` when cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_stub(body: Sequence[cst.BaseStatement]) -> bool:
    """A body that only holds a docstring, ``...``, ``pass`` or ``raise NotImplementedError``:
    a placeholder in a Function whose backward is not meant to run (forward-only
    operators, abstract bases)."""
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(
                small.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString)
            ):
                continue
            if isinstance(small, cst.Raise) and small.exc is not None:
                exc = small.exc.func if isinstance(small.exc, cst.Call) else small.exc
                if dotted_name(exc) in ("NotImplementedError", "builtins.NotImplementedError"):
                    continue
            return False
    return True


def only_raises(node: cst.FunctionDef | None) -> bool:
    """Whether the method's body ends in a top-level ``raise`` and returns nowhere."""
    if node is None or not isinstance(node.body, cst.IndentedBlock) or not node.body.body:
        return False
    last = node.body.body[-1]
    if not (isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Raise) for s in last.body)):
        return False
    return not any(isinstance(n, (cst.Return, cst.Yield)) for n in traverse.walk(node.body, scopes=False))


def takes_ctx(function: FunctionSpec, name: str) -> bool:
    """Whether the method ``name`` of ``function`` receives ctx as its first parameter:
    setup_context, backward, vjp, jvp..., and forward in combined style."""
    return name in CTX_METHODS or (name == "forward" and function.is_split_style is False)


def ctx_writers(function: FunctionSpec) -> list[MethodSpec]:
    """The methods that fill forward's ctx (ctx APIs, ctx attributes), where they exist:
    setup_context, and forward in combined style."""
    writers = [function.method("setup_context")]
    if function.is_split_style is False:
        writers.append(function.method("forward"))
    return [method for method in writers if method is not None]


def argument_range(function: FunctionSpec) -> tuple[int, int] | None:
    """How many arguments ``apply`` can pass on to forward's inputs: (fewest, most).

    Split style binds forward's defaults (``bind_default_args``), so every input
    is passed; combined style passes what the caller wrote, so an input with a
    default may be left out.  ``None`` when the inputs are unknown.
    """
    inputs = function.forward_inputs
    if inputs is None:
        return None
    if function.is_split_style:
        return len(inputs), len(inputs)
    return sum(1 for p in inputs if p.default is None), len(inputs)


def repeated_on_one_path(
    body: Sequence[cst.BaseStatement],
    nodes: Sequence[cst.CSTNode],
    weight: Callable[[cst.CSTNode], int] = lambda node: 1,
) -> tuple[cst.CSTNode, str] | None:
    """The first of ``nodes`` that can run a second time on one path through ``body``
    (see :func:`flow.first_repeated`), and how the message says so: ``inside a loop``
    or ``N times on one path``."""
    second = flow.first_repeated(body, nodes, weight)
    if second is None:
        return None
    ids = {id(node) for node in nodes}
    total = flow.most_on_one_path(body, lambda node: weight(node) if id(node) in ids else 0)
    in_loop = flow.most_on_one_path(body, lambda node: weight(node) if node is second else 0) > 1
    return second, "inside a loop" if in_loop else f"{total} times on one path"


def inputs_without_gradient(function: FunctionSpec) -> frozenset[int]:
    """Positions of the forward inputs whose gradient every ``return`` of backward (or vjp)
    spells ``None``: to this Function they are constants (ids, masks, frozen weights, options).

    Empty when backward is missing or some ``return`` has a shape syntax can't split
    (``return grads``, ``(None,) * k + (g,)``).
    """
    backward = function.backward_method
    if backward is None or not backward.returns:
        return frozenset()
    per_return = _none_positions(backward)
    if per_return is None:
        return frozenset()
    positions: set[int] | None = None
    for found in per_return:
        if found is None:
            return frozenset()
        positions = found if positions is None else positions & found
    return frozenset(positions or ())


def _none_positions(method: MethodSpec) -> list[set[int] | None] | None:
    """For each ``return`` of ``method``, the positions it spells ``None``: a tuple literal
    (with ``*[None] * k`` padding counted: ``return dx, *[None] * 10``) or a bare ``None``
    (position 0); None for a return of any other shape.  None without a semantic model."""
    model = method.semantic
    if model is None:
        return None
    found: list[set[int] | None] = []
    for ret in model.returns:
        value = ret.value
        if value is not None and isinstance(value, cst.Name) and value.value == "None":
            found.append({0})
            continue
        elements = ret.elements
        if elements is not None:
            found.append({i for i, e in enumerate(elements) if model.kind(e) is Kind.NONE})
            continue
        if not isinstance(value, cst.Tuple):
            found.append(None)
            continue
        nones: set[int] = set()
        position = 0
        for element in value.elements:
            if isinstance(element, cst.StarredElement):
                count = none_padding(element.value)
                if count is None:
                    break  # positions from here on are unknown
                nones.update(range(position, position + count))
                position += count
            else:
                if model.kind(element.value) is Kind.NONE:
                    nones.add(position)
                position += 1
        found.append(nones)
    return found


def gradient_given(function: FunctionSpec, position: int) -> bool | None:
    """Whether backward (or vjp) may give forward's ``position``-th input a gradient: True
    when some ``return`` has at that position anything but ``None`` or zeros
    (``torch.zeros_like(...)``, ``x.new_zeros(...)``: the input is a constant there too),
    False when every ``return`` certainly has one of those there, None when that can't be told (backward
    missing or without a ``return``, or a ``return`` of a shape syntax can't split,
    such as ``return grads`` or ``return helper(ctx, g)``, unless forward takes one
    input: then that value is its gradient)."""
    backward = function.backward_method
    model = backward.semantic if backward is not None else None
    if model is None or not model.returns:
        return None
    decided = True
    for ret in model.returns:
        positions = model.return_positions(ret)
        if positions is None and ret.value is not None and function.n_inputs == 1:
            # With one input, whatever backward returns is that input's gradient (or a
            # 1-tuple holding it): `return kernel_backward(grad)`.
            if position == 0 and model.kind(ret.value) is not Kind.NONE:
                return True
        if positions is None:
            decided = False
            continue
        elements, complete = positions
        if position < len(elements):
            element = elements[position]
            if element is not None and model.kind(element) is not Kind.NONE and not _is_zeros(model, element):
                return True
        else:  # past the end: unknown after a starred element, too few gradients otherwise
            decided = False
    return False if decided else None


_ZEROS = frozenset({"torch.zeros_like", "torch.zeros"})


def _is_zeros(model: MethodModel, expr: cst.BaseExpression) -> bool:
    """``torch.zeros_like(...)``, ``torch.zeros(...)`` or ``x.new_zeros(...)``."""
    if not isinstance(expr, cst.Call):
        return False
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "new_zeros":
        return True
    name = dotted_name(expr.func)
    return name is not None and model.imports.resolve(name) in _ZEROS
