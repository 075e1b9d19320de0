"""``autograd-lint check``: lint the autograd.Function subclasses under some paths.

Settings come from ``[tool.autograd-lint]`` (see :mod:`autograd_lint.config`),
then the command line: ``--select`` replaces the configured ``select``;
``--extend-select``, ``--ignore`` and ``--exclude`` add to what is configured.

Exit codes: 0 when nothing is found, 1 when there are findings, 2 on a usage
error, a bad configuration, or when a file could not be read or parsed (that
file is named with the reason on stderr, one line each, and every other file is
still checked).

With ``--fix`` or ``--diff``, see :mod:`autograd_lint.fix` for what is written and
the exit codes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from autograd_lint.config import ConfigError, add_config_arguments, project_settings, selectors
from autograd_lint.model.discovery import run as run_files
from autograd_lint.engine import check_analysis, module_needs
from autograd_lint.output import FORMATS, CheckOutcome
from autograd_lint.settings import Settings

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(value: str) -> tuple[str, ...]:
    try:
        return selectors([code.strip() for code in value.split(",") if code.strip()], "rule selector")
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or directories (default: .)")
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
    add_config_arguments(parser)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The configured settings with the command line's on top; raises :class:`ConfigError`."""
    configured = project_settings(args.paths, args.config, args.isolated)
    return replace(
        configured,
        select=args.select or configured.select,
        extend_select=configured.extend_select + args.extend_select,
        ignore=configured.ignore + args.ignore,
        extend_exclude=configured.extend_exclude + tuple(args.exclude),
        jobs=args.jobs,
    )


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    result = run_files(args.paths, settings, check_analysis, module_needs(settings))
    if args.fix or args.diff:
        # Imported here: the fix pass loads libcst.codemod, which a plain check does not need.
        from autograd_lint.fix import fix_command

        return fix_command(args, result, settings)
    diagnostics = sorted(
        (d for file_result in result.results for d in file_result.result or ()),
        key=lambda d: d.sort_key(),
    )
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    outcome = CheckOutcome(
        diagnostics=diagnostics,
        errors=result.errors,
        files_checked=result.files_seen,
        functions_found=len(result.functions),
    )
    sys.stdout.write(FORMATS[args.output_format](outcome))
    if result.errors:
        return EXIT_ERROR
    if diagnostics and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN
