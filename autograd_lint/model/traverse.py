"""A faster drop-in for ``node.visit(visitor)`` with read-only libcst visitors.

libcst's own traversal rebuilds every node it passes (``_visit_and_replace_children``
is shared with transformers), which made tree walks most of the analyser's
time.  :func:`visit` calls the same ``on_visit`` / ``on_leave`` hooks (so
``visit_<Node>`` / ``leave_<Node>`` methods and ``on_visit`` overrides behave
exactly as with ``node.visit``), in the same order, on the same nodes, without
rebuilding anything (whitespace and comment subtrees, where the visitor has no hook,
are not entered at all).  Attribute hooks (``visit_<Node>_<field>``) are not called;
no visitor here defines one.

The order of a node's fields is read once per node type from libcst itself: the
source of its ``_visit_and_replace_children`` enters the fields in order.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Iterator

import libcst as cst

_FIELD_ORDER: dict[type[cst.CSTNode], tuple[str, ...]] = {}


# In libcst's source, each field is entered as `visit_<how>(self, "<field>", ...)`.
_ENTERED_FIELD = re.compile(r"""visit_\w+\(\s*self,\s*["'](\w+)["']""")


def _field_order(node: cst.CSTNode) -> tuple[str, ...]:
    kind = type(node)
    order = _FIELD_ORDER.get(kind)
    if order is None:
        source = inspect.getsource(kind._visit_and_replace_children)
        order = _FIELD_ORDER[kind] = tuple(dict.fromkeys(_ENTERED_FIELD.findall(source)))
    return order


# Whether a field value's type is a libcst node: `isinstance(value, cst.CSTNode)` goes
# through ABCMeta and was the largest single cost of a walk.
_IS_NODE: dict[type, bool] = {}


def _is_node_type(kind: type) -> bool:
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes of ``node``, in the order libcst visits them."""
    found: list[cst.CSTNode] = []
    for name in _field_order(node):
        value = getattr(node, name)
        kind = type(value)
        if kind in (tuple, list):  # not typing.Sequence: its isinstance is slow
            found.extend(item for item in value if _is_node_type(type(item)))
        elif _is_node_type(kind):
            found.append(value)
    return found


# Per (visitor class, node type): its own visit_<Node> and leave_<Node>, or None where
# the class only has libcst's empty defaults.
_HOOKS: dict[tuple[type, type], tuple[Callable[..., Any] | None, Callable[..., Any] | None]] = {}


def _hooks(visitor_type: type, node_type: type) -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    key = (visitor_type, node_type)
    found = _HOOKS.get(key)
    if found is None:
        hooks = []
        for prefix in ("visit_", "leave_"):
            name = prefix + node_type.__name__
            hook = getattr(visitor_type, name, None)
            hooks.append(None if hook is getattr(cst.CSTVisitor, name, None) else hook)
        found = _HOOKS[key] = (hooks[0], hooks[1])
    return found


# Whitespace and comments: subtrees of these types hold nothing else, and make about
# half of a tree's nodes.
_WHITESPACE = frozenset(
    {cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Newline, cst.Comment}
)
# Per visitor class: whether it has a hook for none of the whitespace types.
_SKIPS_WHITESPACE: dict[type, bool] = {}


def visit(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """Walk ``node`` with ``visitor`` as ``node.visit(visitor)`` would, but faster."""
    kind = type(visitor)
    if kind.on_visit is cst.CSTVisitor.on_visit and kind.on_leave is cst.CSTVisitor.on_leave:
        skips = _SKIPS_WHITESPACE.get(kind)
        if skips is None:
            skips = _SKIPS_WHITESPACE[kind] = all(_hooks(kind, t) == (None, None) for t in _WHITESPACE)
        if skips:
            _visit_code_hooks(node, visitor, kind)
        else:
            _visit_hooks(node, visitor, kind)
    else:
        _visit_overridden(node, visitor)


def _visit_hooks(node: cst.CSTNode, visitor: cst.CSTVisitor, kind: type) -> None:
    # What libcst's on_visit/on_leave do, with the method lookups cached per type.
    enter, leave = _hooks(kind, type(node))
    if enter is None or enter(visitor, node) is not False:
        for child in children(node):
            _visit_hooks(child, visitor, kind)
    if leave is not None:
        leave(visitor, node)


def _visit_code_hooks(node: cst.CSTNode, visitor: cst.CSTVisitor, kind: type) -> None:
    # _visit_hooks for a visitor with no whitespace hook: whitespace subtrees would call
    # nothing, so they are not entered.
    enter, leave = _hooks(kind, type(node))
    if enter is None or enter(visitor, node) is not False:
        for child in children(node):
            if type(child) not in _WHITESPACE:
                _visit_code_hooks(child, visitor, kind)
    if leave is not None:
        leave(visitor, node)


def _visit_overridden(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    if visitor.on_visit(node):
        for child in children(node):
            _visit_overridden(child, visitor)
    visitor.on_leave(node)


_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def walk(node: cst.CSTNode, *, scopes: bool = True, skip: tuple[type, ...] = ()) -> Iterator[cst.CSTNode]:
    """``node`` and every node under it, in the order :func:`visit` enters them.

    With ``scopes=False`` the nodes under a nested ``def``, ``class`` or ``lambda``
    (other than ``node`` itself) are left out: that code does not run where it is written.
    The nodes under a node of a type in ``skip`` are left out too.
    """
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if not scopes and current is not node and isinstance(current, _SCOPES):
            continue
        if isinstance(current, skip):
            continue
        stack.extend(reversed(children(current)))


def parent_map(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    """``id(child) -> parent`` for every node under ``root``."""
    parents: dict[int, cst.CSTNode] = {}
    stack = [root]
    while stack:
        current = stack.pop()
        for child in children(current):
            parents[id(child)] = current
            stack.append(child)
    return parents
