"""AGL100: a ``# noqa: AGL...`` comment that silences nothing (off by default, as ruff's RUF100)."""

from __future__ import annotations

import ast
import builtins
import re
from typing import TYPE_CHECKING, Callable, Collection, Iterator, Sequence

import libcst as cst

from autograd_lint import noqa
from autograd_lint.model.source import split_lines
from autograd_lint.model.spec import Position
from autograd_lint.rules import rule_by_code
from autograd_lint.rules.base import Diagnostic, Fixer, FixSafety, Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

# Codes of this tool; a noqa comment's other codes (E501, F401) belong to other linters.
_OWN_PREFIX = "AGL"
_FULL_CODE_LENGTH = len("AGL000")
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


def unused_codes(listed: Collection[str], reported: Collection[str], own: str) -> list[tuple[str, bool]]:
    """The codes of ``listed`` (upper case) that silence nothing when the line's findings are ``reported``.

    Each comes with True when it is not a rule of autograd-lint at all.  Codes of
    other tools, and ``own`` (AGL100 itself), are never unused.
    """
    unused = []
    for code in sorted(listed):
        if not code.startswith(_OWN_PREFIX) or code == own:
            continue
        if len(code) == _FULL_CODE_LENGTH and rule_by_code(code) is None:
            unused.append((code, True))
        elif not any(found.startswith(code) for found in reported):
            unused.append((code, False))
    return unused


_STAR_IMPORT = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+\*", re.MULTILINE)
_NAME = re.compile(r"[A-Za-z_]\w*")
# Bases that never make a class a Function, wherever the run looks.
_NEUTRAL = frozenset({"builtins.object", "typing.Generic", "abc.ABC"})


class _Undecided:
    """The lines whose findings may depend on files the run did not read.

    What is reported on a line can change with the other files of a run: a class
    whose base is imported (``class Sub(Base)``, ``Base`` a Function in another
    file) is linted only when that file is read, and a call of an imported
    Function (``Fn.forward(...)``) is one only when ``Fn`` is known.  A run over
    part of a project (pre-commit's staged files, stdin, an editor's buffer)
    does not see them, so a code there would look unused when it is not.  Such
    lines are: those of a class that is not a recognised Function and has a base
    that is not known (imported, from a star import, or such a class of this
    file), and, outside the recognised Functions, those that name an imported
    name (or any line, after ``import *``).
    """

    def __init__(self, analysis: "FileAnalysis") -> None:
        self.aliases = analysis.imports.aliases
        self.functions = [(f.position.line, f.last_line) for f in analysis.functions]
        self.star = _STAR_IMPORT.search(analysis.source.text) is not None
        self.classes = self._undecided_classes(analysis)

    def _undecided_classes(self, analysis: "FileAnalysis") -> list[tuple[int, int]]:
        try:
            tree = ast.parse(analysis.source.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return [(1, len(analysis.source.text.splitlines()) or 1)]
        starts = {line for line, _ in self.functions}
        classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.lineno not in starts]
        undecided: dict[str, ast.ClassDef] = {}
        changed = True
        while changed:  # a class of this file on an undecided base is undecided too
            changed = False
            for node in classes:
                if node.name not in undecided and any(self._unknown(base, undecided) for base in node.bases):
                    undecided[node.name] = node
                    changed = True
        return [(node.lineno, node.end_lineno or node.lineno) for node in undecided.values()]

    def _unknown(self, base: ast.expr, undecided: dict[str, ast.ClassDef]) -> bool:
        text = ast.unparse(base).split("[")[0]  # Generic[T] is Generic
        if text in undecided:
            return True
        head = text.split(".")[0]
        if head in self.aliases:
            qualified = self.aliases[head] + text[len(head):]
            return qualified not in _NEUTRAL and not qualified.startswith("torch.nn.")
        return self.star and head.isidentifier() and head not in dir(builtins)

    def __call__(self, line: int, code: str) -> bool:
        """Whether findings on ``line`` (whose code, without its comment, is ``code``) may come from elsewhere."""
        if any(start <= line <= end for start, end in self.classes):
            return True
        if any(start <= line <= end for start, end in self.functions):
            return False
        return self.star or any(name in self.aliases for name in _NAME.findall(code))


def _by_line(findings: Sequence[Diagnostic]) -> dict[int, set[str]]:
    reported: dict[int, set[str]] = {}
    for diagnostic in findings:
        reported.setdefault(diagnostic.line, set()).add(diagnostic.code)
    return reported


def without_codes(comment: str, unused: Collection[str]) -> str:
    """``comment`` (a whole ``#`` comment) with the ``unused`` codes taken out of its ``# noqa``.

    The other codes keep their spelling and order, the text around the directive
    is kept as it is, and a directive left with no code goes, so that a bare
    ``# noqa`` (which silences everything) never results.  The empty string means
    that nothing of the comment remains.
    """
    match = noqa.LINE_NOQA.search(comment)
    if match is None or not match.group("codes"):
        return comment
    listed = _CODE.findall(match.group("codes"))
    kept = [code for code in listed if code.upper() not in unused]
    if kept:
        return comment[: match.start("codes")] + ", ".join(kept) + comment[match.end("codes") :]
    before, after = comment[: match.start()].rstrip(), comment[match.end() :].strip()
    if after and not after.startswith("#"):
        after = f"# {after}"  # text after the codes was part of this comment: it stays one
    return f"{before}  {after}" if before and after else before or after


