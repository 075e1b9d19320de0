r"""Parsing with libcst: every parse of the analysis and of the fix pass goes through here.

Two things set it apart from calling ``libcst.parse_module``:

* a cache of the last few texts: the fix pass and an editor's re-checks parse the
  same text again, and libcst's parser takes time quadratic in an expression's
  depth (12 s for a 2,900-deep subscript chain, 34 s for 2,000 nested calls).
  Modules are immutable, so sharing one is safe;
* code that CPython compiles but libcst's parser rejects: a line holding only a
  backslash continuation at the start of an indented block (``def f():`` then
  ``\`` alone), and a final ``\`` before the ``\r\n`` that ends the file.  For
  analysis, such a backslash is read as a space when that leaves Python's syntax
  tree, positions included, unchanged: the same lines and columns, so every
  position stays the file's.  The text given back to fixes is never rewritten:
  :func:`parse_module` alone is used there.
"""

from __future__ import annotations

import ast
import functools
import re

import libcst as cst

# A backslash that is all of its line but leading whitespace, or that ends the file before \r\n.
_LIMIT_BACKSLASH = re.compile(r"^[ \t\f]*\\(?=\r?\n)|\\(?=\r\n\Z)", re.MULTILINE)
# Each candidate costs a parse by CPython when they can't all be read as spaces at once.
_MOST_TRIED_ONE_BY_ONE = 32


@functools.lru_cache(maxsize=4)
def parse_module(source: str) -> cst.Module:
    """``source`` parsed by libcst, from a cache of the last few texts; raises ``libcst.ParserSyntaxError``."""
    return cst.parse_module(source)


def parse_for_analysis(source: str) -> cst.Module:
    """``source`` parsed by libcst, past the parser's limits described above.

    Raises the first ``libcst.ParserSyntaxError`` when no such rewrite applies.
    """
    try:
        return parse_module(source)
    except cst.ParserSyntaxError:
        readable = _backslashes_as_spaces(source)
        if readable is None:
            raise
    return parse_module(readable)


def _backslashes_as_spaces(source: str) -> str | None:
    """``source`` with the backslashes libcst rejects read as spaces, where Python's tree stays the same."""
    offsets = [match.end() - 1 for match in _LIMIT_BACKSLASH.finditer(source)]
    if not offsets:
        return None
    reference = _tree(source)
    if reference is None:
        return None
    every = _blanked(source, offsets)
    if _tree(every) == reference:
        return every
    # One of them is inside a string (or changes the code): keep the others.
    kept = [offset for offset in offsets[:_MOST_TRIED_ONE_BY_ONE] if _tree(_blanked(source, [offset])) == reference]
    return _blanked(source, kept) if kept else None


def _blanked(source: str, offsets: list[int]) -> str:
    chars = list(source)
    for offset in offsets:
        chars[offset] = " "
    return "".join(chars)


def _tree(source: str) -> str | None:
    """Python's syntax tree of ``source`` with every position, or None when it does not compile."""
    try:
        return ast.dump(ast.parse(source), include_attributes=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
