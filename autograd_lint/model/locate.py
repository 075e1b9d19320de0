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

:class:`Statements` splits a block into its statements the same way, for the
custom-op finder, which reads only some statements of a file.

Everything here over-approximates: the libcst pass that follows resolves bases
properly and drops the classes that are not Functions.  A block that does not
parse on its own (a string literal dedented below the class, say) makes the
caller fall back to parsing the whole file.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

# Methods that PyTorch looks up on a Function class, in the order they are
# usually written.
FUNCTION_METHODS = ("forward", "setup_context", "backward", "vjp", "jvp", "vmap")
# The torch classes a Function derives from.  NestedIOFunction is left out on
# purpose: its legacy instance-method API is legitimate.
FUNCTION_BASES = frozenset(
    {
        "torch.autograd.Function",
        "torch.autograd.function.Function",
        "torch.autograd.InplaceFunction",
        "torch.autograd.function.InplaceFunction",
        "torch.autograd.function._SingleLevelFunction",
    }
)

# Indentation as Python's tokenizer reads it: spaces, tabs, and form feeds, which
# reset the column to 0 (so only what follows the last one counts).
INDENT = r"[ \t\f]*"
# Matched at line starts found by `line_matches`, not with re.MULTILINE: jumping
# between occurrences of the keyword is several times faster than a `^` scan.
# Group 3 opens the base list, or the type parameters (PEP 695, ``class F[T](Base)``) before it.
_HEADER = re.compile(rf"({INDENT})class[ \t]+(\w+)[ \t]*([(\[])")
_AFTER_TYPE_PARAMETERS = re.compile(r"[ \t]*\(")
_SCOPE = re.compile(rf"({INDENT})(?:async[ \t]+)?(def|class)[ \t]+(\w+)")
# The one-line header of a compound statement that is not a scope (``if``, ``try``,
# ``match``...): a class in its body is not nested in a def or class above it.
_BLOCK = re.compile(
    rf"({INDENT})(?:async[ \t]+)?(?:if|elif|else|for|while|with|try|except|finally|match|case)\b.*:[ \t]*(?:#.*)?\r?$"
)
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
    # More characters removed from a line: what precedes its last form feed (1-based line of ``source``).
    column_shifts: Mapping[int, int] = field(default_factory=dict)


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
    """Every class header with a parenthesised base list, in file order.

    The base list may follow type parameters (``class F[T: Tensor](Base)``, Python 3.12+).
    """
    headers = []
    line, counted_to = 1, 0  # lines are counted incrementally: one pass over the text
    for match in line_matches(text, "class", _HEADER):
        open_index = match.end() - 1
        if match.group(3) == "[":
            parameters_end = _matching_paren(text, open_index)
            after = None if parameters_end == -1 else _AFTER_TYPE_PARAMETERS.match(text, parameters_end + 1)
            if after is None:  # no base list: not a Function
                continue
            open_index = after.end() - 1
        close = _matching_paren(text, open_index)
        if close == -1:
            continue
        bases = text[open_index + 1 : close]
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


