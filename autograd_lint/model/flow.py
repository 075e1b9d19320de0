"""Syntactic control flow over method bodies: paths, fall-through and in-place writes.

Everything here is intraprocedural and path-insensitive beyond ``if``/``else``:
it tells how many times something can happen on one path through a body, whether
a body can end without ``return``, and which names are written in place before
they are rebound.  It also walks one scope of a body for the rules: its blocks,
``return`` statements, bound names and names that escape to other code.  Nested
``def``/``lambda``/``class`` bodies never count: they do not run where they are
written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.semantic import ALIAS_METHODS, is_inplace_name, target_names

NEVER = -(10**9)  # the count on a path that does not exist
Counter = Callable[[cst.CSTNode], int]


class _Count(cst.CSTVisitor):
    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.total = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        self.total += self.counter(node)
        if isinstance(node, cst.IfExp):
            # `a if c else b` runs one arm only, as an if/else statement does.
            arms = max(count_in(node.body, self.counter), count_in(node.orelse, self.counter))
            self.total += count_in(node.test, self.counter) + arms
            return False
        return True


def count_in(node: cst.CSTNode | None, counter: Counter) -> int:
    """How many nodes under ``node`` the counter counts (nested scopes excluded)."""
    if node is None:
        return 0
    visitor = _Count(counter)
    traverse.visit(node, visitor)
    return visitor.total


class ScopeVisitor(cst.CSTVisitor):
    """A visitor that stays in one scope: it does not enter a nested ``def``, ``class``
    or ``lambda``, whose body does not run where it is written.  ``root`` is the
    function whose own ``def`` a walk may start at."""

    root: cst.FunctionDef | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def return_statements(function: cst.FunctionDef) -> list[cst.Return]:
    """The ``return`` statements of ``function`` itself, in text order (nested scopes excluded)."""
    found: list[cst.Return] = []

    class _Returns(ScopeVisitor):
        root = function

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

    traverse.visit(function, _Returns())
    return found


def suite_body(suite: cst.BaseSuite | None) -> Sequence[cst.BaseStatement]:
    """The statements of a block (a one-line block gives one statement; none gives none)."""
    if suite is None:
        return ()
    if isinstance(suite, cst.IndentedBlock):
        return suite.body
    return (cst.SimpleStatementLine(body=suite.body),)  # type: ignore[attr-defined]


def _ends(statement: cst.SimpleStatementLine) -> bool:
    return any(isinstance(s, (cst.Return, cst.Raise)) for s in statement.body)


def path_counts(body: Sequence[cst.BaseStatement], counter: Counter) -> tuple[int, int]:
    """The most counted nodes on one path: (paths that fall through, paths that return).

    Branches of an ``if`` are exclusive; anything in a loop body counts twice,
    since the loop may run it again.
    """
    through, ended = 0, NEVER
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            through += count_in(statement, counter)
            if _ends(statement):
                return NEVER, max(ended, through)
        elif isinstance(statement, cst.If):
            test = count_in(statement.test, counter)
            body_through, body_ended = path_counts(suite_body(statement.body), counter)
            if isinstance(statement.orelse, cst.If):
                else_through, else_ended = path_counts([statement.orelse], counter)
            elif isinstance(statement.orelse, cst.Else):
                else_through, else_ended = path_counts(suite_body(statement.orelse.body), counter)
            else:
                else_through, else_ended = 0, NEVER
            ended = max(ended, through + test + body_ended, through + test + else_ended)
            through = through + test + max(body_through, else_through)
        elif isinstance(statement, (cst.For, cst.While)):
            inner = count_in(statement.body, counter)
            head = count_in(statement.iter if isinstance(statement, cst.For) else statement.test, counter)
            through += head + 2 * inner + count_in(statement.orelse, counter)
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif isinstance(statement, (cst.With,)):
            items = sum(count_in(item, counter) for item in statement.items)
            inner_through, inner_ended = path_counts(suite_body(statement.body), counter)
            ended = max(ended, through + items + inner_ended)
            through = through + items + inner_through
        else:  # try, match, ...: every part may run
            through += count_in(statement, counter)
        if through < 0:
            break
    return through, ended


def most_on_one_path(body: Sequence[cst.BaseStatement], counter: Counter) -> int:
    return max(path_counts(body, counter))


def first_repeated(
    body: Sequence[cst.BaseStatement],
    nodes: Sequence[cst.CSTNode],
    weight: Callable[[cst.CSTNode], int] = lambda node: 1,
) -> cst.CSTNode | None:
    """The first of ``nodes`` (given in text order) that can run a second time on one path.

    That is the first node whose addition lifts :func:`most_on_one_path` above 1:
    it follows another of ``nodes`` on some path, or sits in a loop.  ``weight``
    counts a node more than once where the caller knows it repeats (the body of
    a comprehension, which path counting does not see as a loop).
    """
    seen: set[int] = set()
    for node in nodes:
        seen.add(id(node))
        if most_on_one_path(body, lambda n: weight(n) if id(n) in seen else 0) > 1:
            return node
    return None


def method_body(function: cst.FunctionDef) -> Sequence[cst.BaseStatement]:
    """The statements of ``function``'s body (a one-line body gives one statement)."""
    return suite_body(function.body)