class _Fix(Fixer):
    """Takes the codes that silence nothing out of each reported ``# noqa`` comment (the whole
    directive when none is left, the comment too when nothing else is in it)."""

    def __init__(self, analysis: "FileAnalysis", diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__(analysis, diagnostics)
        self._reported: dict[int, set[str]] | None = None

    def _rewritten(self, comment: cst.Comment) -> str | None:
        """The new text of a reported ``comment``, or None to leave it as it is."""
        if not self.reported(comment) or self.findings is None:
            return None
        if self._reported is None:
            self._reported = _by_line(self.findings())
        line = self.position(comment).line
        match = noqa.LINE_NOQA.search(comment.value)
        if match is None or not match.group("codes"):
            return None
        listed = {code.upper() for code in _CODE.findall(match.group("codes"))}
        unused = {code for code, _ in unused_codes(listed, self._reported.get(line, set()), UnusedNoqa.code)}
        return without_codes(comment.value, unused) if unused else None

    def leave_TrailingWhitespace(
        self, original_node: cst.TrailingWhitespace, updated_node: cst.TrailingWhitespace
    ) -> cst.TrailingWhitespace:
        if original_node.comment is None:
            return updated_node
        text = self._rewritten(original_node.comment)
        if text is None:
            return updated_node
        if not text:  # the spaces before the comment go with it
            return updated_node.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
        return updated_node.with_changes(comment=cst.Comment(text))

    def leave_EmptyLine(
        self, original_node: cst.EmptyLine, updated_node: cst.EmptyLine
    ) -> cst.EmptyLine | cst.RemovalSentinel:
        if original_node.comment is None:
            return updated_node
        text = self._rewritten(original_node.comment)
        if text is None:
            return updated_node
        # A line that held nothing but the comment goes with it.
        return updated_node.with_changes(comment=cst.Comment(text)) if text else cst.RemoveFromParent()


class UnusedNoqa(Rule):
    """Reports a ``# noqa`` comment whose ``AGL`` codes include one that silences
    nothing on its line: no rule reports that code (or, for a prefix such as
    ``AGL0``, any code it starts) there, or the code is not a rule of
    autograd-lint.  Every rule is consulted, whether or not the run selects it,
    so the answer does not depend on the selection.  Codes of other linters
    (``E501``) and a bare ``# noqa`` are left alone, and only files that define
    a Function are looked at.  Lines whose findings may come from files the run
    does not read are left alone too: those of a class that is not a recognised
    Function and has a base the run does not know, and, outside the recognised
    Functions, those that name an imported name (any line, after ``import *``).

    The fix takes those codes out of the comment, keeping the others (other
    tools' codes too); a ``# noqa`` left without codes is removed (never made a
    bare ``# noqa``), with the comment when nothing else is in it, and with its
    line when the comment stood alone.  Only comments change."""

    code = "AGL100"
    title = "`# noqa` code that silences nothing"
    severity = Severity.INFO
    enabled_by_default = False
    fix = FixSafety.SAFE
    fixer = _Fix
    why = (
        "No error: the comment does nothing today, but it will silence that rule if a finding "
        "later appears on the line, hiding a real bug, and it tells readers that something is wrong "
        "here when nothing is."
    )

    reads_findings = True

    def check_findings(
        self, analysis: "FileAnalysis", settings: "Settings", findings: Callable[[], Sequence[Diagnostic]]
    ) -> Iterator[Report]:
        comments = [
            comment
            for comment in noqa.noqa_comments(analysis.source.text)
            if any(code.startswith(_OWN_PREFIX) for code in comment.codes)
        ]
        if not comments:
            return
        reported = _by_line(findings())
        undecided = _Undecided(analysis)
        lines = split_lines(analysis.source.text)  # numbered as tokenize numbers the comments
        for comment in comments:
            if undecided(comment.line, lines[comment.line - 1][: comment.column]):
                continue
            unused = [
                f"{code} (not a rule)" if not_a_rule else code
                for code, not_a_rule in unused_codes(comment.codes, reported.get(comment.line, set()), self.code)
            ]
            if unused:
                yield Report(
                    Position(comment.line, comment.column),
                    f"`# noqa` lists {', '.join(unused)}, which silence{'s' if len(unused) == 1 else ''} "
                    "nothing on this line",
                )

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b  # noqa: AGL001
            """
        ),
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2  # noqa: E501

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2  # noqa
            """
        ),
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b  # noqa: AGL0, E501
            """
        ),
        # Sub's base and Fn live in files this example does not read: in a run that reads
        # them, the codes silence findings, so they can't be called unused here.
        Valid(
            """
            import torch
            from pkg import ops
            from pkg.base import Base

            class Sub(Base):
                @staticmethod
                def backward(ctx, grad):
                    return grad  # noqa: AGL001

            class Own(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2

            y = ops.Fn.forward(None, 1.0)  # noqa: AGL021
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a  # noqa: AGL001
            """,
            line=12,
            message="lists AGL001, which silences nothing",
            fixed="""
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """,
        ),
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b  # noqa: AGL001, AGL005, E501
            """,
            line=12,
            message="lists AGL005, which silences nothing",
            fixed="""
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b  # noqa: AGL001, E501
            """,
        ),
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2  # noqa: AGL999

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2  # type: ignore[no-any-return]  # noqa: AGL0  # kept from the old kernel
            """,
            line=6,
            message="AGL999 (not a rule)",
            fixed="""
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2  # type: ignore[no-any-return]  # kept from the old kernel
            """,
        ),
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    # noqa: AGL001
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return (grad *  # noqa: AGL016
                            2)
            """,
            line=6,
            message="lists AGL001, which silences nothing",
            fixed="""
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return (grad *
                            2)
            """,
        ),
    ]
