"""``autograd-lint pragma``: add or remove coverage pragmas on backward methods.

Adds :data:`MARKER` as the trailing comment of the ``def`` line (the line
that ends in ``:``) of every ``backward``, ``vjp`` and ``jvp`` method the
analyser finds on ``torch.autograd.Function`` subclasses, so coverage.py
excludes those methods.  The marker is coverage's own ``pragma: no cover``
with a suffix, so ``--remove`` takes away exactly what this command added.

Prefer the pytest plugin (``--autograd-cov``), which measures backward code
instead of hiding it; use this for code that cannot run where coverage is
measured (CUDA-only backward without GPU runners), ideally limited with
``--only-unexercised`` to what the plugin's report shows never ran.

Exit codes: 0 success (``--check``: nothing would change); 1 ``--check``
found files that would change; 2 usage error, an unreadable report, or a
file that could not be parsed (named on stderr; the other files are still
processed).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from typing import Iterable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from autograd_lint.config import ConfigError, add_config_arguments, project_settings
from autograd_lint.coverage import report
from autograd_lint.files import write_atomically
from autograd_lint.model.analysis import python_rejects
from autograd_lint.model.guard import run_guarded
from autograd_lint.model.source import SourceError, decode_source, read_source_bytes
from autograd_lint.sidefiles import SideFileError
from autograd_lint.model.spec import FunctionSpec

MARKER = "# pragma: no cover (autograd-backward)"
# coverage.py's default exclusion pattern: a line that matches it already
# excludes its method, and gets no second pragma.
COVERAGE_PRAGMA = re.compile(r"#\s*(pragma|PRAGMA)[:\s]?\s*(no|NO)\s*(cover|COVER)")
# The methods that get the marker, and the report phase that exercises each.
METHOD_PHASES = {"backward": "backward", "vjp": "backward", "jvp": "jvp"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or directories (default: .)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--remove", action="store_true", help="remove every marker this command added")
    mode.add_argument(
        "--print-config",
        action="store_true",
        help="print the equivalent [tool.coverage.report] exclude_also lines instead of editing files",
    )
    add_config_arguments(parser)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if any file would change")
    parser.add_argument(
        "--only-unexercised",
        metavar="REPORT",
        help="only methods that the JSON report of `pytest --autograd-cov --autograd-cov-json=REPORT` "
        "shows never ran",
    )


def run(args: argparse.Namespace) -> int:
    from autograd_lint.model.discovery import run as discover

    try:
        settings = project_settings(args.paths, args.config, args.isolated)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    found = discover(args.paths, settings, _no_job)
    failed = bool(found.errors)
    for error in found.errors:
        print(error, file=sys.stderr)
    entries: list[report.CodeRuns] | None = None
    if args.only_unexercised:
        try:
            entries = report.read_code_runs(args.only_unexercised)
        except SideFileError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    targets: dict[str, set[int]] = defaultdict(set)
    names: set[str] = set()
    matched: set[report.CodeRuns] = set()
    for function in found.functions:
        entry = None if entries is None else _entry_for(function, entries)
        if entry is not None:
            matched.add(entry)
        for name, method in function.methods.items():
            if name in METHOD_PHASES and (entries is None or (entry is not None and _never_ran(entry, name))):
                targets[function.path].add(method.position.line)
                names.add(name)
    if entries is not None:
        print(
            f"{args.only_unexercised}: {len(matched)} of {len(entries)} entries match a Function here; "
            f"{sum(len(lines) for lines in targets.values())} methods never ran"
        )
        if entries and not matched:
            print(
                f"{args.only_unexercised}: no entry matches a Function under {' '.join(args.paths)}; "
                "was the report made for another tree?",
                file=sys.stderr,
            )
            return 2
    if args.print_config:
        print(exclude_also_config(sorted(names)))
        return 2 if failed else 0
    changed = 0
    files = {r.path for r in found.results} if args.remove else set(targets)
    for path in sorted(files):
        try:
            edit = targets.get(path, set())
            if run_guarded(path, "marking", lambda: _rewrite(path, edit, remove=args.remove, write=not args.check)):
                changed += 1
                print(f"{'would change' if args.check else 'changed'}: {path}")
        except SourceError as error:
            print(f"error: {error}", file=sys.stderr)
            failed = True
    if failed:
        return 2
    return 1 if args.check and changed else 0


def _no_job(analysis: object, settings: object) -> None:
    return None


def _entry_for(function: FunctionSpec, entries: list[report.CodeRuns]) -> report.CodeRuns | None:
    for entry in entries:
        if entry.matches(function.path, function.qualname):
            return entry
    return None


def _never_ran(entry: report.CodeRuns, method: str) -> bool:
    """Whether the report shows that ``method``'s code, as this Function defines it, never ran.

    The report counts the code a class defines, whichever class was applied,
    so a base's backward that ran through its subclasses counts as run.
    """
    phase = METHOD_PHASES[method]
    if phase == "backward" and entry.backward_lines_ran:
        return False
    return entry.phases.get(phase, 0) == 0


def exclude_also_config(method_names: Iterable[str]) -> str:
    """The ``exclude_also`` lines that exclude methods of these names, in pyproject form."""
    lines = [
        "# Equivalent of `autograd-lint pragma`, without editing files. These regexes",
        "# match the method name in every measured file, Function or not.",
        "[tool.coverage.report]",
        "exclude_also = [",
    ]
    lines += [f'    "def {name}\\\\(",' for name in method_names]
    lines.append("]")
    return "\n".join(lines)


class _Marker(cst.CSTTransformer):
    """Adds the marker to the ``def`` lines in ``lines``, or removes it from every ``def``."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, lines: set[int], remove: bool) -> None:
        super().__init__()
        self.lines = lines
        self.remove = remove

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        body = updated.body
        if isinstance(body, cst.IndentedBlock):
            trailing = body.header
        else:
            trailing = body.trailing_whitespace
        comment = trailing.comment.value if trailing.comment else ""
        if self.remove:
            new = _without_marker(comment)
        elif self.get_metadata(PositionProvider, original.name).start.line in self.lines and not COVERAGE_PRAGMA.search(
            comment
        ):
            new = f"{comment}  {MARKER}" if comment else MARKER
        else:
            return updated
        if new == comment:
            return updated
        new_trailing = trailing.with_changes(
            comment=cst.Comment(new) if new else None,
            whitespace=cst.SimpleWhitespace("  " if new else ""),
        )
        if isinstance(body, cst.IndentedBlock):
            return updated.with_changes(body=body.with_changes(header=new_trailing))
        return updated.with_changes(body=body.with_changes(trailing_whitespace=new_trailing))


def _without_marker(comment: str) -> str:
    return comment.replace(f"  {MARKER}", "").replace(MARKER, "").strip()


def _rewrite(path: str, lines: set[int], remove: bool, write: bool) -> bool:
    """Apply the marker edit to one file; return whether its text changes.

    The file is replaced atomically, and only by text that parses.
    """
    original = read_source_bytes(path)
    problem = python_rejects(decode_source(original, path, for_rewrite=True), path)
    if problem is not None:  # first: libcst's parser is not safe on any depth or size
        raise SourceError(path, *problem)
    try:
        module = cst.parse_module(original)
        updated = MetadataWrapper(module).visit(_Marker(lines, remove))
        new = updated.bytes
        if new == original:
            return False
        cst.parse_module(new)  # never write what would not parse
    except cst.ParserSyntaxError as error:
        raise SourceError(path, f"libcst cannot parse it ({str(error).splitlines()[0]})") from None
    if write:
        try:
            write_atomically(path, new, replacing=original)
        except OSError as error:
            raise SourceError(path, f"cannot be written ({error.strerror or error})") from None
    return True