def visit_body(function: cst.FunctionDef, visitor: cst.CSTVisitor) -> None:
    """Visits each statement of ``function``'s body (not its decorators or parameters)."""
    for statement in method_body(function):
        traverse.visit(statement, visitor)


def can_fall_through(body: Sequence[cst.BaseStatement]) -> bool:
    """Whether control can reach the end of ``body`` without ``return`` or ``raise``."""
    if not body:
        return True
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return not _ends(last)
    if isinstance(last, cst.If):
        if last.orelse is None:
            return True
        rest = [last.orelse] if isinstance(last.orelse, cst.If) else suite_body(last.orelse.body)
        return can_fall_through(suite_body(last.body)) or can_fall_through(rest)
    if isinstance(last, cst.With):
        return can_fall_through(suite_body(last.body))
    if isinstance(last, cst.While):
        # `while True:` without break only ends through return/raise.
        is_forever = isinstance(last.test, cst.Name) and last.test.value == "True"
        return not is_forever or count_in(last.body, lambda n: isinstance(n, cst.Break)) > 0
    if isinstance(last, (cst.Try, cst.TryStar)):
        # `except*` handlers can run one after another, but none can `return`: any that
        # falls through lets the statement fall through, as with `except`.
        if last.finalbody is not None and not can_fall_through(suite_body(last.finalbody.body)):
            return False
        body_ends = not can_fall_through(suite_body(last.body)) if last.orelse is None else not can_fall_through(
            suite_body(last.orelse.body)
        )
        handlers_end = all(not can_fall_through(suite_body(h.body)) for h in last.handlers)
        return not (body_ends and handlers_end)
    if isinstance(last, cst.Match):
        return False  # undecided: stay silent
    return True


@dataclass(frozen=True)
class InplaceWrite:
    """An in-place write to the tensor bound to ``name`` (through an alias, perhaps)."""

    name: str
    node: cst.CSTNode
    how: str  # e.g. "mul_()", "[...] =", "+=", "out="


