"""``autograd-lint check``: lint the autograd.Function subclasses under some paths.

Settings come from ``[tool.autograd-lint]`` (see :mod:`autograd_lint.config`),
then the command line: ``--select`` replaces the configured ``select``;
``--extend-select``, ``--ignore`` and ``--exclude`` add to what is configured.

Exit codes: 0 when nothing is found, 1 when there are findings, 2 on a usage
error, a bad configuration or baseline, or when a file could not be read or
parsed (that file is named with the reason on stderr, one line each, and every
other file is still checked), or when ``--output-file`` cannot be written.
``--exit-non-zero-on-fix`` makes a ``--fix`` that changed a file exit 1.

With ``--fix`` or ``--diff``, see :mod:`autograd_lint.lint.fix` for what is written and
the exit codes; ``--add-noqa`` (:mod:`autograd_lint.lint.add_noqa`) and
``--write-baseline`` (:mod:`autograd_lint.lint.baseline`) exit 0 unless a file could
not be read or written.  No file of the project is written without one of ``--fix``,
``--add-noqa`` or ``--write-baseline``; the result cache
(:mod:`autograd_lint.model.result_cache`) is, in ``.autograd_lint_cache/`` of the
project's directory or the ``cache-dir`` setting, unless ``--no-cache``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence, TextIO

from autograd_lint.config import (
    CONFIG_FILE,
    KEYS,
    ConfigError,
    add_config_arguments,
    extended_files,
    find_config,
    project_settings,
    selectors,
)
from autograd_lint.files import write_atomically
from autograd_lint.model.result_cache import RunInputs, RunRecord, fingerprint, job_context, record_run, replay_run
from autograd_lint.model.targets import Target, force_excluded, iter_targets
from autograd_lint.model.source import (
    SourceError,
    SourceFile,
    decode_source,
    encode_source,
    module_name,
    source_encoding,
    split_lines,
    with_line_ends_of,
)
from autograd_lint.lint.output import (
    FORMATS,
    TEXT_FORMATS,
    CheckOutcome,
    file_lines,
    render_statistics_json,
    render_statistics_text,
    statistics,
)
from autograd_lint.model.diagnostic import Diagnostic, FixSafety
from autograd_lint.settings import Settings

if TYPE_CHECKING:
    from autograd_lint.lint.baseline import Fingerprint
    from autograd_lint.model.analysis import FileAnalysis, ModuleNeed
    from autograd_lint.model.result_cache import ResultCache

# Discovery (the analysis rounds) and the baseline are imported where they are used: a
# run whose report is replayed from the cache needs neither (see _check_files).

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
    parser.add_argument(
        "--output-file", "-o", metavar="FILE", help="write the report to FILE instead of stdout (atomically)"
    )
    parser.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    parser.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="with --fix, exit 1 when a file was changed, even if no finding remains",
    )
    parser.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply the excludes to paths named on the command line too (as pre-commit names them)",
    )
    parser.add_argument(
        "--quiet", "-q", action="count", default=0, help="print the findings, nothing else (-qq: as --silent)"
    )
    parser.add_argument(
        "--silent", "-s", action="store_const", const=2, dest="quiet", help="print nothing; only the exit code tells"
    )
    parser.add_argument(
        "--watch", "-w", action="store_true", help="check again whenever a checked file or the configuration changes"
    )
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
    parser.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the result cache (.autograd_lint_cache/)"
    )
    add_config_arguments(parser)


def _reads_stdin(args: argparse.Namespace) -> bool:
    return args.paths == [STDIN]


def _paths(args: argparse.Namespace) -> list[str]:
    """Where to look for the configuration and files: the paths, the stdin file's path, or ``.``."""
    if _reads_stdin(args):
        return [args.stdin_filename] if args.stdin_filename else ["."]
    return args.paths or ["."]


def _project_root(args: argparse.Namespace) -> Path:
    """The directory of the configuration file in use, else the working directory."""
    found = None if args.isolated else args.config or find_config(_paths(args))
    return Path(os.path.abspath(found.parent if found else os.getcwd()))


def _cache_dir(args: argparse.Namespace, settings: Settings) -> str:
    """Where the result cache lives: ``cache-dir``, else ``.autograd_lint_cache`` in the project's directory."""
    from autograd_lint.model.result_cache import DIRECTORY

    return settings.cache_dir or str(_project_root(args) / DIRECTORY)


