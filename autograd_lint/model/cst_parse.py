r"""Parsing with libcst: every parse of the analysis and of the fix pass goes through here.

Two things set it apart from calling ``libcst.parse_module``:

* a cache of the last few texts: the fix pass and an editor's re-checks parse the
  same text again, and libcst's parser takes time quadratic in an expression's
  depth (12 s for a 2,900-deep subscript chain, 34 s for 2,000 nested calls).
  Modules are immutable, so sharing one is safe;
* code that CPython compiles but libcst's parser rejects, found by the fuzzing: a
  line holding only a backslash continuation at the start of an indented block
  (``def f():`` then ``\`` alone), and a form feed in the leading whitespace of a line inside a block (CPython
  counts the indentation from the last form feed).  For analysis, such a backslash
  is read as a space, and such a line loses what precedes its last form feed, when
  that leaves Python's syntax tree unchanged, positions included once the columns
  a line lost are added back (:attr:`ReadableModule.column_shifts`).  The text given
  back to fixes is never rewritten: :func:`parse_module` alone is used there.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Mapping

import libcst as cst

from autograd_lint.model import incremental, statements

# A form feed in a line's leading whitespace, followed on that line by code.
_FORM_FEED_BEFORE_CODE = re.compile(r"^[ \t\f]*\f[ \t\f]*[^\s#]", re.MULTILINE)
# Each candidate costs a parse by CPython when they can't all be applied at once.
_MOST_TRIED_ONE_BY_ONE = 32


@functools.lru_cache(maxsize=4)
def parse_module(source: str) -> cst.Module:
    """``source`` parsed by libcst, from a cache of the last few texts; raises ``libcst.ParserSyntaxError``.

    A large text that CPython parsed just before (the guard) is parsed by top-level
    statement, unchanged statements taken from the last parses
    (:mod:`autograd_lint.model.incremental`): the same module, for an edit's share of the cost.
    """
    if len(source) >= incremental.MIN_CHARS:
        spans = statements.spans_of(source)
        if spans is not None:
            assembled = incremental.assemble(source, spans)
            if assembled is not None:
                return assembled
    return cst.parse_module(source)


@dataclass(frozen=True)
class ReadableModule:
    """A module parsed for analysis, and the columns each rewritten line lost at its start."""

    module: cst.Module
    column_shifts: Mapping[int, int]  # 1-based line -> columns to add to a position on it


def parse_for_analysis(source: str) -> ReadableModule:
    """``source`` parsed by libcst, past the parser's limits described above.

    Raises the first ``libcst.ParserSyntaxError`` when no such rewrite applies.
    """
    if "\f" in source and _FORM_FEED_BEFORE_CODE.search(source):
        # libcst rejects a form feed before an indented line, and elsewhere leaves it out
        # of the columns it gives: read such lines as CPython does first.  A page break
        # on a line of its own (or before a comment) holds no node: libcst reads it alone.
        readable = _readable(source)
        if readable is not None:
            text, shifts = readable
            return ReadableModule(parse_module(text), shifts)
    try:
        return ReadableModule(parse_module(source), {})
    except cst.ParserSyntaxError:
        readable = _readable(source)
        if readable is None:
            raise
    text, shifts = readable
    return ReadableModule(parse_module(text), shifts)


# An edit of one line: (index of the line, its new text, the columns it lost at its start).
_Edit = tuple[int, str, int]


def _readable(source: str) -> tuple[str, dict[int, int]] | None:
    """``source`` past libcst's limits, and the column shifts, where Python's tree stays the same."""
    lines = source.split("\n")
    edits = _edits(lines)
    if not edits:
        return None
    reference = _shape(source, {})
    if reference is None:
        return None
    every = _applied(lines, edits)
    if _shape(*every) == reference:
        return every
    # One of them is inside a string (or changes the code): keep the others.
    kept = [edit for edit in edits[:_MOST_TRIED_ONE_BY_ONE] if _shape(*_applied(lines, [edit])) == reference]
    together = _applied(lines, kept)
    return together if kept and _shape(*together) == reference else None


def _edits(lines: list[str]) -> list[_Edit]:
    edits: list[_Edit] = []
    for index, line in enumerate(lines):
        rest = line.lstrip(" \t\f")
        lead = line[: len(line) - len(rest)]
        cut = lead.rfind("\f") + 1  # CPython counts the indentation from the last form feed
        new = line[cut:]
        if rest.rstrip("\r") == "\\":  # a backslash continuation alone on its line
            new = new.replace("\\", " ", 1)
        if new != line:
            edits.append((index, new, cut))
    return edits


def _applied(lines: list[str], edits: list[_Edit]) -> tuple[str, dict[int, int]]:
    changed = list(lines)
    shifts: dict[int, int] = {}
    for index, new, cut in edits:
        changed[index] = new
        if cut:
            shifts[index + 1] = cut
    return "\n".join(changed), shifts


def _shape(source: str, shifts: Mapping[int, int]) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    """Python's syntax tree of ``source`` and where each node starts, columns shifted back;
    None when it does not compile."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    starts = tuple(
        (node.lineno, node.col_offset + shifts.get(node.lineno, 0))
        for node in ast.walk(tree)
        if isinstance(node, (ast.expr, ast.stmt, ast.arg, ast.keyword, ast.excepthandler, ast.alias))
    )
    return ast.dump(tree), starts
