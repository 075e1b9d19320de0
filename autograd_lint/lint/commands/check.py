"""``autograd-lint check``: lint the autograd.Function subclasses under some paths.

Settings come from ``[tool.autograd-lint]`` (see :mod:`autograd_lint.config`),
then the command line: ``--select`` replaces the configured ``select``;
``--extend-select``, ``--ignore`` and ``--exclude`` add to what is configured.

Exit codes: 0 when nothing is found, 1 when there are findings, 2 on a usage
error, a bad configuration or baseline, or when a file could not be read or
parsed (that file is named with the reason on stderr, one line each, and every
other file is still checked).

With ``--fix`` or ``--diff``, see :mod:`autograd_lint.lint.fix` for what is written and
the exit codes; ``--add-noqa`` (:mod:`autograd_lint.lint.add_noqa`) and
``--write-baseline`` (:mod:`autograd_lint.lint.baseline`) exit 0 unless a file could
not be read or written.  Nothing is written without one of ``--fix``,
``--add-noqa`` or ``--write-baseline``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from autograd_lint.lint.baseline import BaselineError, Fingerprint, compare, read_baseline, relative_key, root_of, write_baseline
from autograd_lint.config import KEYS, ConfigError, add_config_arguments, find_config, project_settings, selectors
from autograd_lint.lint.engine import check_analysis, check_source, module_needs, selected_rules
from autograd_lint.model.discovery import iter_targets
from autograd_lint.model.discovery import run as run_files
from autograd_lint.model.source import (
    SourceError,
    SourceFile,
    decode_source,
    encode_source,
    module_name,
    read_source,
    source_encoding,
    split_lines,
    with_line_ends_of,
)
from autograd_lint.lint.output import (
    FORMATS,
    CheckOutcome,
    render_statistics_json,
    render_statistics_text,
    statistics,
)
from autograd_lint.rules.base import Diagnostic, FixSafety
from autograd_lint.settings import Settings

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
STDIN = "-"


def _codes(value: str) -> tuple[str, ...]:
    # Checked by settings_from_args, so that a bad code is one line (argparse adds its usage).
    return tuple(code.strip() for code in value.split(",") if code.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or directories (default: .); - reads one file from stdin"
    )
    parser.add_argument(
        "--select", type=_codes, help="rule codes or prefixes to enable, instead of the configured select (default: AGL)"
    )
    parser.add_argument("--extend-select", type=_codes, default=(), help="codes to enable on top of select")
    parser.add_argument(
        "--ignore", type=_codes, default=(), help="rule codes or prefixes to disable, on top of the configured ignore"
    )
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip paths matching GLOB (repeatable)")
    parser.add_argument("--output-format", choices=sorted(FORMATS), default="text", help="how to print findings")
    parser.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    parser.add_argument("--fix", action="store_true", help="apply safe fixes, then report what remains")
    parser.add_argument(
        "--unsafe-fixes", action="store_true", help="with --fix or --diff, also apply fixes that change behaviour"
    )
    parser.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    parser.add_argument("--show-fixes", action="store_true", help="after --fix, list what was fixed per file and rule")
    parser.add_argument("--statistics", action="store_true", help="print a count per rule instead of each finding")
    parser.add_argument(
        "--add-noqa",
        nargs="?",
        const="",
        metavar="REASON",
        help="add '# noqa: CODE' to every line with a finding (--add-noqa=REASON appends '  # REASON')",
    )
    parser.add_argument("--baseline", metavar="FILE", help="report only findings that FILE does not hold")
    parser.add_argument("--write-baseline", metavar="FILE", help="write every current finding to FILE; report nothing")
    parser.add_argument(
        "--stdin-filename", metavar="PATH", help="with -, the path the source read from stdin stands for"
    )
    parser.add_argument(
        "--show-settings", action="store_true", help="print the resolved settings and the files to check; check nothing"
    )
    add_config_arguments(parser)


def _reads_stdin(args: argparse.Namespace) -> bool:
    return args.paths == [STDIN]


def _paths(args: argparse.Namespace) -> list[str]:
    """Where to look for the configuration and files: the paths, the stdin file's path, or ``.``."""
    if _reads_stdin(args):
        return [args.stdin_filename] if args.stdin_filename else ["."]
    return args.paths or ["."]


