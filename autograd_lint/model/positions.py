"""Node positions of a parsed unit, as libcst's ``PositionProvider`` gives them, for less.

``PositionProvider`` generates the unit's code once and, for every token, splits
it on newlines to keep a line and column, and for every node builds two
``CodePosition`` objects and a ``CodeRange`` behind a generator-based context
manager.  That bookkeeping cost as much again as generating the code: about
0.5 s of CPU over the torch tree, while the analysis asks for the positions of
a few nodes per method.

:func:`positions` generates the code with the same libcst methods, so the same
nodes get the same start and end, but records for each node only the *index* of
the token it starts and ends at.  Lines and columns are worked out when a node's
position is first asked for, from the character offset of that token.  A unit
whose code holds a carriage return is handed to ``PositionProvider`` itself:
libcst counts a ``\\r\\n`` split across two tokens as two line ends, which
offsets into the joined text would not.
"""

from __future__ import annotations

import bisect
import itertools
import re
from typing import Iterator, Mapping

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

_LINE_END = re.compile("\n")


class _TokenIndexState(CodegenState):
    """libcst's code generation, noting each node's first and last token index.

    The rules are ``PositionProvidingCodegenState``'s: a node's range is where its
    code starts and ends, unless the node narrows it to its syntactic part with
    :meth:`record_syntactic_position` (possibly hoisting the start or end of a
    child), which the outer, whitespace-inclusive range then does not overwrite.
    """

    __slots__ = ("spans", "_starts", "_syntactic", "_scope")

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.spans: dict[cst.CSTNode, tuple[int, int]] = {}
        self._starts: list[int] = []
        self._syntactic: list[tuple[cst.CSTNode, cst.CSTNode | None, cst.CSTNode | None, int]] = []
        self._scope = _SyntacticScope(self)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        if node not in self.spans:
            self.spans[node] = (start, len(self.tokens))

    def record_syntactic_position(  # type: ignore[override]
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> "_SyntacticScope":
        self._syntactic.append((node, start_node, end_node, len(self.tokens)))
        return self._scope

    def close_syntactic(self) -> None:
        node, start_node, end_node, start = self._syntactic.pop()
        end = len(self.tokens)
        if start_node is not None:
            start = self.spans[start_node][0]
        if end_node is not None:
            end = self.spans[end_node][1]
        self.spans[node] = (start, end)

    def drop_syntactic(self) -> None:
        self._syntactic.pop()

    def pop_trailing_newline(self) -> None:
        # The module drops its last newline after its statements have been placed;
        # PositionProvider keeps the line and column that counted it, and so does this
        # state by keeping the token (the text itself is never used).
        pass


class _SyntacticScope:
    """The context manager :meth:`_TokenIndexState.record_syntactic_position` returns.

    One object per state serves every nested ``with`` (the state keeps the stack):
    ``contextlib.contextmanager`` made a generator per node.
    """

    __slots__ = ("_state",)

    def __init__(self, state: _TokenIndexState) -> None:
        self._state = state

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self._state.close_syntactic()
        else:
            # The code generation failed inside this node (a RecursionError on deep
            # code): its children's spans may be missing, and a KeyError raised here
            # would hide the error that says what happened.
            self._state.drop_syntactic()


class Positions(Mapping[cst.CSTNode, CodeRange]):
    """Node -> ``CodeRange``, each range computed on first request from token indices."""

    def __init__(self, spans: dict[cst.CSTNode, tuple[int, int]], tokens: list[str], code: str) -> None:
        self._spans = spans
        self._tokens = tokens
        self._code = code
        self._offsets: list[int] | None = None
        self._line_starts: list[int] = []
        self._ranges: dict[cst.CSTNode, CodeRange] = {}

    def _position(self, token: int) -> CodePosition:
        if self._offsets is None:
            self._offsets = list(itertools.accumulate(map(len, self._tokens), initial=0))
            self._line_starts = [0, *(match.end() for match in _LINE_END.finditer(self._code))]
        offset = self._offsets[token]
        line = bisect.bisect_right(self._line_starts, offset)
        return CodePosition(line, offset - self._line_starts[line - 1])

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._ranges.get(node)
        if found is None:
            start, end = self._spans[node]
            found = self._ranges[node] = CodeRange(self._position(start), self._position(end))
        return found

    def __contains__(self, node: object) -> bool:
        return node in self._spans

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)


def positions(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """Every node of ``module`` with the range ``PositionProvider`` gives it, computed lazily."""
    state = _TokenIndexState(module)
    module._codegen(state)
    code = "".join(state.tokens)
    if "\r" in code:
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return Positions(state.spans, state.tokens, code)