def _alias_root(value: cst.BaseExpression, aliases: dict[str, str]) -> str | None:
    """The tracked name ``value`` is a view of (``x.view(-1)`` -> ``x``)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value not in ALIAS_METHODS:
            return None
        value = value.func.value
    if isinstance(value, cst.Name) and value.value in aliases:
        return aliases[value.value]
    return None


def inplace_writes(
    body: Sequence[cst.BaseStatement],
    tracked: set[str],
    imports: ImportMap,
    augmented_ok: Callable[[str], bool],
) -> list[InplaceWrite]:
    """In-place writes to ``tracked`` names (or their views) before each is rebound.

    Statements are taken in text order, branches included: once a name is
    rebound anywhere, later writes to it are not reported, which can only make
    findings fewer.  ``augmented_ok(name)`` says whether ``name += ...`` is an
    in-place write (true for tensors; for a Python number it rebinds).
    """
    aliases = {name: name for name in tracked}
    found: list[InplaceWrite] = []

    def target_root(node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name):
            return aliases.get(node.value)
        return _alias_root(node, aliases)

    class _Writes(ScopeVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute):
                method = func.attr.value
                qualified = imports.resolve(dotted_name(func) or "") if dotted_name(func) else None
                if qualified and qualified.startswith("torch."):
                    short = qualified.rsplit(".", 1)[-1]
                    if is_inplace_name(short) and node.args:
                        root = target_root(node.args[0].value)
                        if root:
                            found.append(InplaceWrite(root, node, f"{dotted_name(func)}()"))
                elif is_inplace_name(method):
                    root = target_root(func.value)
                    if root:
                        found.append(InplaceWrite(root, node, f"{method}()"))
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "out":
                    root = target_root(arg.value)
                    if root:
                        found.append(InplaceWrite(root, node, "out="))

    def visit_targets(statement: cst.CSTNode) -> None:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    node = target.target
                    if isinstance(node, cst.Subscript):
                        root = target_root(node.value)
                        if root:
                            found.append(InplaceWrite(root, small, "[...] ="))
            elif isinstance(small, cst.AugAssign):
                node = small.target
                if isinstance(node, cst.Subscript):
                    root = target_root(node.value)
                    if root:
                        found.append(InplaceWrite(root, small, "[...] op="))
                elif isinstance(node, cst.Name) and node.value in aliases and augmented_ok(node.value):
                    found.append(InplaceWrite(aliases[node.value], small, small.operator.__class__.__name__))

    def rebind(statement: cst.CSTNode) -> None:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, (cst.Assign, cst.AnnAssign)):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                for target in targets:
                    for name in target_names(target):
                        root = _alias_root(small.value, aliases) if isinstance(target, cst.Name) and small.value else None
                        if root is not None:
                            aliases[name] = root
                        else:
                            aliases.pop(name, None)

    def walk(statements: Sequence[cst.BaseStatement]) -> None:
        for statement in statements:
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(statement, cst.SimpleStatementLine):
                traverse.visit(statement, _Writes())
                visit_targets(statement)
                rebind(statement)
                continue
            # Compound statement: its header expressions, then its bodies in order.
            for header in _headers(statement):
                traverse.visit(header, _Writes())
            if isinstance(statement, cst.For):
                for name in target_names(statement.target):
                    aliases.pop(name, None)
            if isinstance(statement, cst.With):
                for item in statement.items:
                    if item.asname is not None:
                        for name in target_names(item.asname.name):
                            aliases.pop(name, None)
            for child in child_bodies(statement):
                walk(child)

    walk(body)
    return found


def escapes(function: cst.FunctionDef, name: str, *, in_nested_scopes: bool = False) -> bool:
    """Whether ``function``'s body uses ``name`` other than as ``name.<attr>``: passes it
    to a call, stores it, returns it..., so that code elsewhere may act on it.

    A nested ``def``/``lambda`` parameter of that name is not a use.  With
    ``in_nested_scopes``, every use inside a nested ``def``/``class``/``lambda`` counts
    (``name.<attr>`` and parameters too): the nested code may run anywhere.
    """
    receivers: set[int] = set()  # ids of the `name` in `name.<attr>`
    found = False

    class _Uses(cst.CSTVisitor):
        def __init__(self) -> None:
            self.nested = 0

        def _enter(self, node: cst.CSTNode) -> bool:
            self.nested += 1
            return True

        def _leave(self, node: cst.CSTNode) -> None:
            self.nested -= 1

        visit_FunctionDef = visit_ClassDef = visit_Lambda = _enter  # type: ignore[assignment]
        leave_FunctionDef = leave_ClassDef = leave_Lambda = _leave  # type: ignore[assignment]

        def visit_Param(self, node: cst.Param) -> bool:
            return in_nested_scopes

        def visit_Attribute(self, node: cst.Attribute) -> None:
            receivers.add(id(node.value))

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            nested = in_nested_scopes and self.nested > 0
            if node.value == name and (nested or id(node) not in receivers):
                found = True

    visit_body(function, _Uses())
    return found


def _headers(statement: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(statement, cst.If):
        return [statement.test]
    if isinstance(statement, cst.While):
        return [statement.test]
    if isinstance(statement, cst.For):
        return [statement.iter]
    if isinstance(statement, cst.With):
        return list(statement.items)
    return []


def child_bodies(statement: cst.CSTNode) -> Iterator[Sequence[cst.BaseStatement]]:
    """The statement lists directly inside a compound statement, in text order (an
    ``elif`` gives a list holding its ``if``)."""
    for field in ("body", "orelse", "finalbody"):
        child = getattr(statement, field, None)
        if child is None:
            continue
        if isinstance(child, cst.If):
            yield [child]
        elif isinstance(child, cst.BaseSuite):
            yield suite_body(child)
        elif hasattr(child, "body"):
            yield suite_body(child.body)
    for handler in getattr(statement, "handlers", ()):
        yield suite_body(handler.body)
    for case in getattr(statement, "cases", ()):
        yield suite_body(case.body)