def _checked_paths(args: argparse.Namespace, settings: Settings) -> list[str]:
    """The paths to check: with ``--force-exclude``, those that the excludes do not match."""
    paths = _paths(args)
    if not args.force_exclude:
        return paths
    root = _project_root(args)
    return [path for path in paths if not force_excluded(path, settings, root)]


def _silent(args: argparse.Namespace) -> bool:
    return args.quiet >= 2


def _note(args: argparse.Namespace, message: str) -> None:
    """A message for people that is not a finding nor an error: left out under ``-q``."""
    if not args.quiet:
        print(message, file=sys.stderr)


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
    if args.exit_non_zero_on_fix and not args.fix:
        return "--exit-non-zero-on-fix is about what --fix changed: give --fix too"
    if args.watch and (_reads_stdin(args) or args.add_noqa is not None or args.write_baseline):
        return "--watch checks files again as they change: it cannot be combined with -, --add-noqa or --write-baseline"
    if args.output_file and os.path.splitext(args.output_file)[1] in _SOURCE_SUFFIXES and os.path.exists(args.output_file):
        # A slip of the shell (`-o ops.py`) must not replace a source file with a report.
        return f"--output-file {args.output_file}: an existing Python source file is never replaced by a report"
    return None


_SOURCE_SUFFIXES = frozenset({".py", ".pyi"})


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
        return file_lines(path)


