r"""A large module parsed by libcst a statement at a time, each part kept by its text.

An editor checks the whole buffer after every keystroke, and an edit changes one
statement of a file: parsing a 6,000-line file again costs a second of CPU, its node
positions half as much again.  Here the text is cut, at the statement lines CPython's
parser found (:mod:`autograd_lint.model.statements`), into *chunks*: a top-level
statement with the blank and comment lines before it.  A large class is cut again into
*pieces*: its header with the first statement of its body, then each further statement
of its body, parsed inside a stand-in ``class _:`` line (so its lines keep their
indentation: nothing in them is rewritten).  Each chunk and piece is parsed on its own
and kept by its text with its node positions, so the next version of the buffer parses
only what changed.  The parts make one ``cst.Module`` equal to what ``cst.parse_module``
gives for the whole text (the same nodes, the same code), and :func:`table` gives each
node the range the whole module's code generation would (its part's range, moved down
by the lines before the part).

A cut is made only where libcst gives every line between two statements to the second
(its leading lines): the lines between are empty or a comment at the statements' own
indentation, never whitespace alone or a comment indented otherwise (those can belong
to the block before).  Where that does not hold, the statements share a part.  A text
with a carriage return, a form feed or a byte-order mark, or whose parts' blocks
disagree on the default indentation (which libcst takes from the first indented line
of the whole text), is not cut: :func:`assemble` answers None and the caller parses it
whole.  A part whose text appears twice in one file is parsed again for its second
place: one node object never stands at two places of a module.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from autograd_lint.model.statements import Lines, Spans

# Below this, a parse of the whole text costs a few milliseconds: not worth a cut.
MIN_CHARS = 20_000
# A class of fewer lines is parsed as one chunk.
_MIN_CLASS_LINES = 150
# The line that stands in for a piece's class (its own line 1).
_STAND_IN = "class _:\n"
# Characters of text kept, with their parses: a few large files' worth.  Bounded by
# size, not count: parsed code is many objects, and every object kept alive is work for
# each full garbage collection of a run over thousands of files.
_MOST_CHARS = 1_000_000
# Assembled modules whose parts are known (the parse cache keeps 4 modules).
_MOST_MODULES = 8

# Node -> (the table that has its range, the lines before that table's line 1 in its chunk).
_Owners = dict[cst.CSTNode, tuple[Mapping[cst.CSTNode, CodeRange], int]]


@dataclass
class _Part:
    """One chunk or piece, parsed alone: its module and where its nodes lie in it."""

    module: cst.Module
    indents: frozenset[str]  # its default indent, when it holds an indented block (where it was read)
    _table: Mapping[cst.CSTNode, CodeRange] | None = field(default=None, repr=False)

    @property
    def table(self) -> Mapping[cst.CSTNode, CodeRange]:
        if self._table is None:
            from autograd_lint.model.positions import positions

            self._table = positions(self.module)
        return self._table


@dataclass
class _Chunk:
    """A top-level statement (with its leading lines) as the whole module holds it."""

    statements: tuple[cst.BaseStatement, ...]
    header: Sequence[cst.EmptyLine]  # the module's header, for the first chunk
    footer: Sequence[cst.EmptyLine]  # the module's footer, for the last chunk
    has_trailing_newline: bool
    indents: frozenset[str]
    # The parts its nodes come from, each with the lines before its line 1 in the chunk.
    parts: tuple[tuple[_Part, int], ...]
    # Nodes made here from the parts' nodes, with their ranges in the chunk's lines.
    made: dict[cst.CSTNode, CodeRange] = field(default_factory=dict)
    _owners: _Owners | None = field(default=None, repr=False)

    @property
    def owners(self) -> _Owners:
        """Each node of the chunk (and some of its parts' own that it left out), with where its range is."""
        if self._owners is None:
            owners: _Owners = {}
            for part, offset in self.parts:
                table = part.table
                owners.update(dict.fromkeys(table, (table, offset)))
            owners.update(dict.fromkeys(self.made, (self.made, 0)))
            self._owners = owners
        return self._owners

    @property
    def end(self) -> CodePosition:
        """Where the chunk's code ends, in its own lines (what its module's range ends at)."""
        part, offset = self.parts[-1]
        end = part.table[part.module].end
        return CodePosition(end.line + offset, end.column)


_lock = threading.RLock()
_kept: OrderedDict[tuple[str, bool, bool], _Chunk | _Part] = OrderedDict()
_kept_chars = 0
# Assembled module -> its chunks and the line each starts after.
_assembled: OrderedDict[cst.Module, tuple[tuple[_Chunk, int], ...]] = OrderedDict()


def assemble(source: str, spans: Spans) -> cst.Module | None:
    """``cst.parse_module(source)``, made of parts kept by text; None when it can't be cut
    (see the module's docstring), or a part doesn't parse on its own."""
    if "\r" in source or "\f" in source or source.startswith("\ufeff") or not spans:
        return None
    # The guard runs every parse on one thread; the lock keeps the kept parts whole
    # should two threads ever parse at once.
    with _lock:
        return _assemble(source, spans)


def _assemble(source: str, spans: Spans) -> cst.Module | None:
    lines = source.split("\n")
    used: set[int] = set()
    chunks: list[tuple[_Chunk, int]] = []
    cuts = list(_cuts(lines, spans))
    for index, (first, last, members) in enumerate(cuts):
        nested = bool(members) and index < len(cuts) - 1 and last - first >= _MIN_CLASS_LINES
        chunk = _chunk(lines, first, last, members if nested else (), index == 0, used)
        if chunk is None:
            return None
        chunks.append((chunk, first - 1))
    if any(chunk.footer for chunk, _ in chunks[:-1]):
        return None  # lines after a statement that the next one would not lead: not a cut
    indents = frozenset().union(*(chunk.indents for chunk, _ in chunks))
    if len(indents) > 1:
        return None
    head, _ = chunks[0]
    tail, _ = chunks[-1]
    top = head.parts[0][0].module
    module = cst.Module(
        body=[statement for chunk, _ in chunks for statement in chunk.statements],
        header=head.header,
        footer=tail.footer,
        encoding=top.encoding,
        default_indent=next(iter(indents)) if indents else top.default_indent,
        default_newline=top.default_newline,
        has_trailing_newline=tail.has_trailing_newline,
    )
    _assembled[module] = tuple(chunks)
    while len(_assembled) > _MOST_MODULES:
        _assembled.popitem(last=False)
    return module


def table(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange] | None:
    """The node ranges of an assembled ``module``, from its parts' (None if it is not one)."""
    with _lock:
        chunks = _assembled.get(module)
        return None if chunks is None else _Ranges(module, chunks)


def _cuts(lines: Sequence[str], spans: Spans) -> Iterator[tuple[int, int, Lines]]:
    """The (first, last) lines of each chunk, every line of the text in order, and the
    lines of its class's body statements when it holds one class alone."""
    start = 1
    previous_last = 0
    held: list[Lines] = []
    for span in spans:
        if previous_last and span.first > previous_last and _leads(lines, previous_last, span.first, ""):
            yield start, previous_last, held[0] if len(held) == 1 else ()
            start = previous_last + 1
            held = []
        held.append(span.members)
        previous_last = max(previous_last, span.last)
    yield start, len(lines), held[0] if len(held) == 1 else ()


def _leads(lines: Sequence[str], last: int, first: int, indent: str) -> bool:
    """Whether libcst gives every line after line ``last`` and before ``first`` (statements
    indented by ``indent``) to the statement at ``first``."""
    comment = indent + "#"
    return all(line == "" or line.startswith(comment) for line in lines[last : first - 1])


def _text(lines: Sequence[str], first: int, last: int) -> str:
    text = "\n".join(lines[first - 1 : last])
    return text + "\n" if last < len(lines) else text


def _kept_part(key: tuple[str, bool, bool], used: set[int]) -> _Chunk | _Part | None:
    found = _kept.get(key)
    if found is None or id(found) in used:
        return None
    _kept.move_to_end(key)
    used.add(id(found))
    return found


def _keep(key: tuple[str, bool, bool], value: _Chunk | _Part, used: set[int]) -> None:
    global _kept_chars
    used.add(id(value))
    if key in _kept:
        return  # a second place of the same text: parsed again, the first one kept
    _kept[key] = value
    _kept_chars += len(key[0])
    while _kept_chars > _MOST_CHARS and len(_kept) > 1:
        (dropped, _, _), _ = _kept.popitem(last=False)
        _kept_chars -= len(dropped)


def _chunk(
    lines: Sequence[str], first: int, last: int, members: Lines, is_first: bool, used: set[int]
) -> _Chunk | None:
    text = _text(lines, first, last)
    key = (text, is_first, False)
    found = _kept_part(key, used)
    if isinstance(found, _Chunk):
        if any(id(part) in used for part, _ in found.parts):
            found = None  # one of its pieces stands elsewhere in this module already
        else:
            used.update(id(part) for part, _ in found.parts)
            return found
    chunk = _class_chunk(lines, first, members, is_first, used) if members else None
    if chunk is None:
        chunk = _plain_chunk(text, is_first)
    if chunk is not None:
        _keep(key, chunk, used)
    return chunk


def _parse(text: str) -> _Part | None:
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    if not module.body:
        return None
    has_block = any(_has_block(statement) for statement in module.body)
    return _Part(module, frozenset({module.default_indent}) if has_block else frozenset())


def _plain_chunk(text: str, is_first: bool) -> _Chunk | None:
    part = _parse(text)
    if part is None:
        return None
    module = part.module
    statements = tuple(module.body)
    if not is_first and module.header:
        # Alone, a chunk's leading lines are its module's header; in the whole text they
        # lead its first statement.  Same text, same ranges: the part's table holds them.
        lead = statements[0].with_changes(leading_lines=[*module.header, *statements[0].leading_lines])
        part = _Part(module.with_changes(header=(), body=[lead, *statements[1:]]), part.indents)
        statements = (lead, *statements[1:])
    return _Chunk(
        statements, module.header if is_first else (), module.footer, module.has_trailing_newline,
        part.indents, ((part, 0),),
    )


def _class_chunk(lines: Sequence[str], first: int, members: Lines, is_first: bool, used: set[int]) -> _Chunk | None:
    """A chunk holding one large class, made of pieces (see the module's docstring)."""
    opening = lines[members[0][0] - 1]
    indent = opening[: len(opening) - len(opening.lstrip(" \t"))]
    if not indent:
        return None  # the body is on the class's own line
    # Pieces: runs of body statements, cut where the lines between lead the next one.
    groups: list[list[tuple[int, int]]] = [[members[0]]]
    for member in members[1:]:
        previous_last = groups[-1][-1][1]
        if member[0] > previous_last and _leads(lines, previous_last, member[0], indent):
            groups.append([member])
        else:
            groups[-1].append(member)
    if len(groups) < 2:
        return None
    head = _piece(_text(lines, first, groups[0][-1][1]), stand_in=False, used=used)
    if head is None or len(head.module.body) != 1 or head.module.footer:
        return None
    header_class = head.module.body[0]
    if not isinstance(header_class, cst.ClassDef) or not isinstance(header_class.body, cst.IndentedBlock):
        return None
    parts: list[tuple[_Part, int]] = [(head, 0)]
    body = list(header_class.body.body)
    start = groups[0][-1][1] + 1
    piece_class = header_class
    for group in groups[1:]:
        end = group[-1][1]
        piece = _piece(_STAND_IN + _text(lines, start, end), stand_in=True, used=used)
        if piece is None:
            return None
        piece_class = piece.module.body[0]
        assert isinstance(piece_class, cst.ClassDef) and isinstance(piece_class.body, cst.IndentedBlock)
        body.extend(piece_class.body.body)
        parts.append((piece, start - first - 1))  # the stand-in is the piece's line 1
        start = end + 1
    assert isinstance(piece_class.body, cst.IndentedBlock)
    block = header_class.body.with_changes(body=body, footer=piece_class.body.footer)
    module = head.module
    leading = header_class.leading_lines if is_first else [*module.header, *header_class.leading_lines]
    made_class = header_class.with_changes(body=block, leading_lines=leading)
    # The class and its block end where the last piece's stand-in class and block end.
    last_piece, last_offset = parts[-1]
    made: dict[cst.CSTNode, CodeRange] = {}
    for node, in_head, in_last in (
        (made_class, header_class, piece_class),
        (block, header_class.body, piece_class.body),
    ):
        start_at = head.table[in_head].start
        end_at = last_piece.table[in_last].end
        made[node] = CodeRange(start_at, CodePosition(end_at.line + last_offset, end_at.column))
    indents = frozenset().union(*(part.indents for part, _ in parts))
    return _Chunk(
        (made_class,), module.header if is_first else (), (), True, indents, tuple(parts), made
    )


def _piece(text: str, stand_in: bool, used: set[int]) -> _Part | None:
    key = (text, False, True)
    found = _kept_part(key, used)
    if isinstance(found, _Part):
        return found
    part = _parse(text)
    if part is None:
        return None
    if stand_in:
        module = part.module
        if module.header or module.footer or len(module.body) != 1:
            return None
        holder = module.body[0]
        if not isinstance(holder, cst.ClassDef) or not isinstance(holder.body, cst.IndentedBlock):
            return None
    _keep(key, part, used)
    return part


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
    """Node -> range in an assembled module: its part's range, moved down by the lines before the part."""

    def __init__(self, module: cst.Module, chunks: Sequence[tuple[_Chunk, int]]) -> None:
        self._module = module
        self._chunks = chunks
        self._moved: dict[cst.CSTNode, CodeRange] = {}
        # Node -> the place of its chunk in the module (built in C: one entry per node).
        self._places: dict[cst.CSTNode, int] = {}
        for place, (chunk, _) in enumerate(chunks):
            self._places.update(dict.fromkeys(chunk.owners, place))

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._moved.get(node)
        if found is not None:
            return found
        if node is self._module:
            chunk, offset = self._chunks[-1]
            end = chunk.end
            found = CodeRange(CodePosition(1, 0), CodePosition(end.line + offset, end.column))
        else:
            chunk, before = self._chunks[self._places[node]]
            table, inner = chunk.owners[node]
            offset = inner + before
            found = table[node]
            if offset:
                found = CodeRange(
                    CodePosition(found.start.line + offset, found.start.column),
                    CodePosition(found.end.line + offset, found.end.column),
                )
        self._moved[node] = found
        return found

    def __contains__(self, node: object) -> bool:
        return node is self._module or node in self._places

    def __iter__(self) -> Iterator[cst.CSTNode]:
        yield self._module
        yield from self._places

    def __len__(self) -> int:
        return 1 + len(self._places)
