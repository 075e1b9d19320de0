"""A quick fix computed on the statement that holds the finding, not on the whole module.

An editor's quick fix (:func:`autograd_lint.lint.fix.fix_diagnostic`) fixes one
finding.  Run over the whole module, libcst's passes follow the file's size: the
fixer's transform and the import adder each walk every node, code generation writes
the whole module, and the result is parsed and compiled again (12 s of CPU for one
fix in PyTorch's 6,154-line ``test_custom_ops.py``).  Here the fixer visits only the
innermost ``def`` or ``class`` that holds the finding's line (the top-level statement
when none does), and the imports it asks for are added to the module's head alone
(its first statement and the import lines after it, which is all that libcst's
``AddImportsVisitor`` reads or changes), each spliced back into the text.

The result is the whole-module fix's, byte for byte: the same fixer on the same
nodes (the analysis's own parse when it parsed the module whole, else a parse of the
top-level statement, with the file's positions), the same import adder on a module
whose statements up to the first one it stops at are the file's, and the
untouched text around them.  :func:`fix_in_place` answers :data:`UNDECIDED`
wherever that can't be shown cheaply, and the caller runs the whole-module fix: a
text with a carriage return, a form feed or a line holding a lone backslash (libcst
reads those differently from a part of them), an import to remove (libcst's remover
reads every use in the module), an import to add when the finding sits in the head,
a finding on a line that no statement holds (a comment between two), or a result that
does not compile on its own (a ``nonlocal`` outside its function).  A fix that changes
nothing in the statement changes nothing in the module: every line of a statement,
comment lines inside it included, belongs to a node of its tree.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from typing import Callable, Iterator, Mapping, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

from autograd_lint.lint.engine import every_finding
from autograd_lint.model.analysis import FileAnalysis, python_rejects
from autograd_lint.model.cst_parse import parse_module
from autograd_lint.model.locate import top_level_statements
from autograd_lint.model.positions import positions
from autograd_lint.model.source import SourceFile, split_lines
from autograd_lint.lint.head_imports import add_imports
from autograd_lint.rules.base import Diagnostic, Fixer, Rule
from autograd_lint.settings import Settings

# The whole-module fix must decide (see the module docstring).
UNDECIDED = object()

# A line holding only a backslash continuation: libcst rejects it at the start of a block.
_LONE_BACKSLASH = re.compile(r"^[ \t]*\\$", re.MULTILINE)
# The statement standing in for the first one after the head: its leading lines are the file's.
_PLACEHOLDER = "pass\n"
_IMPORT_START = re.compile(r"(?:import|from)\b")


class _Shifted(Mapping[cst.CSTNode, CodeRange]):
    """Positions of a part's nodes in the file: the part starts at column 0 of line ``1 + lines``."""

    def __init__(self, table: Mapping[cst.CSTNode, CodeRange], lines: int) -> None:
        self.table = table
        self.lines = lines

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self.table[node]
        return CodeRange(
            CodePosition(found.start.line + self.lines, found.start.column),
            CodePosition(found.end.line + self.lines, found.end.column),
        )

    def __contains__(self, node: object) -> bool:
        return node in self.table

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)


def fix_in_place(
    rule: type[Rule], analysis: FileAnalysis, source: SourceFile, diagnostic: Diagnostic, settings: Settings
) -> str | None | object:
    """``source`` with ``diagnostic`` fixed by ``rule``'s fixer, None when the fix changes
    nothing or gives code that does not compile, :data:`UNDECIDED` when the whole-module
    fix must decide.  ``analysis`` is the analysis of ``source.text``."""
    text = source.text
    if "\r" in text or "\f" in text or _LONE_BACKSLASH.search(text):
        return UNDECIDED
    if python_rejects(text, source.path) is not None:
        return None  # as the whole-module fix: nothing is fixed in a text that does not compile
    lines = split_lines(text)
    line_starts = _line_starts(text)
    unit = analysis.whole_module
    if (
        unit is not None
        and unit.line_map is None
        and unit.line_offset == 0
        and not unit.column_shifts
        and unit.has_positions
    ):
        # The analysis parsed this very text whole (no rewrite: no form feed, no lone backslash),
        # and worked out its positions (else they would cost more than parsing the statement alone).
        module, table = unit.module, unit.ranges
        heads = [_first_line(statement, table) for statement in module.body]
        body = module.body
        head_end = _head_end(len(body), lambda index: _is_import(body[index]))
    else:
        statements = top_level_statements(text, lines)
        if not statements:
            return UNDECIDED
        at = bisect.bisect_right([first for first, _ in statements], diagnostic.line - 1) - 1
        if at < 0:
            return UNDECIDED
        first, end = statements[at]
        try:
            module = parse_module("".join(lines[first:end]))
        except cst.ParserSyntaxError:
            return UNDECIDED
        table = _Shifted(positions(module), first)
        heads = [first + 1 for first, _ in statements]
        head_end = _head_end(len(statements), lambda index: _IMPORT_START.match(lines[statements[index][0]]) is not None)
    found = _holder(module, table, diagnostic.line)
    if found is None:
        return UNDECIDED
    node, indents = found
    fixer = rule.fixer(analysis, [diagnostic]) if rule.fixer is not None else None
    if fixer is None:
        return None
    if rule.reads_findings:
        fixer.findings = functools.partial(every_finding, analysis, settings, but=rule.code)
    fixer.table = table
    fixed = node.visit(fixer)
    if fixer.unused_imports or not isinstance(fixed, type(node)) or not _same_lines(fixed, node):
        return UNDECIDED
    old = _code(module, node, indents)
    start = line_starts[_first_line(node, table) - 1]
    if text[start : start + len(old)] != old:
        return UNDECIDED
    new = _code(module, fixed, indents)
    # The head: the file's first statement and the import lines after it (see _head_end).
    head_stop = line_starts[heads[head_end] - 1] if head_end < len(heads) else len(text)
    rest = text[start + len(old) :]
    if fixer.needed_imports:
        if start < head_stop or head_end == len(heads):
            return UNDECIDED
        head = _with_imports(text[:head_stop], fixer)
        if head is None:
            return UNDECIDED
        fixed_text = head + text[head_stop:start] + new + rest
    else:
        head = text[: min(start, head_stop)]
        fixed_text = text[:start] + new + rest
    if fixed_text == text:
        return None
    # Top-level statements compile on their own; the head before it carries the __future__ imports.
    standalone = head + module.code_for_node(fixed.with_changes(leading_lines=()))
    if _rejects(standalone, source.path):
        return UNDECIDED
    return fixed_text