def string_spans(text: str, until: int, comments: bool = False) -> list[tuple[int, int]]:
    """(start, end) offsets of the string literals that start before ``until``
    (and of the comments, with ``comments``; a comment ends before its line break).

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
            if comments:
                spans.append((match.start(), position))
            continue
        search = match.end()
        while True:
            end = text.find(quote, search)
            newline = text.find("\n", search) if len(quote) == 1 else -1
            if end == -1 or (newline != -1 and newline < end):
                if newline != -1 and _escaped(text, search, newline):
                    search = newline + 1  # a backslash continues a one-quote string on the next line
                    continue
                end = len(text) if end == -1 and newline == -1 else (newline if newline != -1 else end)
                break
            if _backslashes_before(text, end, search) % 2 == 0:
                end += len(quote)
                break
            search = end + 1
        spans.append((match.start(), end))
        position = end
    return spans


def _backslashes_before(text: str, index: int, start: int) -> int:
    """How many backslashes run back from ``index`` (not counting it), no further than ``start``."""
    count = 0
    while index - count > start and text[index - count - 1] == "\\":
        count += 1
    return count


def _escaped(text: str, start: int, newline: int) -> bool:
    """Whether the line break at ``newline`` (``\\n``, or the ``\\n`` of ``\\r\\n``) follows
    an odd number of backslashes, counted back to ``start``."""
    end = newline - 1 if newline > start and text[newline - 1] == "\r" else newline
    return _backslashes_before(text, end, start) % 2 == 1


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
        block = None if match else _BLOCK.match(lines[previous])
        if match or block:
            width = len((match or block).group(1).rpartition("\f")[2])
            if width < indent:
                if match:
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
    shifts: dict[int, int] = {}
    for number, line in enumerate(lines[start:end], start=1):
        own_indent, rest = _indentation(line)
        if own_indent.startswith(header.indent):
            body.append(own_indent[indent:] + rest)
            dropped = len(line) - len(own_indent) - len(rest)
            if dropped:
                shifts[number] = dropped
        else:
            body.append(rest)  # a comment or blank line left of the class
    return ClassBlock(
        header=header,
        source="".join(body),
        first_line=header.line,
        last_line=end,
        column_offset=indent,
        enclosing=_enclosing_scopes(lines, start, indent),
        column_shifts=shifts,
    )



# Clauses that continue the compound statement above them.
_CLAUSE = re.compile(r"(?:else|elif|except|finally)\b")
_DEF_OR_CLASS = re.compile(r"(?:async[ \t]+)?(def|class)[ \t]+(\w+)")


class Statements:
    """Statements of a file found by a text scan (no parse): where each starts and ends.

    A statement starts at a line whose code, outside a string literal, begins at the
    block's indentation, with no bracket open and no backslash continuation before it;
    ``else``, ``elif``, ``except`` and ``finally`` clauses belong to the statement above,
    a decorator to the one below.  Comment and blank lines go with the statement above.
    Ranges are ``(first, end)`` 0-based line indices, ``end`` exclusive.  Checked against
    ``ast`` on every file of the torch package and of the accuracy repositories.
    """

    def __init__(self, text: str, lines: Sequence[str]) -> None:
        self.text = text
        self.lines = lines
        self.spans = string_spans(text, len(text), comments=True)
        self.span_starts = [start for start, _ in self.spans]
        self.offsets = list(itertools.accumulate(map(len, lines), initial=0))

    def _line_starts(self, first: int, end: int, indent: str, deeper: bool) -> Iterator[tuple[int, str, int]]:
        """(index, indentation, offset of the code) of each line in ``first:end`` that is
        indented by ``indent`` (or more, with ``deeper``) and begins a logical line:
        outside a string, no bracket open (counted from the start of ``first``), no
        backslash before it.  Index -1 when a bracket is closed that was never opened."""
        text, spans, starts = self.text, self.spans, self.span_starts
        depth = 0
        counted = self.offsets[first]
        span_index = bisect.bisect_left(starts, counted)
        for match in _indented(indent, deeper).finditer(text, self.offsets[first], self.offsets[end]):
            start = match.end()
            inside = bisect.bisect_right(starts, start) - 1
            if inside >= 0 and spans[inside][0] < start < spans[inside][1]:
                continue  # a line of a multi-line string
            # Brackets opened in the code since the last count (strings and comments left out).
            while counted < start:
                if span_index < len(spans) and spans[span_index][0] < start:
                    span_start, span_end = spans[span_index]
                    depth += _bracket_balance(text, counted, span_start)
                    counted = max(counted, span_end)
                    span_index += 1
                else:
                    depth += _bracket_balance(text, counted, start)
                    counted = start
            if depth < 0:
                yield -1, "", start
                return
            if depth > 0:
                continue
            index = bisect.bisect_right(self.offsets, match.start()) - 1
            if index > first and self._continues(index - 1):
                continue
            yield index, match.group(1), start

    def statements(self, first: int, end: int, indent: str) -> list[tuple[int, int]] | None:
        """The statements of the block ``first:end`` indented by ``indent``; ``None`` when the
        scan can't tell (a bracket closed that was never opened)."""
        found: list[int] = []
        decorator = False  # the last statement begun is a decorator still waiting for its def
        text = self.text
        for index, _, start in self._line_starts(first, end, indent, False):
            if index < 0:
                return None
            if found and _CLAUSE.match(text, start):
                continue
            if decorator:
                decorator = text.startswith("@", start)
                continue
            found.append(index)
            decorator = text.startswith("@", start)
        return list(zip(found, found[1:] + [end]))

    def header(self, first: int, end: int, indent: str) -> tuple[str, str, int, int, str] | None:
        """For a ``def`` or ``class`` statement at ``first:end``: its keyword, name, the line
        of that keyword, the first line of its body and the body's indentation; ``None``
        for another statement, or one whose body shares the header's line."""
        keyword_line = None
        for index, indentation, start in self._line_starts(first, end, indent, True):
            if index < 0:
                return None
            if keyword_line is None:
                if self.text.startswith("@", start):
                    continue
                match = _DEF_OR_CLASS.match(self.text, start)
                if match is None or indentation != indent:
                    return None
                keyword, name, keyword_line = match.group(1), match.group(2), index
            elif len(indentation) > len(indent):
                return keyword, name, keyword_line, index, indentation
            else:
                return None
        return None

    def _continues(self, index: int) -> bool:
        """Whether line ``index`` ends with a backslash that joins the next line."""
        body = self.lines[index].rstrip("\r\n")
        if not body.endswith("\\"):
            return False
        backslash = self.offsets[index] + len(body) - 1
        inside = bisect.bisect_right(self.span_starts, backslash) - 1
        return not (inside >= 0 and self.spans[inside][1] > backslash)  # a comment's backslash joins nothing


