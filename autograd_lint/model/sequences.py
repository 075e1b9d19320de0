"""Tuples whose length and elements syntax can tell, though no tuple literal is written:
literals joined by ``+`` and repeated by ``*`` (``(None,) * 2 + (dx,)``), and
``tuple(name)`` of a list built by ``append``/``extend`` of known length::

    results = [None, None]
    if input.requires_grad:
        results.append(grad_input)
    else:
        results.append(None)
    results.extend([None] * 2)
    return tuple(results)          # 5 elements; the third grad_input or None

Each position holds the values it may take (one per branch that reaches the ``tuple``
call).  Where the length can't be told (a loop, a branch that appends more than the
other, a call that receives the list, an ``extend`` of a name, the list read in a nested
scope), there is no answer: the rules that read positions stay silent.

A list itself (``return results``) is one value to autograd, not a sequence of
gradients (torch 2.13: ``returned an incorrect number of gradients (expected 2, got 1)``),
so only ``tuple(...)`` and tuple literals give positions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import libcst as cst

from autograd_lint.model.exprs import dotted_name, is_none

if TYPE_CHECKING:
    from autograd_lint.model.semantic import Binding, MethodModel

# Per position, the values it may hold.
Positions = list[list[cst.BaseExpression]]
# Longer repetitions are not followed (`[None] * 1000` is no gradient list).
_MAX_LENGTH = 64
# A branch that leaves the block (return, raise) and so never reaches the tuple.
_EXITS = object()
# The positions a name stands for inside a literal expression, or None.
Named = Callable[[cst.Name], "Positions | None"]


def literal_positions(
    node: cst.BaseExpression, kinds: tuple[type, ...] = (cst.List, cst.Tuple), named: Named | None = None
) -> Positions | None:
    """The positions of a literal of one of ``kinds``, or of literals joined by ``+`` and
    repeated by an integer literal with ``*`` (starred literals inside included).
    ``named`` gives the positions of a name standing among them (``(None,) + grads``)."""
    if named is not None and isinstance(node, cst.Name):
        return named(node)
    if isinstance(node, kinds):
        found: Positions = []
        for element in node.elements:  # type: ignore[attr-defined]
            if isinstance(element, cst.StarredElement):
                inner = literal_positions(element.value, named=named)
                if inner is None:
                    return None
                found.extend(inner)
            else:
                found.append([element.value])
        return found if len(found) <= _MAX_LENGTH else None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        left, right = literal_positions(node.left, kinds, named), literal_positions(node.right, kinds, named)
        if left is None or right is None or len(left) + len(right) > _MAX_LENGTH:
            return None
        return left + right
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        sequence, count = node.left, node.right
        if isinstance(sequence, cst.Integer):
            sequence, count = count, sequence
        if not isinstance(count, cst.Integer):
            return None
        try:
            times = int(count.value, 0)
        except ValueError:
            return None
        inner = literal_positions(sequence, kinds, named)
        if inner is None or len(inner) * times > _MAX_LENGTH:
            return None
        return [list(position) for _ in range(max(times, 0)) for position in inner]
    return None


def tuple_positions(model: MethodModel, ret: cst.Return) -> Positions | None:
    """The positions of the tuple ``ret`` returns, when it is not a plain tuple literal:
    tuple literals joined by ``+``/``*``, or ``tuple(x)`` of a list literal or a list
    built by appends (see the module).  A name among the joined tuples (``(None,) * 2 +
    grads``, ``(None, *grads)``) stands for the tuple literal that alone reaches it.  None
    for anything else."""
    value = ret.value
    if value is None:
        return None
    if isinstance(value, (cst.BinaryOperation, cst.Tuple)):
        return literal_positions(value, (cst.Tuple,), lambda name: _bound_tuple(model, name))
    if not (
        isinstance(value, cst.Call)
        and dotted_name(value.func) == "tuple"
        and not model.is_bound("tuple")
        and len(value.args) == 1
        and value.args[0].keyword is None
        and not value.args[0].star
    ):
        return None
    argument = value.args[0].value
    if isinstance(argument, cst.Name):
        return built_list(model, argument, ret)
    return literal_positions(argument)


def _sole_assignment(model: MethodModel, name: cst.Name) -> Binding | None:
    """The one plain assignment, with a value, that reaches ``name``, when no nested scope
    uses the name (a closure could rebind it); None otherwise."""
    binding = model.only_assignment(name)
    if binding is None or binding.value is None or binding.name in model.nested_uses:
        return None
    return binding


def _bound_tuple(model: MethodModel, name: cst.Name) -> Positions | None:
    """The positions of the tuple literal (or literals joined by ``+``/``*``) that is the
    one assignment reaching ``name``; a tuple can't grow in place, so its other uses don't
    matter, but a nested scope that rebinds it might."""
    binding = _sole_assignment(model, name)
    return None if binding is None else literal_positions(binding.value, (cst.Tuple,))


def built_list(model: MethodModel, name: cst.Name, ret: cst.Return) -> Positions | None:
    """The positions of the list ``name`` holds at ``ret``: bound once to a literal in the
    same block as ``ret``, then grown only by ``name.append(x)`` and ``name.extend(literal)``
    statements in that block or in ``if``/``else`` branches that add as many (a branch
    that returns or raises doesn't count), and read nowhere else."""
    binding = _sole_assignment(model, name)
    if binding is None:
        return None
    start = literal_positions(binding.value)
    site_line, return_line = model.parent(binding.site), model.parent(ret)
    if start is None or not isinstance(site_line, cst.SimpleStatementLine) or len(site_line.body) != 1:
        return None
    block = model.parent(site_line)
    if not isinstance(return_line, cst.SimpleStatementLine) or model.parent(return_line) is not block:
        return None
    body = list(getattr(block, "body", ()))
    first, last = _index(body, site_line), _index(body, return_line)
    if first is None or last is None or last <= first:
        return None
    growths: dict[int, cst.BaseExpression] = {}  # id(statement line) -> the call
    holders: set[int] = set()
    for use in model.uses(binding):
        if _call_argument(model, use, ret):
            continue
        line = _growth(model, use)
        if line is None:
            return None
        growths[id(line)] = line
        holders.update(id(node) for node, _ in model.ancestors(use))
    state = _replay(body[first + 1 : last], [list(p) for p in start], growths, holders)
    return None if state is None or state is _EXITS else state  # type: ignore[return-value]


def representatives(positions: Positions) -> tuple[cst.BaseExpression, ...]:
    """One value per position, for rules that read one: a value other than ``None`` when
    some branch puts one there (the position may get a gradient), else ``None``."""
    return tuple(next((v for v in values if not is_none(v)), values[0]) for values in positions)


def _index(body: list[cst.BaseStatement], line: cst.CSTNode) -> int | None:
    return next((i for i, statement in enumerate(body) if statement is line), None)


def _call_argument(model: MethodModel, use: cst.Name, ret: cst.Return) -> bool:
    """Whether ``use`` is the argument of ``ret``'s ``tuple(...)``."""
    arg = model.parent(use)
    return isinstance(arg, cst.Arg) and model.parent(arg) is ret.value


def _growth(model: MethodModel, use: cst.Name) -> cst.SimpleStatementLine | None:
    """The statement line of ``use.append(x)`` or ``use.extend(literal)`` standing alone, if
    ``use`` is the list there (one plain argument, not reading the list itself)."""
    attribute = model.parent(use)
    if not isinstance(attribute, cst.Attribute) or attribute.value is not use:
        return None
    if attribute.attr.value not in ("append", "extend"):
        return None
    call = model.parent(attribute)
    expr = model.parent(call) if call is not None else None
    line = model.parent(expr) if expr is not None else None
    if not (
        isinstance(call, cst.Call)
        and call.func is attribute
        and isinstance(expr, cst.Expr)
        and isinstance(line, cst.SimpleStatementLine)
        and len(line.body) == 1
        and len(call.args) == 1
        and call.args[0].keyword is None
        and not call.args[0].star
    ):
        return None
    if attribute.attr.value == "extend" and literal_positions(call.args[0].value) is None:
        return None
    return line


def _replay(
    statements: list[cst.BaseStatement], state: Positions, growths: dict[int, cst.BaseExpression], holders: set[int]
) -> Positions | object | None:
    """``state`` after ``statements``; :data:`_EXITS` when they leave the block; None when
    the length can't be told."""
    for statement in statements:
        if id(statement) not in holders:
            if _exits(statement):
                return _EXITS
            continue
        if id(statement) in growths:
            assert isinstance(statement, cst.SimpleStatementLine)
            call = statement.body[0].value  # type: ignore[attr-defined]
            argument = call.args[0].value
            if call.func.attr.value == "append":
                state = state + [[argument]]
            else:
                added = literal_positions(argument)
                assert added is not None
                state = state + added
            if len(state) > _MAX_LENGTH:
                return None
            continue
        if not isinstance(statement, cst.If):
            return None  # a loop, try, with, match holding an append: the length varies
        taken = _replay(list(statement.body.body), state, growths, holders)
        orelse = statement.orelse
        if orelse is None:
            other: Positions | object | None = state
        elif isinstance(orelse, cst.Else):
            other = _replay(list(orelse.body.body), state, growths, holders)  # type: ignore[attr-defined]
        else:
            other = _replay([orelse], state, growths, holders)
        if taken is None or other is None:
            return None
        if taken is _EXITS and other is _EXITS:
            return _EXITS
        if taken is _EXITS or other is _EXITS:
            state = other if taken is _EXITS else taken  # type: ignore[assignment]
            continue
        assert isinstance(taken, list) and isinstance(other, list)
        if len(taken) != len(other):
            return None
        state = [a + [v for v in b if all(v is not w for w in a)] for a, b in zip(taken, other)]
    return state


def _exits(statement: cst.BaseStatement) -> bool:
    """Whether ``statement`` is a ``return`` or ``raise`` line."""
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[-1], (cst.Return, cst.Raise))
