"""Rendering a check's findings for people and machines: ``text``, ``json``, ``sarif`` and ``github``.

Every format receives the same :class:`CheckOutcome`, so that switching formats
never changes what is reported.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Sequence
from urllib.parse import quote

from autograd_lint import __version__
from autograd_lint.lint.docs import rule_page
from autograd_lint.rules import all_rules, rule_by_code
from autograd_lint.rules.base import Diagnostic, Rule, Severity
from autograd_lint.model.source import SourceError


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


SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
# Relative artifact URIs are resolved against this base, the directory the check ran in.
_SRCROOT = "%SRCROOT%"


def _artifact_location(path: str, root: Path) -> dict[str, str]:
    """A relative URI under ``root`` when ``path`` is inside it, else an absolute ``file:`` URI."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        return {"uri": absolute.as_uri()}
    # The file name's bytes, percent-encoded: a name that is not UTF-8 (read with surrogate escapes) too.
    return {"uri": quote(os.fsencode(relative.as_posix())), "uriBaseId": _SRCROOT}


def _sarif_rule(rule: type[Rule]) -> dict[str, object]:
    return {
        "id": rule.code,
        "name": rule.__name__,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.what_it_does()},
        "help": {"text": rule.why, "markdown": rule_page(rule)},
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity], "enabled": rule.enabled_by_default},
    }


def render_sarif(outcome: CheckOutcome) -> str:
    """A SARIF 2.1.0 log with one run: the rule catalogue, the findings, and unreadable files as notifications."""
    root = Path(os.getcwd())
    rules = all_rules()
    index = {rule.code: position for position, rule in enumerate(rules)}
    results = [
        {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": _SARIF_LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact_location(d.path, root),
                        "region": {"startLine": d.line, "startColumn": d.column + 1},
                    }
                }
            ],
        }
        for d in outcome.diagnostics
    ]
    notifications = [
        {
            "level": "error",
            "message": {"text": error.problem},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact_location(error.path, root),
                        **({"region": {"startLine": error.line}} if error.line else {}),
                    }
                }
            ],
        }
        for error in outcome.errors
    ]
    run = {
        "tool": {
            "driver": {
                "name": "autograd-lint",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_sarif_rule(rule) for rule in rules],
            }
        },
        "invocations": [{"executionSuccessful": not outcome.errors, "toolExecutionNotifications": notifications}],
        "originalUriBaseIds": {_SRCROOT: {"uri": root.as_uri().rstrip("/") + "/"}},
        # Columns count characters, as Python (and flake8) count them, not UTF-16 code units.
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"


_GITHUB_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _github_data(text: str) -> str:
    """Escaping of a workflow command's message, as the GitHub Actions runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    """Escaping of a workflow command's property value, which also ends at ``,`` and ``:``."""
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def _github_command(command: str, message: str, **properties: object) -> str:
    listed = ",".join(f"{key}={_github_property(str(value))}" for key, value in properties.items())
    return f"::{command} {listed}::{_github_data(message)}"


def render_github(outcome: CheckOutcome) -> str:
    """GitHub Actions workflow commands: one annotation per finding and per file that could not be checked."""
    lines = [
        _github_command(
            _GITHUB_COMMAND[d.severity], d.message, file=d.path, line=d.line, col=d.column + 1, title=d.code
        )
        for d in outcome.diagnostics
    ]
    for error in outcome.errors:
        where = {"file": error.path, **({"line": error.line} if error.line else {})}
        lines.append(_github_command("error", error.problem, **where, title="autograd-lint"))
    return "".join(line + "\n" for line in lines)


FORMATS: dict[str, Callable[[CheckOutcome], str]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
    "github": render_github,
}


@dataclass(frozen=True)
class Statistic:
    """One row of ``--statistics``: how often a rule reported, and whether ``--fix`` can repair it."""

    code: str
    count: int
    fixable: bool
    title: str


def statistics(diagnostics: Sequence[Diagnostic], fixable_codes: Collection[str]) -> list[Statistic]:
    """One row per rule that reported, most frequent first (then by code), as ruff orders them."""
    counts = Counter(d.code for d in diagnostics)
    rows = []
    for code, count in counts.items():
        rule = rule_by_code(code)
        rows.append(Statistic(code, count, code in fixable_codes, rule.title if rule else code))
    return sorted(rows, key=lambda row: (-row.count, row.code))


def render_statistics_text(rows: Sequence[Statistic]) -> str:
    """ruff's layout: count, code and title in tab-separated columns, ``[*]`` on fixable rules."""
    if not rows:
        return ""
    count_width = max(len(str(row.count)) for row in rows)
    code_width = max(len(row.code) for row in rows)
    any_fixable = any(row.fixable for row in rows)
    lines = []
    for row in rows:
        marker = ("[*] " if row.fixable else "[ ] ") if any_fixable else ""
        lines.append(f"{row.count:>{count_width}}\t{row.code:<{code_width}}\t{marker}{row.title}")
    return "\n".join(lines) + "\n"


def render_statistics_json(rows: Sequence[Statistic]) -> str:
    document = [{"code": r.code, "count": r.count, "fixable": r.fixable, "title": r.title} for r in rows]
    return json.dumps(document, indent=2) + "\n"
