"""``# noqa`` comments: which findings they silence, and which of their codes silence nothing.

Two kinds, both with flake8's syntax and meaning:

* on a line, ``# noqa`` (every finding on that line) or ``# noqa: AGL001, AGL0``
  (findings whose code starts with one of the codes), found anywhere in the
  physical line as flake8 finds it; as in flake8, a code is letters then digits,
  so ``# noqa: AGL`` is a bare ``# noqa``;
* for the whole file, a line that starts with ``# autograd-lint: noqa``,
  ``# ruff: noqa`` or ``# flake8: noqa``: bare, every finding; with codes
  (``# ruff: noqa: AGL005, AGL01``), only those codes and prefixes.  That is
  ruff's reading, which :func:`file_noqa` gives ``check`` and the server.
  flake8 itself reads ``# flake8: noqa: E501`` as a bare ``# flake8: noqa``
  (it ignores the codes and skips the file) and knows no ``# ruff: noqa``; under
  flake8 it decides, and the plugin applies only our own directive
  (:func:`own_file_noqa`).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

from autograd_lint.model.source import split_lines

# A code as flake8 reads one: letters then digits (AGL001, or a prefix such as AGL0).
_CODE_LIST = r"[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*"
# flake8's inline syntax (flake8.defaults.NOQA_INLINE_REGEXP), case-insensitive as there;
# the codes group stops before a trailing separator, where new codes are inserted.
LINE_NOQA = re.compile(rf"# noqa(?::[\s]?(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
# ruff's file-level exemptions (and flake8.defaults.NOQA_FILE's ``[:=]``), matched at the
# start of a line as flake8 matches its own.  After ``noqa``: a code list, or the end of the
# directive; anything else (``# flake8: noqa: see below``) is read as bare, as flake8 reads it.
_FILE_NOQA = re.compile(
    rf"\s*#\s*(?P<tool>autograd-lint|ruff|flake8)\s*[:=]\s*noqa"
    rf"(?::\s?(?P<codes>{_CODE_LIST})\s*(?:#.*)?$)?",
    re.IGNORECASE,
)
_CODE_SEPARATORS = re.compile(r"[,\s]+")


def _codes(text: str | None) -> frozenset[str]:
    return frozenset(code.upper() for code in _CODE_SEPARATORS.split(text or "") if code)


def silences(codes: frozenset[str], code: str) -> bool:
    """Whether a directive listing ``codes`` (empty: every code) silences ``code``."""
    return not codes or any(code.startswith(listed) for listed in codes)


def line_codes(line: str) -> frozenset[str] | None:
    """Codes a ``# noqa`` comment on ``line`` silences; the empty set means all; None: no comment."""
    match = LINE_NOQA.search(line)
    return None if match is None else _codes(match.group("codes"))


@dataclass(frozen=True)
class FileNoqa:
    """What a file-level directive silences: nothing (None), every code (empty set), or some codes."""

    codes: frozenset[str] | None

    def silences(self, code: str) -> bool:
        return self.codes is not None and silences(self.codes, code)


def file_noqa(lines: Iterable[str]) -> FileNoqa:
    """The file-level directives of a file, as ruff reads them (``check``, the server).

    ``# autograd-lint: noqa``, ``# ruff: noqa`` and ``# flake8: noqa`` alike: a
    bare one silences every finding; with codes, those codes (the codes of all
    such lines together).
    """
    return _file_directives(lines, ("autograd-lint", "ruff", "flake8"))


def own_file_noqa(lines: Iterable[str]) -> FileNoqa:
    """Only ``# autograd-lint: noqa`` directives: under flake8, flake8 reads its own
    ``# flake8: noqa`` (codes or not, the whole file) and no one reads ``# ruff: noqa``."""
    return _file_directives(lines, ("autograd-lint",))


def _file_directives(lines: Iterable[str], tools: tuple[str, ...]) -> FileNoqa:
    listed: set[str] = set()
    found = False
    for line in lines:
        match = _FILE_NOQA.match(line)
        if match is None or match.group("tool").lower() not in tools:
            continue
        codes = _codes(match.group("codes"))
        if not codes:
            return FileNoqa(frozenset())
        listed |= codes
        found = True
    return FileNoqa(frozenset(listed) if found else None)


def is_silenced(line: str, code: str) -> bool:
    """Whether a line-level ``# noqa`` on ``line`` silences ``code``."""
    codes = line_codes(line)
    return codes is not None and silences(codes, code)


@dataclass(frozen=True)
class Comment:
    """A ``# noqa: ...`` comment with codes, as tokenize finds it (so never inside a string)."""

    line: int  # 1-based
    column: int  # 0-based, where its ``#`` is
    codes: frozenset[str]


def noqa_comments(text: str) -> Iterator[Comment]:
    """Every comment of ``text`` that is a ``# noqa`` listing codes; nothing if ``text`` does not tokenize."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type != tokenize.COMMENT:
                continue
            match = LINE_NOQA.search(token.string)
            if match and match.group("codes"):
                yield Comment(token.start[0], token.start[1], _codes(match.group("codes")))
    except (tokenize.TokenError, SyntaxError):
        return


@dataclass(frozen=True)
class CommentLayout:
    """Where comments are and can go: the column of each line's comment, and lines that can't take one."""

    comment_columns: dict[int, int]  # 1-based line -> 0-based column of its ``#``
    blocked: frozenset[int]  # lines that end inside a string or with a backslash


def comment_layout(text: str) -> CommentLayout | None:
    """The :class:`CommentLayout` of ``text``; None when it does not tokenize."""
    columns: dict[int, int] = {}
    blocked: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                columns[token.start[0]] = token.start[1]
            elif token.start[0] != token.end[0]:  # a string (or f-string part) over several lines
                blocked.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return None
    blocked.update(number for number, line in enumerate(split_lines(text), 1) if line.rstrip().endswith("\\"))
    return CommentLayout(columns, frozenset(blocked))


def add_codes(line: str, comment_column: int | None, codes: Sequence[str], reason: str | None = None) -> str:
    """``line`` (without its line ending) with ``codes`` added to its ``# noqa``, or a new one appended.

    ``comment_column`` is where the line's comment starts (None: it has none);
    only that comment is searched for a ``# noqa``, never a string before it.
    An existing ``# noqa: A, B`` gets the new codes after its last code, the rest
    of the line untouched; a bare ``# noqa`` already silences everything.
    ``reason`` goes after a new comment as ``# noqa: AGL001  # reason``.
    """
    start = len(line) if comment_column is None else comment_column
    match = LINE_NOQA.search(line, start)
    if match is not None and not match.group("codes"):
        return line
    present = _codes(match.group("codes")) if match else frozenset()
    missing = [code for code in dict.fromkeys(codes) if not (present and silences(present, code))]
    if not missing:
        return line
    if match is not None:
        end = match.end("codes")
        return f"{line[:end]}, {', '.join(missing)}{line[end:]}"
    comment = f"# noqa: {', '.join(missing)}" + (f"  # {reason}" if reason else "")
    code = line.rstrip()
    return f"{code}  {comment}" if code else comment
