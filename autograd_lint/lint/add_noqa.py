"""``check --add-noqa[=REASON]``: silence every current finding with a ``# noqa`` on its line.

For each line with findings, their codes are added to the ``# noqa: ...``
comment already there (after its last code, the rest of the line untouched), or
a ``# noqa: AGL001`` comment is appended (``# noqa: AGL001  # REASON`` with a
reason).  A line that ends inside a string or with a backslash cannot hold a
comment: its findings are named and left.  The result must parse and compile,
and is written through the same guarded atomic writer as ``--fix``
(:func:`autograd_lint.lint.fix.rewrite`); running it again changes nothing, because
the findings it silenced are no longer reported.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from autograd_lint.lint.fix import read_for_rewrite, rewrite, verify
from autograd_lint.model.source import SourceError, split_lines
from autograd_lint.noqa import add_codes, comment_layout
from autograd_lint.rules.base import Diagnostic


@dataclass
class NoqaEdit:
    """One file's text with ``# noqa`` comments added, and the lines that could not take one."""

    text: str
    added: int = 0  # lines that got codes
    skipped: list[int] = field(default_factory=list)


def add_noqa_to_text(text: str, diagnostics: Iterable[Diagnostic], reason: str | None = None) -> NoqaEdit:
    """``text`` with the codes of ``diagnostics`` added to the ``# noqa`` of their lines."""
    codes: dict[int, list[str]] = defaultdict(list)
    for diagnostic in diagnostics:
        codes[diagnostic.line].append(diagnostic.code)
    lines = list(split_lines(text))  # a form feed or U+2028 ends no line: the findings' line numbers are the tokenizer's
    edit = NoqaEdit(text)
    layout = comment_layout(text)
    if layout is None:  # does not tokenize: no line can be edited safely
        edit.skipped.extend(sorted(codes))
        return edit
    for number, wanted in sorted(codes.items()):
        if not 0 < number <= len(lines):
            continue
        if number in layout.blocked:
            edit.skipped.append(number)
            continue
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        new_body = add_codes(body, layout.comment_columns.get(number), sorted(wanted), reason)
        if new_body != body:
            lines[number - 1] = new_body + line[len(body) :]
            edit.added += 1
    edit.text = "".join(lines)
    return edit


def add_noqa_to_file(path: str, diagnostics: Sequence[Diagnostic], reason: str | None) -> NoqaEdit:
    """Add the comments in the file ``path`` and write it if it changed; raises :class:`SourceError`."""
    data, encoding, text = read_for_rewrite(path)
    edit = add_noqa_to_text(text, diagnostics, reason)
    if edit.text != text:
        problem = verify(edit.text, path)
        if problem is not None:
            raise SourceError(path, f"adding noqa comments gave code that does not parse ({problem}); not written")
        rewrite(path, data, encoding, edit.text)
    return edit
