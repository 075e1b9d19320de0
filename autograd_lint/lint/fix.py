"""Autofix: ``check --fix``, ``--unsafe-fixes`` and ``--diff``.

A fix belongs to its rule (:attr:`autograd_lint.rules.base.Rule.fixer`, with
:attr:`~autograd_lint.rules.base.Rule.fix` saying whether it is safe).  For each
file with a fixable finding, the fix pass parses the whole file with libcst, runs
the fixers of the rules that reported there one rule at a time (each sees the
diagnostics of the code as it is after the previous fixes, so that positions stay
true), adds and removes the imports they ask for, and checks that the result
parses with libcst and compiles.  It repeats until nothing changes, so that a
second ``--fix`` is a no-op.  A file is written only when it changed, atomically
(a temporary file in the same directory, then ``os.replace``), with its mode,
encoding, byte-order mark and line endings kept.  A file that does not parse is
never written.

Exit codes with ``--fix``: 0 when no finding remains, 1 when some remain, 2 when
a file could not be read, parsed or written.  With ``--diff``: 1 when a fix would
change a file, else 0 (2 on errors); nothing is written.
"""

from __future__ import annotations

import difflib
import functools
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Mapping, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper

from autograd_lint.model.analysis import FileAnalysis, analyze, python_rejects
from autograd_lint.model.discovery import Run
from autograd_lint.model.cst_parse import parse_module
from autograd_lint.model.guard import describe, run_guarded
from autograd_lint.model.positions import positions
from autograd_lint.lint.fix_in_place import UNDECIDED, fix_in_place
from autograd_lint.lint.engine import check_analysis, every_finding, module_needs, selected_rules
from autograd_lint.files import Refused, write_atomically
from autograd_lint.rules import rule_by_code
from autograd_lint.rules.base import Diagnostic, FixSafety, Rule
from autograd_lint.settings import Settings
from autograd_lint.model.source import (
    SourceError,
    SourceFile,
    decode_source,
    encode_source,
    module_name,
    read_source_bytes,
    source_encoding,
    split_lines,
    with_line_ends_of,
)
from autograd_lint.model.spec import FunctionSpec

if TYPE_CHECKING:
    from libcst.codemod import Codemod

# Fixes of one rule can expose another's finding; a fixed point comes long before this.
_MAX_ROUNDS = 10


@dataclass
class FileFix:
    """One file before and after its fixes, and what remains to report there."""

    path: str
    original: str
    text: str
    remaining: list[Diagnostic]
    fixed_codes: Counter[str] = field(default_factory=Counter)  # findings the fixes removed, per rule
    errors: list[SourceError] = field(default_factory=list)  # fixes not applied, with the reason

    @property
    def changed(self) -> bool:
        return self.text != self.original

    @property
    def fixed(self) -> int:
        return sum(self.fixed_codes.values())


def fixable_rules(settings: Settings, path: str, unsafe: bool) -> list[Rule]:
    """The selected rules with a fix that may be applied (safe ones; unsafe ones too if asked)."""
    allowed = {FixSafety.SAFE, FixSafety.UNSAFE} if unsafe else {FixSafety.SAFE}
    return [rule for rule in selected_rules(settings, path) if rule.fixer is not None and rule.fix in allowed]