def usage_problem(args: argparse.Namespace) -> str | None:
    """Why these options do not go together, or None."""
    if STDIN in args.paths and len(args.paths) > 1:
        return "- (stdin) cannot be combined with other paths"
    if args.stdin_filename and not _reads_stdin(args):
        return "--stdin-filename needs - as the only path"
    if args.add_noqa is not None and (args.diff or _reads_stdin(args)):
        return "--add-noqa writes files: it cannot be combined with --diff or -"
    if args.add_noqa and ("\n" in args.add_noqa or "\r" in args.add_noqa):
        return "--add-noqa: the reason must be one line"
    if args.write_baseline and args.diff:
        return "--write-baseline cannot be combined with --diff"
    if args.write_baseline and args.add_noqa is not None:
        return "--write-baseline and --add-noqa both accept today's findings: choose one"
    if args.show_fixes and not args.fix:
        return "--show-fixes lists what --fix fixed: give --fix too"
    return None


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The configured settings with the command line's on top; raises :class:`ConfigError`."""
    select = selectors(args.select, "--select") if args.select else None
    extend_select = selectors(args.extend_select, "--extend-select")
    ignore = selectors(args.ignore, "--ignore")
    configured = project_settings(_paths(args), args.config, args.isolated)
    return replace(
        configured,
        select=select or configured.select,
        extend_select=configured.extend_select + extend_select,
        ignore=configured.ignore + ignore,
        extend_exclude=configured.extend_exclude + tuple(args.exclude),
        jobs=args.jobs,
    )


@dataclass
class Findings:
    """What the check found, before a baseline: findings, unreadable files, and the stdin buffer if one was read."""

    diagnostics: list[Diagnostic]
    errors: list[SourceError]
    files_checked: int
    functions_found: int
    stdin: SourceFile | None = None

    def lines_of(self, path: str) -> Sequence[str]:
        if self.stdin is not None and path == self.stdin.path:
            return [line.rstrip("\r\n") for line in split_lines(self.stdin.text)]
        return _file_lines(path)


# Cached: a baseline asks for a file's lines once per finding in it.
@functools.lru_cache(maxsize=None)
def _file_lines(path: str) -> tuple[str, ...]:
    try:
        return tuple(line.rstrip("\r\n") for line in split_lines(read_source(path).text))
    except SourceError:
        return ()