@functools.lru_cache(maxsize=64)
def _indented(indent: str, deeper: bool) -> re.Pattern[str]:
    """Lines indented by ``indent`` (or more), holding code: group 1 the indentation
    (form feeds before it left out, as Python's tokenizer does)."""
    more = r"[ \t]*" if deeper else ""
    return re.compile(rf"^(?:[ \t]*\f)*({re.escape(indent)}{more})(?=[^ \t\f#\r\n)\]}},])", re.MULTILINE)


def top_level_statements(text: str, lines: Sequence[str]) -> list[tuple[int, int]] | None:
    """The top-level statements of ``text`` (see :class:`Statements`); ``lines`` is
    :func:`autograd_lint.model.source.split_lines` of ``text``."""
    return Statements(text, lines).statements(0, len(lines), "")


def _bracket_balance(text: str, start: int, end: int) -> int:
    return (
        text.count("(", start, end)
        + text.count("[", start, end)
        + text.count("{", start, end)
        - text.count(")", start, end)
        - text.count("]", start, end)
        - text.count("}", start, end)
    )


def mentions_function(path: str, text: str, extra_words: re.Pattern[str] | None = None) -> bool:
    """The cheapest test: can this file define a subclass of a torch Function?

    Reaching ``torch.autograd.Function`` (or ``InplaceFunction``) takes an import
    or an attribute chain that spells ``autograd``, except for relative imports
    inside the ``autograd`` package itself.  Subclasses of Functions defined in
    other files are found by :func:`autograd_lint.model.discovery.run`'s later rounds.
    """
    if extra_words is not None and extra_words.search(text) is not None:
        return True
    return "Function" in text and ("autograd" in text or "autograd" in path)


# Words a file must spell (beside ``torch``) to define or register a custom op.
_GATE_WORDS = ("custom_op", "triton_op", "register_fake", "register_autograd", "register_kernel", "impl_abstract")


def mentions_custom_op(text: str) -> bool:
    """The cheap gate: can this file define or register a custom op?

    Whether ``text`` spells ``torch`` and a gate word as a whole word (``\\bword\\b``),
    found with substring searches (a fast scan each) and a look at the characters
    around each occurrence: a regular expression tries every position of the text,
    which cost 0.15 s over the torch tree on the 121 files that spell a word at all.
    """
    if "torch" not in text:
        return False
    for word in _GATE_WORDS:
        start = text.find(word)
        while start != -1:
            end = start + len(word)
            if not (start and _word_character(text[start - 1])) and not (end < len(text) and _word_character(text[end])):
                return True
            start = text.find(word, start + 1)
    return False


def _word_character(character: str) -> bool:
    # What ``\w`` matches in a str pattern.
    return character.isalnum() or character == "_"
