r"""A large module parsed by libcst one top-level statement at a time, each kept by its text.

An editor checks the whole buffer after every keystroke, and an edit changes one
top-level statement of a file: parsing a 6,000-line file again costs a second of CPU,
its node positions half as much again.  Here the text is cut, at the statement lines
CPython's parser found (:mod:`autograd_lint.model.statements`), into *chunks*: a
top-level statement with the blank and comment lines before it.  Each chunk is parsed
on its own and kept by its text with its node positions, so the next version of the
buffer parses only the chunks that changed.  The chunks' statements make one
``cst.Module`` equal to what ``cst.parse_module`` gives for the whole text (the same
nodes, the same code), and :func:`table` gives each node the range the whole
module's code generation would (its chunk's range, moved down by the lines before it).

The cut is made only where libcst gives every line between two statements to the
second (its leading lines): the lines between are empty or a comment at column 0,
never indented (an indented comment or whitespace after a block belongs to the block's
footer).  Where that does not hold, the statements share a chunk.  A text with a
carriage return, a form feed or a byte-order mark, or whose chunks' blocks disagree
on the default indentation (which libcst takes from the first indented line of the
whole text), is not cut: :func:`assemble` answers None and the caller parses it whole.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from autograd_lint.model.statements import Spans

# Below this, a parse of the whole text costs a few milliseconds: not worth a cut.
MIN_CHARS = 20_000
# Characters of chunk text kept, with their parses: a few large files' worth.  Bounded by
# size, not count: parsed code is many objects, and every object kept alive is work for
# each full garbage collection of a run over thousands of files.
_MOST_CHARS = 1_000_000
# Assembled modules whose chunks are known (the parse cache keeps 4 modules).
_MOST_MODULES = 8


@dataclass
class _Chunk:
    """One chunk's parse: its statements as the whole module holds them."""

    module: cst.Module  # the chunk alone, with its leading lines moved onto its first statement
    has_block: bool  # whether it holds an indented block (so its default indent was read from it)
    _table: Mapping[cst.CSTNode, CodeRange] | None = field(default=None, repr=False)

    @property
    def table(self) -> Mapping[cst.CSTNode, CodeRange]:
        if self._table is None:
            from autograd_lint.model.positions import positions

            self._table = positions(self.module)
        return self._table


_chunks: OrderedDict[tuple[str, bool], _Chunk] = OrderedDict()
_kept_chars = 0
# Assembled module -> its chunks and the line each starts after.
_assembled: OrderedDict[cst.Module, tuple[tuple[_Chunk, int], ...]] = OrderedDict()


def assemble(source: str, spans: Spans) -> cst.Module | None:
    """``cst.parse_module(source)``, made of chunks kept by text; None when it can't be cut
    (see the module's docstring), or a chunk doesn't parse on its own."""
    if "\r" in source or "\f" in source or source.startswith("\ufeff") or not spans:
        return None
    lines = source.split("\n")
    parts: list[tuple[_Chunk, int]] = []
    for index, (first, last) in enumerate(_cuts(lines, spans)):
        text = "\n".join(lines[first - 1 : last])
        if last < len(lines):
            text += "\n"
        chunk = _chunk(text, index == 0)
        if chunk is None:
            return None
        parts.append((chunk, first - 1))
    if any(chunk.module.footer for chunk, _ in parts[:-1]):
        return None  # lines after a statement that the next one would not lead: not a cut
    indents = {chunk.module.default_indent for chunk, _ in parts if chunk.has_block}
    if len(indents) > 1:
        return None
    head, _ = parts[0]
    tail, _ = parts[-1]
    module = cst.Module(
        body=[statement for chunk, _ in parts for statement in chunk.module.body],
        header=head.module.header,
        footer=tail.module.footer,
        encoding=head.module.encoding,
        default_indent=indents.pop() if indents else head.module.default_indent,
        default_newline=head.module.default_newline,
        has_trailing_newline=tail.module.has_trailing_newline,
    )
    _assembled[module] = tuple(parts)
    while len(_assembled) > _MOST_MODULES:
        _assembled.popitem(last=False)
    return module


