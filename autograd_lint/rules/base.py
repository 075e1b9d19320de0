"""What a rule is: a code, a severity, its documentation, its own examples, and a check.

Modelled on Fixit: every rule carries VALID and INVALID examples; one
parametrised test runs them all and the rule pages in ``docs/rules/`` are
generated from the same text.  A rule checks either one Function at a time
(:meth:`Rule.check_function`) or a whole module (:meth:`Rule.check_module`),
and reports :class:`Report` values; the engine turns those into
:class:`Diagnostic` values with the rule's code and the file's path.  A rule
that can repair what it reports names a :class:`Fixer` (see :mod:`autograd_lint.lint.fix`);
a rule that looks at code outside the Function classes declares it in ``needs``.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, ClassVar, Iterator, Mapping, Sequence

import libcst as cst

from autograd_lint.model.diagnostic import Diagnostic, FixSafety, Severity
from autograd_lint.model.spec import FunctionSpec, MethodSpec, Position

if TYPE_CHECKING:
    from libcst.metadata import CodeRange

    from autograd_lint.model.analysis import FileAnalysis, ModuleNeed
    from autograd_lint.model.extract import ParsedUnit
    from autograd_lint.settings import Settings


@dataclass(frozen=True)
class Report:
    """A finding as a rule states it: where, and what is wrong in concrete terms."""

    position: Position
    message: str
    # For a rule whose parts differ in severity (the catalogue's "error (a-c);
    # warning (d)"); None means the rule's own severity.
    severity: Severity | None = None


@dataclass(frozen=True)
class Example:
    """Source a rule is run on in its own tests.

    ``min_python`` is the first Python whose parser reads the example (``(3, 12)``
    for ``class F[T](...)``): the analyser checks only what the running Python
    compiles, so on an older one the example is skipped, not run.
    """

    code: str
    min_python: tuple[int, int] | None = field(default=None, kw_only=True)

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")

    @property
    def parses_here(self) -> bool:
        """Whether the running Python's parser reads this example."""
        return self.min_python is None or sys.version_info >= self.min_python


@dataclass(frozen=True)
class Valid(Example):
    """Source on which the rule must report nothing."""


@dataclass(frozen=True)
class Invalid(Example):
    """Source on which the rule must report a finding on ``line`` (1-based) whose message
    contains ``message``.  Both are required of every example (tests/rules/test_rule_examples.py
    fails on one without them); they default to None only so that a missing one is a test
    failure naming the example, not an import error of every rule."""

    line: int | None = None
    message: str | None = None  # a substring the message must contain
    # The source after the rule's fixes, safe and unsafe (dedented like ``code``);
    # None for a rule with a fix means that the fix leaves this example unchanged.
    fixed: str | None = None

    @property
    def fixed_source(self) -> str | None:
        return None if self.fixed is None else textwrap.dedent(self.fixed).lstrip("\n")


class FunctionContext:
    """What a rule sees of one Function: its spec, and the parsed code of its file."""

    def __init__(self, function: FunctionSpec, analysis: "FileAnalysis", settings: "Settings") -> None:
        self.function = function
        self.analysis = analysis
        self.settings = settings

    def unit(self, method: MethodSpec) -> "ParsedUnit | None":
        """The parsed code holding ``method``, if it is in this file."""
        if method.node is None or method.path != self.analysis.source.path:
            return None
        return self.analysis.units.get(method.defined_in)

    def own(self, method: MethodSpec | None) -> bool:
        """True when ``method`` is written in this class (so findings belong here)."""
        return method is not None and method.defined_in == self.function.qualname

    def position(self, method: MethodSpec, node: cst.CSTNode) -> Position:
        unit = self.unit(method)
        assert unit is not None, "position() needs a method parsed in this process"
        return unit.position(node)


@dataclass(frozen=True)
class ImportRef:
    """An import as libcst's ``AddImportsVisitor`` / ``RemoveImportsVisitor`` name it:
    ``import module`` when ``obj`` is None, else ``from module import obj [as asname]``."""

    module: str
    obj: str | None = None
    asname: str | None = None


class Fixer(cst.CSTTransformer):
    """Rewrites what one rule reported in a file, in the tree of the whole module.

    The fix pass (:mod:`autograd_lint.lint.fix`) builds one per rule and file with the
    file's analysis and that rule's diagnostics, gives it the positions of the parsed
    module's nodes (:attr:`table`) and visits the module.  A subclass rewrites only nodes that were reported
    (:meth:`reported`, or a ``def`` on one of :attr:`lines`), leaves anything it cannot rewrite
    for certain as it is (the diagnostic then remains), and lists the imports the new
    code needs in :attr:`needed_imports`, and the ones it may have made unused in
    :attr:`unused_imports` (removed only when nothing else uses them).
    """

    def __init__(self, analysis: "FileAnalysis", diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__()
        self.analysis = analysis
        # The positions of the visited module's nodes, set by the fix pass before the visit
        # (:func:`autograd_lint.model.positions.positions`: what ``PositionProvider`` gives, for less).
        self.table: Mapping[cst.CSTNode, CodeRange] = {}
        # Set by the fix pass for the fixer of a rule that ``reads_findings``:
        # what every other rule reports in the file, as ``check_findings`` gets it.
        self.findings: Callable[[], Sequence[Diagnostic]] | None = None
        self.positions = frozenset(Position(d.line, d.column) for d in diagnostics)
        self.lines = frozenset(d.line for d in diagnostics)
        self.needed_imports: list[ImportRef] = []
        self.unused_imports: list[ImportRef] = []

    def position(self, node: cst.CSTNode) -> Position:
        """Where ``node`` (of the tree being visited, not a rewritten copy) starts."""
        start = self.table[node].start
        return Position(start.line, start.column)

    def reported(self, node: cst.CSTNode) -> bool:
        """True when a diagnostic points at the start of ``node``."""
        return self.position(node) in self.positions


class Rule:
    """Base class of every rule; subclasses set the class attributes and one check."""

    code: ClassVar[str]
    title: ClassVar[str]
    severity: ClassVar[Severity]
    # Why it is bad: the exact runtime error, or the silent wrong result (torch 2.13).
    why: ClassVar[str]
    fix: ClassVar[FixSafety] = FixSafety.NONE
    # How to repair the findings; set exactly when ``fix`` is not NONE.
    fixer: ClassVar[type[Fixer] | None] = None
    enabled_by_default: ClassVar[bool] = True
    # What the rule looks at outside the Function classes; the analysis parses a
    # whole module only when a selected rule needs something its text shows.
    needs: ClassVar[frozenset["ModuleNeed"]] = frozenset()
    # Off by default, but on for a project whose configuration says ``uses-compile = true``.
    on_when_compiling: ClassVar[bool] = False
    VALID: ClassVar[list[Valid]]
    INVALID: ClassVar[list[Invalid]]

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        return iter(())

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        return iter(())

    # A rule about the other rules' findings (AGL100: a ``# noqa`` that silences
    # nothing) sets this; the engine then runs it after every other rule and hands
    # it, through :meth:`check_findings`, what they all report in the file, whatever
    # the selection and ``# noqa`` (a callable: running every rule costs, and most
    # files give such a rule nothing to ask).  The rules never import the engine.
    reads_findings: ClassVar[bool] = False

    def check_findings(
        self, analysis: "FileAnalysis", settings: "Settings", findings: Callable[[], Sequence[Diagnostic]]
    ) -> Iterator[Report]:
        return iter(())

    @classmethod
    def what_it_does(cls) -> str:
        """The class docstring, without its indentation (it starts on the opening quotes)."""
        return inspect.cleandoc(cls.__doc__ or "")