def _line_starts(text: str) -> list[int]:
    return list(itertools.accumulate(map(len, split_lines(text)), initial=0))


def _first_line(statement: cst.CSTNode, table: Mapping[cst.CSTNode, CodeRange]) -> int:
    """The line a statement's code starts on: its first decorator's, for a decorated one."""
    decorators = getattr(statement, "decorators", ())
    return table[decorators[0] if decorators else statement].start.line


def _head_end(count: int, is_import: Callable[[int], bool]) -> int:
    """Index of the first of ``count`` top-level statements after the head: the first statement,
    then the ones that start with an import (libcst's import adder stops at or before that one)."""
    index = 1
    while index < count and is_import(index):
        index += 1
    return index


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))


def _same_lines(fixed: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether the fix left the statement's leading lines alone (they are not replaced)."""
    before, after = getattr(node, "leading_lines", ()), getattr(fixed, "leading_lines", ())
    return len(before) == len(after) and all(a.deep_equals(b) for a, b in zip(before, after))


def _holder(
    module: cst.Module, table: Mapping[cst.CSTNode, CodeRange], line: int
) -> tuple[cst.CSTNode, list[str]] | None:
    """The innermost ``def`` or ``class`` holding ``line`` (else the top-level statement that
    does), and the indentation of each block around it."""
    found = _holding(module.body, table, line)
    if found is None:
        return None
    indents: list[str] = []
    best, best_indents = found, []
    current = found
    while True:
        inner = None
        for block in _blocks(current):
            statement = _holding(block.body, table, line)
            if statement is not None:
                inner = statement
                indents = [*indents, module.default_indent if block.indent is None else block.indent]
                break
        if inner is None:
            return best, best_indents
        current = inner
        if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            best, best_indents = current, indents


def _holding(body: Sequence[cst.CSTNode], table: Mapping[cst.CSTNode, CodeRange], line: int) -> cst.CSTNode | None:
    for statement in body:
        if _first_line(statement, table) <= line <= table[statement].end.line:
            return statement
    return None


def _blocks(statement: cst.CSTNode) -> Iterator[cst.IndentedBlock]:
    """The indented blocks of a compound statement (a ``match`` is not entered: its cases carry an indentation of their own)."""
    if not isinstance(statement, (cst.If, cst.Try, cst.TryStar, cst.With, cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
        return
    parts: list[cst.CSTNode] = [statement, *getattr(statement, "handlers", ())]
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:
        parts.append(orelse)
        orelse = getattr(orelse, "orelse", None)  # elif chains
    finalbody = getattr(statement, "finalbody", None)
    if finalbody is not None:
        parts.append(finalbody)
    for part in parts:
        if isinstance(part.body, cst.IndentedBlock):
            yield part.body


def _code(module: cst.Module, statement: cst.CSTNode, indents: Sequence[str]) -> str:
    """``statement``'s code as it is written in ``module``, inside blocks indented by ``indents``,
    its leading lines left out."""
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens.extend(indents)
    statement.with_changes(leading_lines=())._codegen(state)
    return "".join(state.tokens)


def _with_imports(head: str, fixer: Fixer) -> str | None:
    """``head`` with the imports ``fixer`` asks for, as libcst's import adder writes them
    (with the fix pass's context, which names no package)."""
    try:
        module = parse_module(head + _PLACEHOLDER)
        code = add_imports(module, fixer.needed_imports, None).code
    except (cst.ParserSyntaxError, ValueError):
        return None
    return code[: -len(_PLACEHOLDER)] if code.endswith(_PLACEHOLDER) else None


def _rejects(text: str, path: str) -> bool:
    """Whether ``text`` does not compile, or libcst can't parse it."""
    if python_rejects(text, path) is not None:
        return True
    try:
        cst.parse_module(text)
        compile(text, path, "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError):
        return True
    return False
