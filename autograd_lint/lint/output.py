"""Rendering a check's findings for people and machines.

``text`` (also named ``concise``, as in ruff) and ``full`` for people; ``json``,
``json-lines``, ``sarif``, ``github``, ``gitlab`` and ``junit`` for tools.  Every
format receives the same :class:`CheckOutcome`, so that switching formats never
changes what is reported.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Sequence

from autograd_lint import __version__
from autograd_lint.model.diagnostic import Diagnostic, Severity
from autograd_lint.model.source import SourceError, read_source, split_lines

if TYPE_CHECKING:
    from autograd_lint.rules.base import Rule

# The rule catalogue (libcst and every rule module) is imported by the formats that
# describe rules, when they do: a report with no finding, or from cached results, needs none.


# Cached: a format asks for a file's lines once per finding in it.  A long-lived
# process (``--watch``) clears the cache before each run.
@functools.lru_cache(maxsize=None)
def file_lines(path: str) -> tuple[str, ...]:
    """The lines of the file at ``path`` without their line breaks; none when it cannot be read."""
    try:
        return tuple(line.rstrip("\r\n") for line in split_lines(read_source(path).text))
    except SourceError:
        return ()


@dataclass(frozen=True)
class CheckOutcome:
    """What one ``check`` run found, and how much of it to say."""

    diagnostics: Sequence[Diagnostic]
    errors: Sequence[SourceError]
    files_checked: int
    functions_found: int
    # The lines of a checked file, by the path its findings name (``full`` shows
    # them; ``gitlab`` fingerprints a finding by its line, not its line number).
    lines_of: Callable[[str], Sequence[str]] = file_lines
    # ``-q``: the formats for people leave out their closing summary.
    quiet: bool = False


def _summary(outcome: CheckOutcome) -> list[str]:
    """The closing lines of the formats for people: what was found, and what could not be checked."""
    if outcome.quiet:
        return []
    count = len(outcome.diagnostics)
    scope = f"{outcome.files_checked} files, {outcome.functions_found} autograd.Functions"
    lines = []
    if count:
        files = len({d.path for d in outcome.diagnostics})
        lines.append(f"Found {count} problem{'s' if count != 1 else ''} in {files} file{'s' if files != 1 else ''} ({scope}).")
    else:
        lines.append(f"All checks passed ({scope}).")
    if outcome.errors:
        lines.append(f"{len(outcome.errors)} file{'s' if len(outcome.errors) != 1 else ''} could not be checked (see above).")
    return lines


def _header(diagnostic: Diagnostic) -> str:
    return f"{diagnostic.path}:{diagnostic.line}:{diagnostic.column + 1}: {diagnostic.code} {diagnostic.message}"


def _joined(lines: Sequence[str]) -> str:
    return "".join(line + "\n" for line in lines)


def render_text(outcome: CheckOutcome) -> str:
    """One line per finding (``path:line:column: CODE message``), then the summary."""
    return _joined([_header(d) for d in outcome.diagnostics] + _summary(outcome))


def _excerpt(diagnostic: Diagnostic, lines: Sequence[str]) -> list[str]:
    """ruff's ``full`` layout under a finding: its line with the line number, a caret at its column."""
    if not 0 < diagnostic.line <= len(lines):
        return []
    line = lines[diagnostic.line - 1]
    number = str(diagnostic.line)
    gutter = " " * len(number)
    # Tabs before the column stay tabs, so that the caret lines up however they are shown.
    indent = "".join(c if c == "\t" else " " for c in line[: diagnostic.column])
    return [f"{gutter} |", f"{number} | {line}".rstrip(), f"{gutter} | {indent}^ {diagnostic.code}", f"{gutter} |"]


def render_full(outcome: CheckOutcome) -> str:
    """ruff's ``full`` format: each finding's line, then its source line with a caret under the column."""
    blocks = []
    for diagnostic in outcome.diagnostics:
        blocks += [_header(diagnostic), *_excerpt(diagnostic, outcome.lines_of(diagnostic.path)), ""]
    return _joined(blocks + _summary(outcome))


def _diagnostic_json(diagnostic: Diagnostic) -> dict[str, object]:
    from autograd_lint.rules import rule_by_code

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


def render_json_lines(outcome: CheckOutcome) -> str:
    """One JSON object per finding and line, with the keys of ``json``'s ``diagnostics``."""
    return _joined([json.dumps(_diagnostic_json(d)) for d in outcome.diagnostics])


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
    from urllib.parse import quote

    return {"uri": quote(os.fsencode(relative.as_posix())), "uriBaseId": _SRCROOT}


def _sha256(data: bytes) -> str:
    import hashlib  # here: loading OpenSSL costs every run 0.01-0.02 s

    return hashlib.sha256(data).hexdigest()


def _sarif_rule(rule: type[Rule]) -> dict[str, object]:
    from autograd_lint.lint.docs import rule_page

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
    from autograd_lint.rules import all_rules

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


# GitLab's code quality severities are info, minor, major, critical and blocker.
_GITLAB_SEVERITY = {Severity.ERROR: "critical", Severity.WARNING: "major", Severity.INFO: "info"}
# What a file that could not be checked is reported as, as the flake8 plugin reports it.
_NOT_CHECKED = "AGL000"


