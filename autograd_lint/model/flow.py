"""Syntactic control flow over method bodies: paths and fall-through.

Everything here is intraprocedural and path-insensitive beyond ``if``/``else``:
it tells how many times something can happen on one path through a body, and
whether a body can end without ``return``.  It also walks one scope of a body for
the rules: its blocks and ``return`` statements.  What a name holds, where it goes
and what is written in place are the semantic model's (:mod:`.semantic`).  Nested
``def``/``lambda``/``class`` bodies never count: they do not run where they are
written.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import libcst as cst

from autograd_lint.model import traverse

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
