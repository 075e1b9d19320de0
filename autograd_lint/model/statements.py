"""Where the top-level statements of a text lie, as CPython's parser saw them.

The guard (:func:`autograd_lint.model.guard.compile_like_cpython`) parses every text
with CPython before libcst may parse it; it leaves here the first and last line of
each top-level statement (a decorated one from its first decorator), so that the
libcst parse that follows can parse the text statement by statement and reuse the
statements an edit left unchanged (:mod:`autograd_lint.model.incremental`).  The guard's
node count is likewise summed from counts kept by statement text.  Nothing here
imports libcst.
"""

from __future__ import annotations

import ast
import threading
from collections import OrderedDict
from typing import NamedTuple, Sequence

# (first line, last line) of statements, 1-based, in order.
Lines = tuple[tuple[int, int], ...]


class Span(NamedTuple):
    """Where a top-level statement lies, and for a class, each statement of its body."""

    first: int
    last: int
    members: Lines


Spans = tuple[Span, ...]

# As many texts as the guard's verdicts keep (analysis.python_rejects), and then some.
_MOST_TEXTS = 16
# Statement texts whose node counts are kept: a few large files' worth.
_MOST_COUNTS = 8192

# Every parse runs on the guard's one thread; the lock is there should two ever run at once.
_lock = threading.Lock()
_spans: OrderedDict[str, Spans] = OrderedDict()
_counts: OrderedDict[tuple[str, int, int, int], int] = OrderedDict()


def remember(text: str, tree: ast.Module) -> None:
    """Keep the statement lines of ``text``, whose parse by CPython is ``tree``."""
    with _lock:
        _remember(text, tree)


def _remember(text: str, tree: ast.Module) -> None:
    spans = tuple(
        Span(*_span(statement), tuple(map(_span, statement.body)) if isinstance(statement, ast.ClassDef) else ())
        for statement in tree.body
    )
    _spans[text] = spans
    _spans.move_to_end(text)
    while len(_spans) > _MOST_TEXTS:
        _spans.popitem(last=False)


def spans_of(text: str) -> Spans | None:
    """The statement lines of ``text`` when the guard parsed this very text lately, else None."""
    return _spans.get(text)


def node_count(text: str, tree: ast.Module) -> int:
    """``sum(1 for _ in ast.walk(tree))``, with each top-level statement counted once per text.

    A statement's subtree depends on its text alone, so its count is kept by its lines and
    where on them it starts and ends (``a = 1; b = [2]``: two statements on one line):
    an edit re-counts only the statements it changed.
    """
    with _lock:
        return _node_count(text, tree)


def _node_count(text: str, tree: ast.Module) -> int:
    lines = text.split("\n")
    total = 1 + len(tree.type_ignores)  # the module itself and its type-ignore comments
    for statement in tree.body:
        first, last = _span(statement)
        key = ("\n".join(lines[first - 1 : last]), statement.lineno - first, statement.col_offset,
               statement.end_col_offset or 0)
        count = _counts.get(key)
        if count is None:
            count = sum(1 for _ in ast.walk(statement))
            _counts[key] = count
            while len(_counts) > _MOST_COUNTS:
                _counts.popitem(last=False)
        total += count
    return total


def _span(statement: ast.stmt) -> tuple[int, int]:
    decorators: Sequence[ast.expr] = getattr(statement, "decorator_list", ())
    first = min([statement.lineno, *(d.lineno for d in decorators)])
    return first, statement.end_lineno or statement.lineno
