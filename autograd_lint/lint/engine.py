"""Running the rules over analysed files: selection, ``# noqa``, and ordering.

Used by every front end, so that the CLI, flake8 and pre-commit report the same
findings at the same places.
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from autograd_lint import noqa
from autograd_lint.model.analysis import FileAnalysis, ModuleNeed, analyze
from autograd_lint.model.extract import is_decorated
from autograd_lint.model.guard import fewer_collections, run_guarded, stage
from autograd_lint.model.source import SourceFile, split_lines
from autograd_lint.model.spec import FunctionSpec
from autograd_lint.rules import all_rules
from autograd_lint.rules.base import Diagnostic, FunctionContext, Report, Rule
from autograd_lint.settings import Settings

def _specificity(selector: str) -> int:
    """How specific a selector is: ``ALL`` least (ruff's reading), then by length."""
    return 0 if selector == "ALL" else len(selector)


def _matches(code: str, selectors: Iterable[str]) -> str | None:
    """The most specific selector that matches ``code`` ("ALL" matches everything)."""
    best = None
    for selector in selectors:
        selector = selector.upper()
        if selector == "ALL" or code.startswith(selector):
            if best is None or _specificity(selector) > _specificity(best):
                best = selector
    return best


def is_selected(rule: type[Rule], settings: Settings, path: str | None = None) -> bool:
    """ruff's semantics: the most specific of select / ignore wins; ties go to ignore.

    A rule that is off by default runs only when its own code or ``ALL`` selects it:
    ``AGL`` or ``AGL0`` mean the default rules of that family, ``ALL`` means every rule.
    """
    explicit = _matches(rule.code, settings.extend_select) or _matches(rule.code, settings.select)
    if explicit is None:
        return False
    enabled = rule.enabled_by_default or (rule.on_when_compiling and settings.uses_compile)
    if not enabled and explicit not in (rule.code, "ALL"):
        return False  # off-by-default rules need their own code (or ALL) in select
    ignored = _matches(rule.code, settings.ignore)
    if path is not None:
        posix = Path(path).as_posix()
        for pattern, codes in settings.per_file_ignores:
            if fnmatch.fnmatch(posix, pattern) or fnmatch.fnmatch(posix, f"*/{pattern}"):
                match = _matches(rule.code, codes)
                if match and (ignored is None or _specificity(match) > _specificity(ignored)):
                    ignored = match
    return ignored is None or _specificity(explicit) > _specificity(ignored)


def selected_rules(settings: Settings, path: str | None = None) -> list[Rule]:
    # A path matters only through per-file ignores.
    return [rule() for rule in _selected_classes(settings, path if settings.per_file_ignores else None)]


@functools.lru_cache(maxsize=64)
def _selected_classes(settings: Settings, path: str | None) -> tuple[type[Rule], ...]:
    # Cached: asked for every analysed file, with the same settings all run long.
    return tuple(rule for rule in all_rules() if is_selected(rule, settings, path))


@functools.lru_cache(maxsize=64)
def module_needs(settings: Settings) -> frozenset[ModuleNeed]:
    """What the selected rules look at outside the Function classes (per-file ignores
    only take rules away, so the selection without a path covers every file)."""
    needs: set[ModuleNeed] = set()
    for rule in all_rules():
        if is_selected(rule, settings):
            needs |= rule.needs
    return frozenset(needs)


def check_analysis(analysis: FileAnalysis, settings: Settings, honour_noqa: bool = True) -> list[Diagnostic]:
    """Every finding of the selected rules in one analysed file, sorted by position.

    With ``honour_noqa``, findings that a ``# noqa`` comment on their line or a
    file-level directive silences (see :mod:`autograd_lint.noqa`) are left out.
    """
    if analysis.nothing_to_check:
        return []  # most analysed files: no rule needs selecting
    rules = selected_rules(settings, analysis.source.path)
    if not rules:
        return []
    diagnostics: set[Diagnostic] = set()
    path = analysis.source.path
    for rule in rules:
        with stage(path, f"running {rule.code}"):
            if rule.reads_findings:
                others = functools.partial(every_finding, analysis, settings, but=rule.code)
                reports = list(rule.check_findings(analysis, settings, others))
                diagnostics.update(_diagnostics(path, rule, reports))
                continue
            # A rule that looks outside the Function classes has nothing to find when the
            # text shows none of what it needs (the module may be parsed whole for another rule).
            shown = not rule.needs or not rule.needs.isdisjoint(analysis.shown_needs)
            reports = list(rule.check_module(analysis, settings)) if shown else []
            for function in analysis.functions:
                if is_decorated(function, analysis.source.text):
                    continue  # a class decorator may change the contract (torch's supports_tensorlist wraps apply)
                reports.extend(rule.check_function(FunctionContext(function, analysis, settings)))
        diagnostics.update(_diagnostics(path, rule, reports))
    # The message breaks ties: two findings of one rule at one place (a set, in hash order) must print in one order.
    result = sorted(diagnostics, key=lambda d: (d.sort_key(), d.message))
    return _without_noqa(result, split_lines(analysis.source.text)) if honour_noqa else result


def _diagnostics(path: str, rule: Rule, reports: Iterable[Report]) -> Iterator[Diagnostic]:
    for report in reports:
        severity = report.severity or rule.severity
        yield Diagnostic(path, report.position.line, report.position.column, rule.code, report.message, severity)


def every_finding(analysis: FileAnalysis, settings: Settings, but: str) -> list[Diagnostic]:
    """What every rule except ``but`` reports in ``analysis``, whatever is selected, ``# noqa`` or not.

    The question "does this ``# noqa: AGL005`` silence anything?" has one answer
    whatever a run selects.
    """
    codes = tuple(rule.code for rule in all_rules() if rule.code != but)
    everything = replace(settings, select=codes, extend_select=(), ignore=(), per_file_ignores=())
    return check_analysis(analysis, everything, honour_noqa=False)


@dataclass(frozen=True)
class SourceCheck:
    """The Functions of one file checked on its own, its findings, and the analysis they came from."""

    functions: list[FunctionSpec]
    diagnostics: list[Diagnostic]
    analysis: FileAnalysis


def check_source(source: SourceFile, settings: Settings) -> SourceCheck:
    """Check one file on its own (stdin, an editor's buffer); raises :class:`SourceError`.

    The file is compiled in full, as a file named on the command line is.  Its
    Functions are recognised from the file alone and ``extra-function-bases``.
    It runs under the same deep-code guard as every file of a run
    (:func:`~autograd_lint.model.guard.run_guarded`): every entry point that
    checks one text (stdin, the language server) calls this.
    """

    def check() -> SourceCheck:
        with fewer_collections():
            analysis = analyze(source, {}, settings, module_needs(settings), compile_whole=True)
            return SourceCheck(analysis.functions, check_analysis(analysis, settings), analysis)

    return run_guarded(source.path, "checking the file", check)


def _without_noqa(diagnostics: Sequence[Diagnostic], lines: Sequence[str]) -> list[Diagnostic]:
    whole_file = noqa.file_noqa(lines)
    kept = []
    for diagnostic in diagnostics:
        line = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
        if not whole_file.silences(diagnostic.code) and not noqa.is_silenced(line, diagnostic.code):
            kept.append(diagnostic)
    return kept