def run(args: argparse.Namespace) -> int:
    problem = usage_problem(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    if args.watch:
        from autograd_lint.lint.watch import watch

        return watch(args, check_once, lambda: _watched_files(args))
    return check_once(args)


@contextlib.contextmanager
def _stderr_unless_silent(args: argparse.Namespace) -> Iterator[None]:
    if not _silent(args):
        yield
        return
    with contextlib.redirect_stderr(io.StringIO()):
        yield


def check_once(args: argparse.Namespace) -> int:
    """One check with these arguments; the report goes to stdout, or to ``--output-file`` at the end."""
    file_lines.cache_clear()  # --watch runs this again after files changed
    with _stderr_unless_silent(args):
        try:
            settings = settings_from_args(args)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_ERROR
        if args.show_settings:
            sys.stdout.write(show_settings(args, settings))
            return EXIT_CLEAN
        baseline = None
        if args.baseline:
            from autograd_lint.lint.baseline import BaselineError, read_baseline

            try:
                baseline = read_baseline(args.baseline)
            except BaselineError as error:
                print(f"error: {error}", file=sys.stderr)
                return EXIT_ERROR
        report = io.StringIO() if args.output_file or _silent(args) else sys.stdout
        if _reads_stdin(args):
            code = _check_stdin(args, settings, baseline, report)
        else:
            code = _check_files(args, settings, baseline, report)
        if args.output_file and not _silent(args):
            try:
                write_atomically(args.output_file, report.getvalue().encode("utf-8"))
            except OSError as error:
                print(f"error: {args.output_file}: cannot be written ({error.strerror or error})", file=sys.stderr)
                return EXIT_ERROR
        sys.stdout.flush()
        return code


def _check_files(
    args: argparse.Namespace, settings: Settings, baseline: Counter[Fingerprint] | None, report: TextIO
) -> int:
    paths = _checked_paths(args, settings)
    walked: list[Target | SourceError] | None = None
    run_key: bytes | None = None
    if _replayable(args, baseline):
        walked = list(iter_targets(paths, settings))
        files = [(t.path, t.info) for t in walked if isinstance(t, Target)]
        if len(files) == len(walked):  # a directory that can't be listed is reported afresh
            run_key = _run_key(args, settings, [path for path, _ in files])
            replayed = replay_run(_cache_dir(args, settings), run_key, files)
            if replayed is not None:
                report.write(replayed.report)
                return replayed.code
    from autograd_lint.model.discovery import open_cache
    from autograd_lint.model.discovery import run as run_files

    cache = None if args.no_cache else open_cache(_cache_dir(args, settings), settings, _check_file, _needs)
    result = run_files(paths, settings, _check_file, _needs, cache, walked)
    if cache is not None:
        problem = cache.save()
        if problem is not None:
            _note(args, f"warning: {problem}; the next run is not faster")
    fixes = None
    if args.fix or args.diff:
        # Imported here: the fix pass loads libcst.codemod, which a plain check does not need.
        from autograd_lint.lint.fix import fix_run, fix_summary, unified_diff

        fixes = fix_run(result, settings, args.unsafe_fixes, write=not args.diff)
        if args.diff:
            for error in fixes.errors:
                print(f"error: {error}", file=sys.stderr)
            report.write("".join(unified_diff(f) for f in fixes.fixes if f.changed))
            _note(args, fix_summary(fixes, "Would fix"))
            changed = any(f.changed for f in fixes.fixes)
            return EXIT_ERROR if fixes.errors else EXIT_FINDINGS if changed and not args.exit_zero else EXIT_CLEAN
        diagnostics, errors = fixes.diagnostics, fixes.errors
    else:
        diagnostics = sorted((d for r in result.results for d in r.result or ()), key=Diagnostic.sort_key)
        errors = list(result.errors)
    findings = Findings(diagnostics, errors, result.files_seen, len(result.functions))
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if run_key is not None and cache is not None and not errors:
        inputs = _run_inputs(cache, walked or [])
        if inputs is not None:
            rendered = io.StringIO()
            code = _report(args, settings, findings, baseline, rendered)
            report.write(rendered.getvalue())
            problem = record_run(cache.directory, run_key, RunRecord(inputs, rendered.getvalue(), code))
            if problem is not None:
                _note(args, f"warning: {problem}; the next run is not faster")
            return code
    code = _report(args, settings, findings, baseline, report)
    if fixes is not None:
        from autograd_lint.lint.fix import fix_summary, show_fixes

        if not args.quiet:
            # Machine-readable formats keep their output to themselves.
            summary = report if args.output_format in TEXT_FORMATS and not args.statistics else sys.stderr
            print(fix_summary(fixes, "Fixed"), file=summary)
            if args.show_fixes:
                summary.write(show_fixes(fixes))
        if _fixed_on_request(args, any(f.changed for f in fixes.fixes)) and code == EXIT_CLEAN:
            code = EXIT_FINDINGS
    return code


def _replayable(args: argparse.Namespace, baseline: Counter[Fingerprint] | None) -> bool:
    """Whether this run's report may come from the record of an earlier run with the same
    inputs (:func:`~autograd_lint.model.result_cache.replay_run`): a run that only reports.
    A fix, noqa or baseline run writes files or reads a baseline, which no record covers."""
    return not (
        args.no_cache or args.fix or args.diff or args.add_noqa is not None or args.write_baseline or baseline is not None
    )


def _run_key(args: argparse.Namespace, settings: Settings, paths: list[str]) -> bytes:
    """What a run's report is a function of, besides the files' contents (which
    :func:`~autograd_lint.model.result_cache.replay_run` checks): the code and settings
    (the store's context), the options that shape the report, the working directory
    (imports resolve from it; reports name paths from it), and the ``__init__.py`` files
    that module names follow but the list of files does not show: the packages above
    each path given, and an excluded ``__init__.py`` of a directory with checked files."""
    listed = set(paths)
    unlisted = tuple(
        init
        for init in dict.fromkeys(os.path.join(os.path.dirname(path), "__init__.py") for path in paths)
        if init not in listed and os.path.isfile(init)
    )
    above = tuple(
        module_name(os.path.join(path if os.path.isdir(path) else os.path.dirname(path), "__init__.py"))
        for path in _paths(args)
    )
    options = (args.paths, args.output_format, args.statistics, args.quiet, args.exit_zero, args.unsafe_fixes)
    context = job_context(settings, _check_file, _needs)
    # The gitlab format's paths are relative to CI_PROJECT_DIR, the one variable a report reads.
    return fingerprint(context, os.getcwd(), os.environ.get("CI_PROJECT_DIR"), options, unlisted, above)


def _run_inputs(cache: ResultCache, walked: Sequence[Target | SourceError]) -> RunInputs | None:
    """What the run read of each file, in the walk's order, or None when it can't be said
    (a file read with two contents, or not read through the cache)."""
    if cache.inputs_changed:
        return None
    inputs = []
    for target in walked:
        seen = cache.inputs.get(target.path)
        if seen is None:
            return None
        inputs.append((target.path, *seen))
    return tuple(inputs)


def _check_file(analysis: FileAnalysis, settings: Settings) -> list[Diagnostic]:
    """The job of a run: :func:`~autograd_lint.lint.engine.check_analysis`, whose rules are
    imported when a file is analysed (a run served by the cache needs neither them nor libcst)."""
    if analysis.nothing_to_check:
        return []  # as check_analysis says, without importing the rule catalogue
    from autograd_lint.lint.engine import check_analysis

    return check_analysis(analysis, settings)


def _needs(settings: Settings) -> frozenset[ModuleNeed]:
    """What the selected rules look at outside the Function classes, imported as :func:`_check_file` is."""
    from autograd_lint.lint.engine import module_needs

    return module_needs(settings)


def _fixed_on_request(args: argparse.Namespace, changed: bool) -> bool:
    """Whether ``--exit-non-zero-on-fix`` turns this run's exit code to 1 (``--exit-zero`` wins, as in ruff)."""
    return args.exit_non_zero_on_fix and changed and not args.exit_zero


def _check_stdin(
    args: argparse.Namespace, settings: Settings, baseline: Counter[Fingerprint] | None, report: TextIO
) -> int:
    """Check (or fix, printing the fixed source) the one file read from stdin."""
    path = args.stdin_filename or STDIN
    if args.stdin_filename and not _checked_paths(args, settings):
        # --force-exclude and an excluded path: nothing is checked; a fix gives the source back as it came.
        if args.fix:
            sys.stdout.buffer.write(sys.stdin.buffer.read())
        return EXIT_CLEAN
    data = sys.stdin.buffer.read()
    try:
        # The text --fix writes back must be the buffer's own: refuse what decoding would change.
        text = decode_source(data, path, for_rewrite=args.fix)
        source = SourceFile(path, text, module_name(path))
        from autograd_lint.lint.engine import check_source

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
        # The fixed source is what an editor reads back: stdout, always, in the buffer's own bytes.
        if args.diff:
            report.write(unified_diff(fixed))
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
        if not args.diff:
            remaining = CheckOutcome(fixed.remaining, fixed.errors, 1, len(checked.functions), quiet=bool(args.quiet))
            sys.stderr.write(FORMATS["text"](remaining))
        _note(args, fix_summary(fixes, "Would fix" if args.diff else "Fixed"))
        if args.show_fixes and not args.quiet:
            sys.stderr.write(show_fixes(fixes))
        if fixed.errors:
            return EXIT_ERROR
        if args.diff:
            return EXIT_FINDINGS if fixed.changed and not args.exit_zero else EXIT_CLEAN
        if _fixed_on_request(args, fixed.changed):
            return EXIT_FINDINGS
        return EXIT_FINDINGS if fixed.remaining and not args.exit_zero else EXIT_CLEAN
    findings = Findings(checked.diagnostics, [], 1, len(checked.functions), stdin=source)
    return _report(args, settings, findings, baseline, report)


def _report(
    args: argparse.Namespace,
    settings: Settings,
    findings: Findings,
    baseline: Counter[Fingerprint] | None,
    report: TextIO,
) -> int:
    """Write the baseline, add noqa comments, or print the findings not in the baseline to ``report``; give the exit code."""
    if args.write_baseline:
        return _write_baseline(args, findings)
    diagnostics = findings.diagnostics
    if baseline is not None:
        diagnostics = _not_in_baseline(args, settings, findings, baseline)
    if args.add_noqa is not None:
        return _add_noqa(args, diagnostics, failed=bool(findings.errors))
    if args.statistics:
        rows = statistics(diagnostics, _fixable_codes(settings, args.unsafe_fixes))
        render = render_statistics_json if args.output_format == "json" else render_statistics_text
        report.write(render(rows))
    else:
        outcome = CheckOutcome(
            diagnostics, findings.errors, findings.files_checked, findings.functions_found,
            lines_of=findings.lines_of, quiet=bool(args.quiet),
        )
        report.write(FORMATS[args.output_format](outcome))
    if findings.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if diagnostics and not args.exit_zero else EXIT_CLEAN


def _write_baseline(args: argparse.Namespace, findings: Findings) -> int:
    from autograd_lint.lint.baseline import write_baseline

    path = args.write_baseline
    try:
        count = write_baseline(path, findings.diagnostics, findings.lines_of)
    except OSError as error:
        print(f"error: {path}: cannot be written ({error.strerror or error})", file=sys.stderr)
        return EXIT_ERROR
    _note(args, f"Wrote {count} finding{'s' if count != 1 else ''} to {path}.")
    return EXIT_ERROR if findings.errors else EXIT_CLEAN


def _not_in_baseline(
    args: argparse.Namespace, settings: Settings, findings: Findings, baseline: Counter[Fingerprint]
) -> list[Diagnostic]:
    """The findings the baseline does not hold; its stale entries are named on stderr."""
    from autograd_lint.lint.baseline import compare, root_of

    root = root_of(args.baseline)
    checked = _checked_keys(args, settings, findings, root)
    comparison = compare(findings.diagnostics, baseline, findings.lines_of, root, checked)
    for entry in comparison.stale:
        _note(
            args,
            f"warning: {args.baseline}: stale entry (no such finding any more): "
            f"{entry.path}: {entry.code} in {entry.scope}: {entry.snippet}",
        )
    if comparison.stale:
        _note(args, f"Write the baseline again with --write-baseline {args.baseline} to drop them.")
    return comparison.new


def _checked_keys(args: argparse.Namespace, settings: Settings, findings: Findings, root: Path) -> set[str]:
    """The files this run read in full, as baseline keys: only their entries can be found stale."""
    from autograd_lint.lint.baseline import relative_key

    if findings.stdin is not None:
        return {relative_key(findings.stdin.path, root)}
    failed = {error.path for error in findings.errors}
    return {
        relative_key(target.path, root)
        for target in iter_targets(_checked_paths(args, settings), settings)
        if not isinstance(target, SourceError) and target.path not in failed
    }


def _fixable_codes(settings: Settings, unsafe: bool) -> set[str]:
    from autograd_lint.lint.engine import selected_rules

    allowed = {FixSafety.SAFE, FixSafety.UNSAFE} if unsafe else {FixSafety.SAFE}
    return {rule.code for rule in selected_rules(settings) if rule.fixer is not None and rule.fix in allowed}


def _add_noqa(args: argparse.Namespace, diagnostics: Sequence[Diagnostic], failed: bool) -> int:
    from autograd_lint.lint.add_noqa import add_noqa_to_file

    reason = args.add_noqa or None
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
            _note(args, f"warning: {path}:{line}: the line ends inside a string or with a backslash; no noqa added")
    _note(args, f"Added noqa comments to {added} line{'s' if added != 1 else ''}.")
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
    from autograd_lint.lint.engine import selected_rules

    rules = [rule.code for rule in selected_rules(settings)]
    targets = [] if _reads_stdin(args) else iter_targets(_checked_paths(args, settings), settings)
    files = [target.path for target in targets if not isinstance(target, SourceError)]
    if args.output_format == "json":
        document = {"configuration": source, "settings": shown, "rules": rules, "files": files}
        return json.dumps(document, indent=2) + "\n"
    lines = [f"Configuration: {source}", "", "[tool.autograd-lint]"]
    lines += [f"{key} = {_toml(value)}" for key, value in shown.items()]
    lines += ["", f"Rules that run ({len(rules)}): {', '.join(rules)}", "", f"Files to check ({len(files)}):"]
    lines += [f"  {os.path.normpath(path)}" for path in files]
    return "\n".join(lines) + "\n"


def _watched_files(args: argparse.Namespace) -> list[str]:
    """What ``--watch`` looks at: the files it would check, and every configuration file that may apply."""
    if args.isolated:
        configs: list[Path] = []
    elif args.config:
        configs = extended_files(args.config)
    else:
        try:
            start = Path(os.path.commonpath([os.path.abspath(p) for p in _paths(args)]))
        except ValueError:  # paths on different drives
            start = Path.cwd()
        # A pyproject.toml anywhere up may gain (or lose) the table: each one is watched.
        configs = [f for d in (start, *start.parents) for f in extended_files(d / CONFIG_FILE)]
    try:
        settings = settings_from_args(args)
    except ConfigError:
        settings = Settings()  # the check names the problem; its fix is seen through the configuration files
    targets = iter_targets(_checked_paths(args, settings), settings)
    return [str(path) for path in configs] + [t.path for t in targets if not isinstance(t, SourceError)]
