"""Deciding cheaply which parts of a file can hold a Function, before any libcst parse.

A full libcst parse of the installed torch package costs about 50 s of CPU; the
classes that can be Functions are a few hundred kilobytes of it.  This module
finds them with plain text scans:

1. :func:`class_headers` lists every ``class Name(...)`` header, with the
   dotted names of its base list, using one regular expression and a bracket
   matcher;
2. :func:`candidate_headers` keeps the headers with a base that resolves,
   through the file's imports, to a Function base (a torch Function class, a
   configured base, a Function found in another file), then, to a fixed point,
   headers whose bases mention a kept class;
3. :func:`class_block` cuts a kept class out of the text by indentation and
   dedents it, so that libcst parses only that block.

Everything here over-approximates: the libcst pass that follows resolves bases
properly and drops the classes that are not Functions.  A block that does not
parse on its own (a string literal dedented below the class, say) makes the
caller fall back to parsing the whole file.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

# Indentation as Python's tokenizer reads it: spaces, tabs, and form feeds, which
# reset the column to 0 (so only what follows the last one counts).
INDENT = r"[ \t\f]*"
# Matched at line starts found by `line_matches`, not with re.MULTILINE: jumping
# between occurrences of the keyword is several times faster than a `^` scan.
_HEADER = re.compile(rf"({INDENT})class[ \t]+(\w+)[ \t]*\(")
_SCOPE = re.compile(rf"({INDENT})(?:async[ \t]+)?(def|class)[ \t]+(\w+)")
_DOTTED = re.compile(r"[A-Za-z_][\w.]*")


@dataclass(frozen=True)
class ClassHeader:
    """A ``class Name(bases):`` line: where it starts and what its bases mention."""

    name: str
    indent: str
    offset: int  # character offset of the line start
    line: int  # 1-based
    base_names: frozenset[str]  # dotted names written in the base list


@dataclass(frozen=True)
class ClassBlock:
    """The dedented source of one class, and where it sits in the file."""

    header: ClassHeader
    source: str
    first_line: int  # 1-based line of the header
    last_line: int
    column_offset: int  # characters removed from the start of every line
    enclosing: tuple[tuple[str, str], ...]  # (("def"|"class"), name) from outermost


def _matching_paren(text: str, open_index: int) -> int:
    depth = 0
    for index in range(open_index, len(text)):
        char = text[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def line_matches(text: str, keyword: str, pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """Matches of ``pattern`` at the start of each line that contains ``keyword``.

    Equivalent to ``re.finditer("^" + pattern, re.MULTILINE)`` for patterns that
    must contain ``keyword``, but it only looks at the lines where ``keyword`` is.
    """
    position = text.find(keyword)
    while position != -1:
        start = text.rfind("\n", 0, position) + 1
        match = pattern.match(text, start)
        if match is not None and match.end() > position:
            yield match
            position = text.find(keyword, match.end())
        else:
            position = text.find(keyword, position + len(keyword))


def class_headers(text: str) -> list[ClassHeader]:
    """Every class header with a parenthesised base list, in file order."""
    headers = []
    line, counted_to = 1, 0  # lines are counted incrementally: one pass over the text
    for match in line_matches(text, "class", _HEADER):
        close = _matching_paren(text, match.end() - 1)
        if close == -1:
            continue
        bases = text[match.end() : close]
        line += text.count("\n", counted_to, match.start())
        counted_to = match.start()
        headers.append(
            ClassHeader(
                name=match.group(2),
                indent=match.group(1).rpartition("\f")[2],
                offset=match.start(),
                line=line,
                base_names=frozenset(n.rstrip(".") for n in _DOTTED.findall(bases)),
            )
        )
    return headers


# The start of a string literal (with its prefix) or of a comment.
_STRING_OR_COMMENT = re.compile(r"#|(?<![\w])[rRbBuUfF]{0,2}(\"\"\"|\'\'\'|\"|\')")


def string_spans(text: str, until: int) -> list[tuple[int, int]]:
    """(start, end) offsets of the string literals that start before ``until``.

    Class headers inside docstrings (code examples) are not classes; this lets
    the caller drop them without tokenizing the file.
    """
    spans: list[tuple[int, int]] = []
    position = 0
    while position < until:
        match = _STRING_OR_COMMENT.search(text, position)
        if match is None or match.start() >= until:
            break
        quote = match.group(1)
        if quote is None:  # a comment: skip to the end of the line
            end = text.find("\n", match.start())
            position = len(text) if end == -1 else end
            continue
        search = match.end()
        while True:
            end = text.find(quote, search)
            newline = text.find("\n", search) if len(quote) == 1 else -1
            if end == -1 or (newline != -1 and newline < end):
                end = len(text) if end == -1 and newline == -1 else (newline if newline != -1 else end)
                break
            backslashes = len(text[search:end]) - len(text[search:end].rstrip("\\"))
            if backslashes % 2 == 0:
                end += len(quote)
                break
            search = end + 1
        spans.append((match.start(), end))
        position = end
    return spans


def outside_strings(headers: list[ClassHeader], text: str) -> list[ClassHeader]:
    """The headers that are code, not text inside a string literal."""
    if not headers:
        return headers
    spans = string_spans(text, headers[-1].offset + 1)
    starts = [start for start, _ in spans]
    kept = []
    for header in headers:
        index = bisect.bisect_right(starts, header.offset) - 1
        if index < 0 or spans[index][1] <= header.offset:
            kept.append(header)
    return kept


def candidate_headers(
    headers: list[ClassHeader], is_function_base: Callable[[str], bool]
) -> list[ClassHeader]:
    """Headers with a base for which ``is_function_base`` holds or, transitively, a kept class."""
    names: set[str] = set()
    kept: dict[int, ClassHeader] = {}
    changed = True
    while changed:
        changed = False
        for header in headers:
            if header.offset in kept:
                continue
            if header.base_names & names or any(is_function_base(b) for b in header.base_names):
                kept[header.offset] = header
                names.add(header.name)
                changed = True
    return [kept[offset] for offset in sorted(kept)]


def _indentation(line: str) -> tuple[str, str]:
    """A line's indentation as Python counts it (what follows its last form feed), and the rest."""
    rest = line.lstrip(" \t\f")
    return line[: len(line) - len(rest)].rpartition("\f")[2], rest


