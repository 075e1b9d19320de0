"""Running the rules over analysed files: selection, ``# noqa``, and ordering.

Used by every front end, so that the CLI, flake8 and pre-commit report the same
findings at the same places.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Iterable, Sequence

from autograd_lint.model.analysis import FileAnalysis
from autograd_lint.model.guard import stage
from autograd_lint.model.source import split_lines
from autograd_lint.rules import all_rules
from autograd_lint.rules.base import Diagnostic, FunctionContext, Rule
from autograd_lint.settings import Settings

# flake8's own noqa syntax: "# noqa" or "# noqa: A001, B2" (case-insensitive).
_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]*(?:[,\s]+[A-Z]+[0-9]*)*))?", re.IGNORECASE)


def _matches(code: str, selectors: Iterable[str]) -> str | None:
    """The longest selector that is a prefix of ``code`` ("ALL" matches everything)."""
    best = None
    for selector in selectors:
        selector = selector.upper()
        if selector == "ALL" or code.startswith(selector):
            if best is None or len(selector) > len(best):
                best = selector
    return best


def is_selected(rule: type[Rule], settings: Settings, path: str | None = None) -> bool:
    """ruff's semantics: the most specific of select / ignore wins; ties go to ignore."""
    explicit = _matches(rule.code, settings.extend_select) or _matches(rule.code, settings.select)
    if explicit is None:
        return False
    if not rule.enabled_by_default and len(explicit) < len(rule.code) and explicit != rule.code:
        return False  # off-by-default rules need their own code in select
    ignored = _matches(rule.code, settings.ignore)
    if path is not None:
        posix = Path(path).as_posix()
        for pattern, codes in settings.per_file_ignores:
            if fnmatch.fnmatch(posix, pattern) or fnmatch.fnmatch(posix, f"*/{pattern}"):
                match = _matches(rule.code, codes)
                if match and (ignored is None or len(match) > len(ignored)):
                    ignored = match
    return ignored is None or len(explicit) > len(ignored)


def selected_rules(settings: Settings, path: str | None = None) -> list[Rule]:
    return [rule() for rule in all_rules() if is_selected(rule, settings, path)]


def noqa_codes(line: str) -> frozenset[str] | None:
    """Codes a ``# noqa`` comment on ``line`` silences; empty set means all; None: no comment."""
    match = _NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    return frozenset(c.upper() for c in re.split(r"[,\s]+", codes) if c) if codes else frozenset()


def check_analysis(analysis: FileAnalysis, settings: Settings, honour_noqa: bool = True) -> list[Diagnostic]:
    """Every finding of the selected rules in one analysed file, sorted by position."""
    if not analysis.functions:
        return []  # most analysed files: no rule needs selecting
    rules = selected_rules(settings, analysis.source.path)
    if not rules:
        return []
    diagnostics: set[Diagnostic] = set()
    path = analysis.source.path
    for rule in rules:
        with stage(path, f"running {rule.code}"):
            reports = list(rule.check_module(analysis, settings))
            for function in analysis.functions:
                reports.extend(rule.check_function(FunctionContext(function, analysis, settings)))
        for report in reports:
            severity = report.severity or rule.severity
            diagnostics.add(
                Diagnostic(path, report.position.line, report.position.column, rule.code, report.message, severity)
            )
    result = sorted(diagnostics, key=Diagnostic.sort_key)
    return _without_noqa(result, split_lines(analysis.source.text)) if honour_noqa else result


def _without_noqa(diagnostics: Sequence[Diagnostic], lines: Sequence[str]) -> list[Diagnostic]:
    kept = []
    for diagnostic in diagnostics:
        line = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
        codes = noqa_codes(line)
        if codes is None or (codes and not any(diagnostic.code.startswith(c) for c in codes)):
            kept.append(diagnostic)
    return kept