def _project_root() -> Path:
    """What GitLab's paths are relative to: the checkout (``CI_PROJECT_DIR`` in a GitLab job), else here."""
    return Path(os.path.abspath(os.environ.get("CI_PROJECT_DIR") or os.getcwd()))


def _gitlab_issue(check: str, description: str, severity: str, path: str, line: int, identity: tuple[object, ...]) -> dict[str, object]:
    return {
        "description": description,
        "check_name": check,
        "fingerprint": _sha256(json.dumps(identity).encode()),
        "severity": severity,
        "location": {"path": path, "lines": {"begin": line}},
    }


def render_gitlab(outcome: CheckOutcome) -> str:
    """A GitLab code quality report: a JSON array of issues, with paths relative to the project.

    A finding's fingerprint is the baseline's key (file, rule, scope, line text)
    and its rank among identical keys, not its line number: GitLab compares
    fingerprints between a merge request and its target to tell new findings
    from old ones, and code added above a finding must not make it new.
    """
    from autograd_lint.lint.baseline import fingerprint, relative_key  # the one format that needs it

    root = _project_root()
    seen: Counter[object] = Counter()
    issues = []
    for d in outcome.diagnostics:
        key = fingerprint(d, outcome.lines_of(d.path), root)
        seen[key] += 1
        issues.append(
            _gitlab_issue(
                d.code, f"{d.code}: {d.message}", _GITLAB_SEVERITY[d.severity], key.path, d.line,
                (key.path, key.code, key.scope, key.snippet, seen[key]),
            )
        )
    for error in outcome.errors:
        path = relative_key(error.path, root)
        description = f"{_NOT_CHECKED}: file not checked by autograd-lint: {error.problem}"
        issues.append(_gitlab_issue(_NOT_CHECKED, description, "critical", path, error.line or 1, (path, error.problem)))
    return json.dumps(issues, indent=2) + "\n"


@functools.cache
def _not_xml() -> re.Pattern[str]:
    """Characters XML 1.0 cannot hold, even escaped: compiled when the junit format asks
    (its character class cost every run's start-up 5-10 ms, a third of this module's import)."""
    return re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _not_xml().sub("\ufffd", text)


def render_junit(outcome: CheckOutcome) -> str:
    """JUnit XML, as ruff writes it: a test suite per file, a failed test case per finding.

    A file that could not be checked is a test case with an ``error``; a clean run
    is one passing test case, so that a CI system shows that the check ran.
    """
    import xml.etree.ElementTree as ElementTree

    by_path: dict[str, list[Diagnostic]] = {}
    for d in outcome.diagnostics:
        by_path.setdefault(d.path, []).append(d)
    failures, errors = len(outcome.diagnostics), len(outcome.errors)
    tests = max(failures + errors, 1)
    suites = ElementTree.Element(
        "testsuites", name="autograd-lint", tests=str(tests), failures=str(failures), errors=str(errors)
    )

    def suite(name: str, cases: int, failed: int, broken: int) -> ElementTree.Element:
        attributes = {"tests": str(cases), "failures": str(failed), "errors": str(broken), "skipped": "0"}
        return ElementTree.SubElement(suites, "testsuite", name=_xml(name), **attributes)

    for path, found in by_path.items():
        group = suite(path, len(found), len(found), 0)
        for d in found:
            where = f"line {d.line}, col {d.column + 1}"
            case = ElementTree.SubElement(
                group, "testcase", name=_xml(f"{d.code} at {where}"), classname=_xml(os.path.splitext(path)[0]),
                file=_xml(path), line=str(d.line),
            )
            failure = ElementTree.SubElement(case, "failure", message=_xml(d.message), type=d.code)
            failure.text = _xml(f"{path}:{d.line}:{d.column + 1}: {d.code} {d.message}")
    for error in outcome.errors:
        group = suite(error.path, 1, 0, 1)
        case = ElementTree.SubElement(group, "testcase", name=_NOT_CHECKED, classname=_xml(os.path.splitext(error.path)[0]), file=_xml(error.path))
        ElementTree.SubElement(case, "error", message=_xml(f"file not checked by autograd-lint: {error.problem}"), type=_NOT_CHECKED)
    if not failures and not errors:
        group = suite("autograd-lint", 1, 0, 0)
        ElementTree.SubElement(group, "testcase", name="No problems found", classname="autograd-lint")
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


FORMATS: dict[str, Callable[[CheckOutcome], str]] = {
    "text": render_text,
    # ruff's name for the same layout.
    "concise": render_text,
    "full": render_full,
    "json": render_json,
    "json-lines": render_json_lines,
    "sarif": render_sarif,
    "github": render_github,
    "gitlab": render_gitlab,
    "junit": render_junit,
}
# The formats for people: after --fix, the summary of what was fixed goes to stdout with them.
TEXT_FORMATS = frozenset({"text", "concise", "full"})


@dataclass(frozen=True)
class Statistic:
    """One row of ``--statistics``: how often a rule reported, and whether ``--fix`` can repair it."""

    code: str
    count: int
    fixable: bool
    title: str


def statistics(diagnostics: Sequence[Diagnostic], fixable_codes: Collection[str]) -> list[Statistic]:
    """One row per rule that reported, most frequent first (then by code), as ruff orders them."""
    from autograd_lint.rules import rule_by_code

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