def _is_code(rest: str) -> bool:
    """Whether a line whose indentation was removed holds code (not blank, not a comment)."""
    return rest not in ("", "\n", "\r\n") and not rest.startswith("#")


def _enclosing_scopes(lines: Sequence[str], index: int, indent: int) -> tuple[tuple[str, str], ...]:
    scopes: list[tuple[str, str]] = []
    for previous in range(index - 1, -1, -1):
        if indent == 0:
            break
        match = _SCOPE.match(lines[previous])
        if match:
            width = len(match.group(1).rpartition("\f")[2])
            if width < indent:
                scopes.insert(0, (match.group(2), match.group(3)))
                indent = width
    return tuple(scopes)


def scope_prefix(enclosing: tuple[tuple[str, str], ...]) -> str:
    """The qualified-name prefix of a class nested in ``enclosing`` (``f.<locals>.Outer.``)."""
    parts = []
    for kind, name in enclosing:
        parts.append(f"{name}.<locals>" if kind == "def" else name)
    return ".".join(parts) + "." if parts else ""


def class_block(lines: Sequence[str], header: ClassHeader) -> ClassBlock:
    """Cut the class that starts at ``header`` out of the file's ``lines`` and dedent it.

    ``lines`` is :func:`autograd_lint.model.source.split_lines` of the text,
    passed in so that a file with several classes is split once.
    """
    start = header.line - 1
    indent = len(header.indent)
    end = start + 1
    while end < len(lines):
        own_indent, rest = _indentation(lines[end])
        if _is_code(rest) and len(own_indent) <= indent:
            break
        end += 1
    # Trailing blank and comment lines belong to what follows.
    while end - 1 > start and not _is_code(_indentation(lines[end - 1])[1]):
        end -= 1
    body = []
    for line in lines[start:end]:
        own_indent, rest = _indentation(line)
        if own_indent.startswith(header.indent):
            body.append(own_indent[indent:] + rest)
        else:
            body.append(rest)  # a comment or blank line left of the class
    return ClassBlock(
        header=header,
        source="".join(body),
        first_line=header.line,
        last_line=end,
        column_offset=indent,
        enclosing=_enclosing_scopes(lines, start, indent),
    )
