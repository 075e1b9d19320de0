"""What a rule is: a code, a severity, its documentation, its own examples, and a check.

Modelled on Fixit: every rule carries VALID and INVALID examples; one
parametrised test runs them all and the rule pages in ``docs/rules/`` are
generated from the same text.  A rule checks either one Function at a time
(:meth:`Rule.check_function`) or a whole module (:meth:`Rule.check_module`),
and reports :class:`Report` values; the engine turns those into
:class:`Diagnostic` values with the rule's code and the file's path.
"""

from __future__ import annotations

import enum
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterator

import libcst as cst

from autograd_lint.spec import FunctionSpec, MethodSpec, Position

if TYPE_CHECKING:
    from autograd_lint.analysis import FileAnalysis
    from autograd_lint.extract import ParsedUnit
    from autograd_lint.settings import Settings


class Severity(enum.Enum):
    ERROR = "error"  # crashes, or wrong or missing gradients at runtime
    WARNING = "warning"  # leaks, performance, or a hazard that depends on later use
    INFO = "info"


class FixSafety(enum.Enum):
    NONE = "none"
    SAFE = "safe"  # applied by --fix
    UNSAFE = "unsafe"  # changes behaviour: applied only with --unsafe-fixes


@dataclass(frozen=True)
class Report:
    """A finding as a rule states it: where, and what is wrong in concrete terms."""

    position: Position
    message: str
    # For a rule whose parts differ in severity (the catalogue's "error (a-c);
    # warning (d)"); None means the rule's own severity.
    severity: Severity | None = None


@dataclass(frozen=True)
class Diagnostic:
    """A finding as the front ends show it."""

    path: str
    line: int
    column: int  # 0-based, as ast and flake8 count
    code: str
    message: str
    severity: Severity

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)


@dataclass(frozen=True)
class Valid:
    """Source on which the rule must report nothing."""

    code: str

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")


@dataclass(frozen=True)
class Invalid:
    """Source on which the rule must report, on ``line`` (1-based) if given."""

    code: str
    line: int | None = None
    message: str | None = None  # a substring the message must contain

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")


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


class Rule:
    """Base class of every rule; subclasses set the class attributes and one check."""

    code: ClassVar[str]
    title: ClassVar[str]
    severity: ClassVar[Severity]
    # Why it is bad: the exact runtime error, or the silent wrong result (torch 2.13).
    why: ClassVar[str]
    fix: ClassVar[FixSafety] = FixSafety.NONE
    enabled_by_default: ClassVar[bool] = True
    VALID: ClassVar[list[Valid]]
    INVALID: ClassVar[list[Invalid]]

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        return iter(())

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        return iter(())

    @classmethod
    def what_it_does(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()