def parse_checked(text: str, path: str) -> cst.Module | str:
    """``text`` parsed by libcst, or why it must not be written (it does not parse or compile).

    The fix pass keeps the module it returns for the next fixer, so that each text
    is parsed once (see :mod:`autograd_lint.model.cst_parse`).
    """
    problem = python_rejects(text, path)  # first: libcst's parser is not safe on any depth
    if problem is not None:
        return problem[0]
    try:
        module = parse_module(text)
        compile(text, path, "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError) as error:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    return module


def verify(text: str, path: str) -> str | None:
    """Why ``text`` must not be written (it does not parse or compile), or None."""
    checked = parse_checked(text, path)
    return checked if isinstance(checked, str) else None


def fix_source(
    source: SourceFile, known: Mapping[str, FunctionSpec], settings: Settings, unsafe: bool
) -> FileFix:
    """Apply every allowed fix to ``source``, to a fixed point; raises :class:`SourceError`.

    Runs under the deep-code guard, as every entry point (see :func:`autograd_lint.lint.engine.check_source`).
    """
    return run_guarded(source.path, "fixing", lambda: _fix_source(source, known, settings, unsafe))


def _fix_source(
    source: SourceFile, known: Mapping[str, FunctionSpec], settings: Settings, unsafe: bool
) -> FileFix:
    analysis = analyze(source, known, settings, module_needs(settings))
    diagnostics = check_analysis(analysis, settings)
    result = FileFix(source.path, source.text, source.text, diagnostics)
    rules = fixable_rules(settings, source.path, unsafe)
    if not rules:
        return result
    module = parse_checked(source.text, source.path)
    if isinstance(module, str):
        if any(rule.code == d.code for rule in rules for d in diagnostics):
            # The analysis read it past libcst's limits (model.cst_parse); a fix can't be written from that.
            result.errors.append(SourceError(source.path, f"not fixed: libcst cannot parse it ({module})"))
        return result
    if module.code != source.text:
        # libcst drops a form feed that precedes code on its line: fixing would change other lines.
        result.errors.append(SourceError(source.path, "libcst does not reproduce this file exactly; not fixed"))
        return result
    before = Counter(d.code for d in diagnostics)
    failed: set[str] = set()  # rules whose fix went wrong in this file: not tried again
    for _ in range(_MAX_ROUNDS):
        changed = False
        for rule in rules:
            mine = [d for d in diagnostics if d.code == rule.code]
            if not mine or rule.code in failed:
                continue
            try:
                text = _apply(rule, analysis, module, mine, settings)
            except Exception as error:  # a bug in one fix must not stop the others, nor the file's check
                failed.add(rule.code)
                result.errors.append(SourceError(source.path, describe(error, f"fixing {rule.code}")))
                continue
            if text == analysis.source.text:
                continue
            checked = parse_checked(text, source.path)
            if isinstance(checked, str):
                failed.add(rule.code)
                result.errors.append(
                    SourceError(source.path, f"the {rule.code} fix gave code that does not parse ({checked})")
                )
                continue
            module = checked
            analysis = analyze(SourceFile(source.path, text, source.module), known, settings, module_needs(settings))
            diagnostics = check_analysis(analysis, settings)
            changed = True
        if not changed:
            break
    after = Counter(d.code for d in diagnostics)
    result.text = analysis.source.text
    result.remaining = diagnostics
    result.fixed_codes = Counter({code: count - after[code] for code, count in before.items() if count > after[code]})
    return result


def _apply(
    rule: Rule, analysis: FileAnalysis, module: cst.Module, diagnostics: Sequence[Diagnostic], settings: Settings
) -> str:
    """The text of ``analysis``'s file, parsed as ``module``, after ``rule``'s fixer and the imports it asks for."""
    # libcst.codemod takes about a second to import; only --fix pays for it.
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

    assert rule.fixer is not None
    fixer = rule.fixer(analysis, diagnostics)
    if rule.reads_findings:
        fixer.findings = functools.partial(every_finding, analysis, settings, but=rule.code)
    unit = analysis.whole_module
    # The analysis parsed this very text whole (libcst's parse is cached by text): its positions are the module's.
    fixer.table = unit.ranges if unit is not None and unit.module is module else positions(module)
    module = module.visit(fixer)
    context = CodemodContext(filename=analysis.source.path, full_module_name=analysis.source.module)
    for ref in fixer.unused_imports:
        RemoveImportsVisitor.remove_unused_import(context, ref.module, ref.obj, ref.asname)
    for ref in fixer.needed_imports:
        AddImportsVisitor.add_needed_import(context, ref.module, ref.obj, ref.asname)
    if fixer.unused_imports:
        module = transform_once(RemoveImportsVisitor(context), module)
    if fixer.needed_imports:
        module = transform_once(AddImportsVisitor(context), module)
    return module.code


def transform_once(codemod: Codemod, module: cst.Module) -> cst.Module:
    """``codemod.transform_module(module)`` (one pass), without its deep copy of the module.

    ``transform_module`` wraps the module in a ``MetadataWrapper`` that first copies
    every node (a tenth of a fix's time on a large file).  No copy is needed: a parsed
    module shares no node between two places, and a transform leaves it unchanged.
    """
    assert not codemod.should_allow_multiple_passes()
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    with codemod.resolve(wrapper):
        codemod.context = replace(codemod.context, wrapper=wrapper)
        return codemod.transform_module_impl(wrapper.module)


def read_for_rewrite(path: str) -> tuple[bytes, str, str]:
    """The bytes of ``path``, their encoding (``utf-8-sig`` when there is a BOM) and the text."""
    data = read_source_bytes(path)
    text = decode_source(data, path, for_rewrite=True)
    return data, source_encoding(data), text


def rewrite(path: str, data: bytes, encoding: str, text: str) -> None:
    """Replace ``path``, read as ``data``, by ``text`` in ``encoding``, atomically.

    Every command that edits the user's source (``--fix``, ``--add-noqa``) writes
    through here: the file is left alone when it changed since it was read.
    Raises :class:`SourceError`.
    """
    try:
        new = encode_source(text, encoding)
    except UnicodeEncodeError as error:
        raise SourceError(path, f"cannot be written: {error}") from None
    try:
        write_atomically(path, new, replacing=data)
    except Refused as error:
        raise SourceError(path, error.reason) from None
    except OSError as error:
        raise SourceError(path, f"cannot be written: {error.strerror or error}") from None


def fix_file(path: str, known: Mapping[str, FunctionSpec], settings: Settings, unsafe: bool, write: bool) -> FileFix:
    """Fix one file on disk (written only when ``write``); raises :class:`SourceError`."""
    data, encoding, text = read_for_rewrite(path)
    result = fix_source(SourceFile(path, text, module_name(path)), known, settings, unsafe)
    if write and result.changed:
        rewrite(path, data, encoding, with_line_ends_of(text, result.text, path))
    return result


def fix_diagnostic(
    source: SourceFile, settings: Settings, diagnostic: Diagnostic, analysis: FileAnalysis | None = None
) -> str | None:
    """``source`` with the one finding ``diagnostic`` fixed (safe or unsafe), or None when it can't be.

    What an editor's quick fix applies: the finding's own rule, at its own place,
    and a result that parses and compiles.  ``analysis`` is the analysis of
    ``source`` the finding came from, when the caller kept it (else it is made again).
    """
    rule = rule_by_code(diagnostic.code)
    if rule is None or rule.fixer is None:
        return None

    def fix() -> str | None:
        current = analysis
        if current is not None and current.source.text == source.text:
            # The fix on the statement that holds the finding, where that gives the whole module's fix.
            local = fix_in_place(rule, current, source, diagnostic, settings)
            if local is not UNDECIDED:
                return local  # type: ignore[return-value]
        module = parse_checked(source.text, source.path)
        if isinstance(module, str) or module.code != source.text:
            # libcst drops a form feed that precedes code on its line: the fix would change other lines.
            return None
        if current is None or current.source.text != source.text:
            current = analyze(source, {}, settings, module_needs(settings))
        text = _apply(rule(), current, module, [diagnostic], settings)
        if text == source.text or verify(text, source.path) is not None:
            return None
        return text

    # Under the deep-code guard, as every entry point (see engine.check_source).
    return run_guarded(source.path, f"fixing {diagnostic.code}", fix)


def unified_diff(result: FileFix) -> str:
    lines = difflib.unified_diff(
        split_lines(result.original),
        split_lines(result.text),
        fromfile=result.path,
        tofile=result.path,
    )
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


@dataclass
class FixRun:
    """A fix pass over a run: the findings that remain, what went wrong, and each file's fixes."""

    diagnostics: list[Diagnostic]
    errors: list[SourceError]
    fixes: list[FileFix]

    @property
    def fixed(self) -> int:
        return sum(f.fixed for f in self.fixes)


def fix_run(result: Run[list[Diagnostic]], settings: Settings, unsafe: bool, write: bool) -> FixRun:
    """Fix every file of ``result`` with a fixable finding (written only when ``write``)."""
    known = {f.full_name: f for f in result.functions}
    codes = {rule.code for rule in selected_rules(settings) if rule.fixer is not None}
    run = FixRun([], list(result.errors), [])
    for file_result in result.results:
        found = file_result.result or []
        if not any(d.code in codes for d in found):
            run.diagnostics.extend(found)
            continue
        try:
            path = file_result.path
            fixed = run_guarded(path, "fixing", lambda: fix_file(path, known, settings, unsafe, write=write))
        except SourceError as error:
            run.errors.append(error)
            run.diagnostics.extend(found)
            continue
        run.fixes.append(fixed)
        run.diagnostics.extend(fixed.remaining)
        run.errors.extend(fixed.errors)
    run.diagnostics.sort(key=lambda d: d.sort_key())
    return run


def fix_summary(run: FixRun, verb: str) -> str:
    """``Fixed 3 problems (1 remaining).``, with ``verb`` ("Fixed", "Would fix")."""
    return f"{verb} {run.fixed} problem{'s' if run.fixed != 1 else ''} ({len(run.diagnostics)} remaining)."


def show_fixes(run: FixRun) -> str:
    """What ``--show-fixes`` prints after ``--fix``: per file, how many findings of each rule were fixed."""
    lines = []
    for fix in sorted(run.fixes, key=lambda f: f.path):
        if not fix.fixed_codes:
            continue
        lines.append(f"{fix.path}:")
        for code, count in sorted(fix.fixed_codes.items()):
            rule = rule_by_code(code)
            lines.append(f"    {count} \u00d7 {code} ({rule.title if rule else code})")
    if not lines:
        return "No problems were fixed.\n"
    return f"Fixed {run.fixed} problem{'s' if run.fixed != 1 else ''}:\n" + "\n".join(lines) + "\n"