def table(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange] | None:
    """The node ranges of an assembled ``module``, from its chunks' (None if it is not one)."""
    parts = _assembled.get(module)
    if parts is None:
        return None
    return _Ranges(module, parts)


def _cuts(lines: Sequence[str], spans: Spans) -> Iterator[tuple[int, int]]:
    """The (first, last) lines of each chunk: every line of the text, in order."""
    start = 1
    previous_last = 0
    for first, last in spans:
        if previous_last and first > previous_last and _between_is_leading(lines, previous_last, first):
            yield start, previous_last
            start = previous_last + 1
        previous_last = max(previous_last, last)
    yield start, len(lines)


def _between_is_leading(lines: Sequence[str], last: int, first: int) -> bool:
    """Whether libcst gives every line after line ``last`` and before ``first`` to the next statement."""
    return all(line == "" or line.startswith("#") for line in lines[last:first - 1])


def _chunk(text: str, first: bool) -> _Chunk | None:
    key = (text, first)
    found = _chunks.get(key)
    if found is not None:
        _chunks.move_to_end(key)
        return found
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    if not module.body:
        return None
    if not first and module.header:
        # Alone, a chunk's leading lines are its module's header; in the whole text they
        # lead its first statement.
        lead = module.body[0]
        lead = lead.with_changes(leading_lines=[*module.header, *lead.leading_lines])
        module = module.with_changes(header=(), body=[lead, *module.body[1:]])
    chunk = _Chunk(module, any(_has_block(statement) for statement in module.body))
    global _kept_chars
    _chunks[key] = chunk
    _kept_chars += len(text)
    while _kept_chars > _MOST_CHARS and len(_chunks) > 1:
        (dropped, _), _ = _chunks.popitem(last=False)
        _kept_chars -= len(dropped)
    return chunk


def _has_block(statement: cst.CSTNode) -> bool:
    """Whether a top-level statement holds an indented block (where libcst reads an indent)."""
    if not isinstance(statement, cst.BaseCompoundStatement):
        return False
    suites: list[object] = [statement.body]
    for name in ("orelse", "finalbody"):
        child = getattr(statement, name, None)
        if child is not None:
            suites.append(getattr(child, "body", None))
    suites.extend(handler.body for handler in getattr(statement, "handlers", ()))
    suites.extend(case.body for case in getattr(statement, "cases", ()))
    # An `elif` is an If in `orelse`: its own suites count too.
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If) and _has_block(orelse):
        return True
    return any(isinstance(suite, cst.IndentedBlock) for suite in suites)


class _Ranges(Mapping[cst.CSTNode, CodeRange]):
    """Node -> range in the assembled module: its chunk's range, moved down by the chunk's first line."""

    def __init__(self, module: cst.Module, parts: Sequence[tuple[_Chunk, int]]) -> None:
        self._module = module
        self._parts = parts
        self._moved: dict[cst.CSTNode, CodeRange] = {}
        self._tables = [(chunk.table, offset) for chunk, offset in parts]

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._moved.get(node)
        if found is not None:
            return found
        if node is self._module:
            table, offset = self._tables[-1]
            end = table[self._parts[-1][0].module].end
            found = CodeRange(CodePosition(1, 0), CodePosition(end.line + offset, end.column))
        else:
            for table, offset in self._tables:
                if node in table:
                    inner = table[node]
                    found = CodeRange(
                        CodePosition(inner.start.line + offset, inner.start.column),
                        CodePosition(inner.end.line + offset, inner.end.column),
                    )
                    break
            else:
                raise KeyError(node)
        self._moved[node] = found
        return found

    def __contains__(self, node: object) -> bool:
        return node is self._module or any(node in table for table, _ in self._tables)

    def __iter__(self) -> Iterator[cst.CSTNode]:
        yield self._module
        for table, _ in self._tables:
            yield from table

    def __len__(self) -> int:
        return 1 + sum(len(table) for table, _ in self._tables)
