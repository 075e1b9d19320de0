"""A finding as the front ends show it, with its severity and how safe its fix is.

Its own module, free of libcst and the rule catalogue: a run whose results come
from the cache (:mod:`autograd_lint.model.result_cache`) reads and prints
findings without importing either.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.Enum):
    """How bad a finding is, by what follows at runtime (policy: docs/rules/README.md)."""

    ERROR = "error"  # raises on a reachable path
    WARNING = "warning"  # a silently wrong or missing result, a leak, or a hazard that depends on later use
    INFO = "info"  # style, deprecation, compatibility, performance


class FixSafety(enum.Enum):
    NONE = "none"
    SAFE = "safe"  # applied by --fix
    UNSAFE = "unsafe"  # changes behaviour: applied only with --unsafe-fixes


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