def run(args: argparse.Namespace) -> int:
    problem = usage_problem(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    try:
        settings = settings_from_args(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    if args.show_settings:
        sys.stdout.write(show_settings(args, settings))
        return EXIT_CLEAN
    try:
        baseline = read_baseline(args.baseline) if args.baseline else None
    except BaselineError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    if _reads_stdin(args):
        return _check_stdin(args, settings, baseline)
    result = run_files(_paths(args), settings, check_analysis, module_needs(settings))
    fixes = None
    if args.fix or args.diff:
        # Imported here: the fix pass loads libcst.codemod, which a plain check does not need.
        from autograd_lint.lint.fix import fix_run, fix_summary, unified_diff

        fixes = fix_run(result, settings, args.unsafe_fixes, write=not args.diff)
        if args.diff:
            for error in fixes.errors:
                print(f"error: {error}", file=sys.stderr)
            sys.stdout.write("".join(unified_diff(f) for f in fixes.fixes if f.changed))
            print(fix_summary(fixes, "Would fix"), file=sys.stderr)
            changed = any(f.changed for f in fixes.fixes)
            return EXIT_ERROR if fixes.errors else EXIT_FINDINGS if changed and not args.exit_zero else EXIT_CLEAN
        diagnostics, errors = fixes.diagnostics, fixes.errors
    else:
        diagnostics = sorted((d for r in result.results for d in r.result or ()), key=Diagnostic.sort_key)
        errors = list(result.errors)
    findings = Findings(diagnostics, errors, result.files_seen, len(result.functions))
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    code = _report(args, settings, findings, baseline)
    if fixes is not None:
        from autograd_lint.lint.fix import fix_summary, show_fixes

        # Machine-readable formats keep stdout to themselves.
        summary = sys.stdout if args.output_format == "text" and not args.statistics else sys.stderr
        print(fix_summary(fixes, "Fixed"), file=summary)
        if args.show_fixes:
            summary.write(show_fixes(fixes))
    return code


def _check_stdin(args: argparse.Namespace, settings: Settings, baseline: Counter[Fingerprint] | None) -> int:
    """Check (or fix, printing the fixed source) the one file read from stdin."""
    path = args.stdin_filename or STDIN
    data = sys.stdin.buffer.read()
    try:
        # The text --fix writes back must be the buffer's own: refuse what decoding would change.
        text = decode_source(data, path, for_rewrite=args.fix)
        source = SourceFile(path, text, module_name(path))
        checked = check_source(source, settings)
        if args.fix or args.diff:
            from autograd_lint.lint.fix import fix_source

            fixed = fix_source(source, {}, settings, args.unsafe_fixes)
            # The buffer's own encoding (cookie, BOM) and line ends, byte for byte.
            output = encode_source(with_line_ends_of(text, fixed.text, path), source_encoding(data))
    except (SourceError, UnicodeEncodeError) as error:
        if isinstance(error, UnicodeEncodeError):
            error = SourceError(path, f"the fixed text cannot be written in the buffer's encoding ({error.reason})")
        if args.fix:
            sys.stdout.buffer.write(data)  # an editor replaces the buffer by stdout: give it back unchanged
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    if args.fix or args.diff:
        from autograd_lint.lint.fix import FixRun, fix_summary, show_fixes, unified_diff

        fixes = FixRun(fixed.remaining, fixed.errors, [fixed])
        for error in fixed.errors:
            print(f"error: {error}", file=sys.stderr)
        # As ruff does: the fixed source goes to stdout (the diff with --diff), the rest to stderr.
        if args.diff:
            sys.stdout.write(unified_diff(fixed))
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
        if not args.diff:
            remaining = CheckOutcome(fixed.remaining, fixed.errors, 1, len(checked.functions))
            sys.stderr.write(FORMATS["text"](remaining))
        print(fix_summary(fixes, "Would fix" if args.diff else "Fixed"), file=sys.stderr)
        if args.show_fixes:
            sys.stderr.write(show_fixes(fixes))
        if fixed.errors:
            return EXIT_ERROR
        if args.diff:
            return EXIT_FINDINGS if fixed.changed and not args.exit_zero else EXIT_CLEAN
        return EXIT_FINDINGS if fixed.remaining and not args.exit_zero else EXIT_CLEAN
    findings = Findings(checked.diagnostics, [], 1, len(checked.functions), stdin=source)
    return _report(args, settings, findings, baseline)


def _report(
    args: argparse.Namespace, settings: Settings, findings: Findings, baseline: Counter[Fingerprint] | None
) -> int:
    """Write the baseline, add noqa comments, or print the findings not in the baseline; give the exit code."""
    if args.write_baseline:
        return _write_baseline(args.write_baseline, findings)
    diagnostics = findings.diagnostics
    if baseline is not None:
        diagnostics = _not_in_baseline(args, settings, findings, baseline)
    if args.add_noqa is not None:
        return _add_noqa(diagnostics, args.add_noqa or None, failed=bool(findings.errors))
    if args.statistics:
        rows = statistics(diagnostics, _fixable_codes(settings, args.unsafe_fixes))
        render = render_statistics_json if args.output_format == "json" else render_statistics_text
        sys.stdout.write(render(rows))
    else:
        outcome = CheckOutcome(diagnostics, findings.errors, findings.files_checked, findings.functions_found)
        sys.stdout.write(FORMATS[args.output_format](outcome))
    if findings.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if diagnostics and not args.exit_zero else EXIT_CLEAN


def _write_baseline(path: str, findings: Findings) -> int:
    try:
        count = write_baseline(path, findings.diagnostics, findings.lines_of)
    except OSError as error:
        print(f"error: {path}: cannot be written ({error.strerror or error})", file=sys.stderr)
        return EXIT_ERROR
    print(f"Wrote {count} finding{'s' if count != 1 else ''} to {path}.", file=sys.stderr)
    return EXIT_ERROR if findings.errors else EXIT_CLEAN


def _not_in_baseline(
    args: argparse.Namespace, settings: Settings, findings: Findings, baseline: Counter[Fingerprint]
) -> list[Diagnostic]:
    """The findings the baseline does not hold; its stale entries are named on stderr."""
    root = root_of(args.baseline)
    checked = _checked_keys(args, settings, findings, root)
    comparison = compare(findings.diagnostics, baseline, findings.lines_of, root, checked)
    for entry in comparison.stale:
        print(
            f"warning: {args.baseline}: stale entry (no such finding any more): "
            f"{entry.path}: {entry.code} in {entry.scope}: {entry.snippet}",
            file=sys.stderr,
        )
    if comparison.stale:
        print(f"Write the baseline again with --write-baseline {args.baseline} to drop them.", file=sys.stderr)
    return comparison.new


def _checked_keys(args: argparse.Namespace, settings: Settings, findings: Findings, root: Path) -> set[str]:
    """The files this run read in full, as baseline keys: only their entries can be found stale."""
    if findings.stdin is not None:
        return {relative_key(findings.stdin.path, root)}
    failed = {error.path for error in findings.errors}
    return {
        relative_key(target.path, root)
        for target in iter_targets(_paths(args), settings)
        if not isinstance(target, SourceError) and target.path not in failed
    }


def _fixable_codes(settings: Settings, unsafe: bool) -> set[str]:
    allowed = {FixSafety.SAFE, FixSafety.UNSAFE} if unsafe else {FixSafety.SAFE}
    return {rule.code for rule in selected_rules(settings) if rule.fixer is not None and rule.fix in allowed}


def _add_noqa(diagnostics: Sequence[Diagnostic], reason: str | None, failed: bool) -> int:
    from autograd_lint.lint.add_noqa import add_noqa_to_file

    by_file: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        by_file.setdefault(diagnostic.path, []).append(diagnostic)
    added = 0
    for path, diagnostics in sorted(by_file.items()):
        try:
            edit = add_noqa_to_file(path, diagnostics, reason)
        except SourceError as error:
            print(f"error: {error}", file=sys.stderr)
            failed = True
            continue
        added += edit.added
        for line in edit.skipped:
            print(f"warning: {path}:{line}: the line ends inside a string or with a backslash; no noqa added", file=sys.stderr)
    print(f"Added noqa comments to {added} line{'s' if added != 1 else ''}.", file=sys.stderr)
    return EXIT_ERROR if failed else EXIT_CLEAN


def _toml_value(key: str, value: object) -> object:
    """The setting of configuration key ``key`` as the configuration spells it."""
    if key == "per-file-ignores" and isinstance(value, tuple):
        return {glob: list(codes) for glob, codes in value}
    if isinstance(value, frozenset):
        return sorted(value)
    return list(value) if isinstance(value, tuple) else value


def _toml(value: object) -> str:
    """``value`` written as TOML (JSON's strings and arrays are TOML's; inline tables use ``=``)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(key)} = {_toml(item)}" for key, item in value.items()) + "}"
    return json.dumps(value)


def show_settings(args: argparse.Namespace, settings: Settings) -> str:
    """The configuration file used, every setting, the rules that run, and the files that would be checked."""
    if args.isolated:
        source = "none (--isolated): defaults"
    else:
        found = args.config or find_config(_paths(args))
        source = str(found) if found else "none found: defaults"
    shown = {key: _toml_value(key, getattr(settings, field)) for key, (field, _) in KEYS.items()}
    rules = [rule.code for rule in selected_rules(settings)]
    targets = [] if _reads_stdin(args) else iter_targets(_paths(args), settings)
    files = [target.path for target in targets if not isinstance(target, SourceError)]
    if args.output_format == "json":
        document = {"configuration": source, "settings": shown, "rules": rules, "files": files}
        return json.dumps(document, indent=2) + "\n"
    lines = [f"Configuration: {source}", "", "[tool.autograd-lint]"]
    lines += [f"{key} = {_toml(value)}" for key, value in shown.items()]
    lines += ["", f"Rules that run ({len(rules)}): {', '.join(rules)}", "", f"Files to check ({len(files)}):"]
    lines += [f"  {os.path.normpath(path)}" for path in files]
    return "\n".join(lines) + "\n"
