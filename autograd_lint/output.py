"""Rendering a check's findings for people and machines: ``text`` and ``json``.

Every format receives the same :class:`CheckOutcome`, so that switching formats
never changes what is reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Sequence

from autograd_lint.rules import rule_by_code
from autograd_lint.rules.base import Diagnostic
from autograd_lint.source import SourceError


@dataclass(frozen=True)
class CheckOutcome:
    """What one ``check`` run found."""

    diagnostics: Sequence[Diagnostic]
    errors: Sequence[SourceError]
    files_checked: int
    functions_found: int


def render_text(outcome: CheckOutcome) -> str:
    lines = [f"{d.path}:{d.line}:{d.column + 1}: {d.code} {d.message}" for d in outcome.diagnostics]
    count = len(outcome.diagnostics)
    scope = f"{outcome.files_checked} files, {outcome.functions_found} autograd.Functions"
    if count:
        files = len({d.path for d in outcome.diagnostics})
        lines.append(f"Found {count} problem{'s' if count != 1 else ''} in {files} file{'s' if files != 1 else ''} ({scope}).")
    else:
        lines.append(f"All checks passed ({scope}).")
    if outcome.errors:
        lines.append(f"{len(outcome.errors)} file{'s' if len(outcome.errors) != 1 else ''} could not be checked (see above).")
    return "\n".join(lines) + "\n"


def _diagnostic_json(diagnostic: Diagnostic) -> dict[str, object]:
    rule = rule_by_code(diagnostic.code)
    return {
        "path": diagnostic.path,
        "line": diagnostic.line,
        "column": diagnostic.column + 1,
        "code": diagnostic.code,
        "message": diagnostic.message,
        "severity": diagnostic.severity.value,
        "title": rule.title if rule else None,
    }


def render_json(outcome: CheckOutcome) -> str:
    document = {
        "diagnostics": [_diagnostic_json(d) for d in outcome.diagnostics],
        "errors": [{"path": e.path, "line": e.line, "message": e.problem} for e in outcome.errors],
        "summary": {
            "files_checked": outcome.files_checked,
            "functions": outcome.functions_found,
            "diagnostics": len(outcome.diagnostics),
            "errors": len(outcome.errors),
        },
    }
    return json.dumps(document, indent=2) + "\n"


FORMATS: dict[str, Callable[[CheckOutcome], str]] = {"text": render_text, "json": render_json}
