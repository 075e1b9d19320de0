"""The ``autograd-lint gen-tests`` sub-command: one gradcheck test module per source module.

Exit codes: 0 when every file is up to date or was written; 1 with ``--check``
when some generated file is missing or stale; 2 when a source file could not be
read or parsed, the recording could not be read, or an edited file was kept
(each reported on one line, the run goes on).  The command never imports torch
nor the analysed code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Mapping

from autograd_lint.config import ConfigError, add_config_arguments, project_settings
from autograd_lint.files import Outputs, Refused
from autograd_lint.gentests import recording
from autograd_lint.gentests.callsites import CallSite, find_call_sites, match_call_sites
from autograd_lint.gentests.checks import checks_for
from autograd_lint.gentests.custom_ops import op_targets, output_name as op_output_name, plan_op, render_op_module
from autograd_lint.gentests.inputs import FunctionInputs, Origin, choose_inputs
from autograd_lint.gentests.literals import default_sources
from autograd_lint.gentests.param_uses import parameter_ranks, parameter_sizes, parameter_uses
from autograd_lint.gentests.not_derivative import (
    not_the_derivative,
    random_forward,
    sampled_gradient,
    surrogate_of_a_step,
)
from autograd_lint.gentests.render import FunctionPlan, header_comment, render_module
from autograd_lint.gentests.domains import preferred_domains
from autograd_lint.gentests.low_precision import LowPrecision, declared_low_precision
from autograd_lint.gentests.surrogate import DeclarationError, Surrogate, declared_surrogate
from autograd_lint.gentests.tolerance import Tolerance, declared_tolerance
from autograd_lint.gentests.writer import FileState, compose, file_state, write_python_atomic
from autograd_lint.model.spec import FunctionSpec

DEFAULT_OUT = os.path.join("tests", "autograd_generated")
EXIT_OK = 0
EXIT_STALE = 1
EXIT_ERROR = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                        help="files or directories to analyse (default: .)")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"directory of the generated test modules (default: {DEFAULT_OUT})")
    parser.add_argument("--inputs", default=recording.DEFAULT_PATH, metavar="FILE",
                        help="inputs recorded by `pytest --autograd-record` "
                        f"(default: {recording.DEFAULT_PATH}; a missing file is fine)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a generated file is missing or stale")
    parser.add_argument("--force", action="store_true",
                        help="overwrite generated files even where they were edited")
    parser.add_argument("--compile-parity", action="store_true",
                        help="also compare eager and torch.compile(backend='aot_eager') outputs and gradients "
                        "(slower: see docs/gen-tests.md)")
    add_config_arguments(parser)


@dataclass
class ModuleTarget:
    """The Functions of one source module and where its test module goes."""

    module: str
    path: str
    import_root: str
    functions: list[FunctionSpec]


def import_root(path: str, module: str) -> str:
    """The directory from which ``module`` (defined in ``path``) is importable."""
    directory = os.path.dirname(os.path.realpath(path))
    depth = module.count(".") + (1 if os.path.basename(path) == "__init__.py" else 0)
    for _ in range(depth):
        directory = os.path.dirname(directory)
    return directory


def output_name(module: str) -> str:
    return "test_gradcheck_" + module.replace(".", "_") + ".py"


def group_by_module(specs: list[FunctionSpec], recorded: recording.Recording | None = None,
                    ) -> tuple[list[ModuleTarget], list[FunctionSpec]]:
    """Importable Functions with a backward grouped by module, and the ones left out.

    A class defined inside a function can't be imported by a test, so it is left
    out, unless every recorded case of it pickled the class with its arguments.
    """
    targets: dict[str, ModuleTarget] = {}
    left_out: list[FunctionSpec] = []
    for spec in specs:
        if spec.backward_method is None:
            continue
        cases = recorded.cases_for(spec) if recorded is not None and "<locals>" in spec.qualname else []
        if "<locals>" in spec.qualname and not (cases and all(case.with_function for case in cases)):
            left_out.append(spec)
            continue
        module = spec.module or os.path.splitext(os.path.basename(spec.path))[0]
        if module not in targets:
            targets[module] = ModuleTarget(module, spec.path, import_root(spec.path, module), [])
        functions = targets[module].functions
        # A name defined twice (alternative definitions) imports as the last one.
        functions[:] = [f for f in functions if f.qualname != spec.qualname]
        functions.append(spec)
    return list(targets.values()), left_out


def plan_function(
    spec: FunctionSpec, specs: list[FunctionSpec], sites: list[CallSite], recorded: recording.Recording,
    surrogate: Surrogate | None = None, compile_parity: bool = False, tolerance: Tolerance | None = None,
    low_precision: LowPrecision | None = None, domains: tuple[str, ...] = (), uses: Mapping[str, str] | None = None,
    ranks: Mapping[str, int] | None = None, sizes: Mapping[str, tuple[tuple[int, int], ...]] | None = None,
    random_forward: bool = False,
) -> FunctionPlan:
    inputs: FunctionInputs = choose_inputs(
        spec, recorded.cases_for(spec), match_call_sites(spec, sites, specs), default_sources(spec), uses, ranks,
        sizes,
    )
    checks = checks_for(spec, inputs, surrogate, compile_parity, low_precision is not None, random_forward)
    return FunctionPlan(spec, inputs, checks, surrogate, tolerance, low_precision, domains)


def _describe_only(analysis: object, settings: object) -> None:
    """The per-file job of discovery: gen-tests needs the FunctionSpecs only."""
    return None


def run(args: argparse.Namespace) -> int:
    from autograd_lint.model.discovery import run as discover
    from autograd_lint.model.targets import iter_targets
    from autograd_lint.model.guard import run_guarded
    from autograd_lint.model.source import SourceError, read_source, split_lines

    try:
        settings = project_settings(args.paths, args.config, args.isolated)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"error: --out {args.out}: not a directory; the generated test modules go into a directory",
              file=sys.stderr)
        return EXIT_ERROR
    errors: list[str] = []

    def report(message: str) -> None:
        errors.append(message)
        print(message, file=sys.stderr)

    found = discover(args.paths, settings, _describe_only)
    for error in found.errors:
        report(str(error))
    failed_paths = {error.path for error in found.errors}
    specs = found.functions

    sites: list[CallSite] = []
    for target in iter_targets(args.paths, settings):
        if isinstance(target, SourceError) or target.path in failed_paths:
            continue
        try:
            path = target.path
            sites.extend(run_guarded(path, "finding apply call sites", lambda: find_call_sites(read_source(path))))
        except SourceError as error:
            report(str(error))

    try:
        recorded = recording.load(args.inputs)
    except recording.RecordingError as error:
        report(str(error))
        recorded = recording.Recording({})

    targets, left_out = group_by_module(specs, recorded)
    outputs = Outputs()
    for spec in left_out:
        print(f"{spec.path}:{spec.position.line}: {spec.qualname} is defined inside a function; "
              "a test cannot import it, none generated (record a call with `pytest --autograd-record`: "
              "the class is pickled with it)")
    out_dir = os.path.realpath(args.out)
    origins: Counter[Origin] = Counter()
    op_origins: Counter[Origin] = Counter()
    stale: list[str] = []
    configured_surrogates = dict(settings.surrogate_gradients)
    configured_tolerances = dict(settings.gradcheck_tolerances)
    configured_low_precision = dict(settings.low_precision)

    def emit(out_path: str, text: str, what: str, source: str) -> None:
        try:
            outputs.claim(out_path, source)
        except Refused as error:
            report(f"{out_path}: {error.reason}: {source}'s tests are not generated (rename one of the modules)")
            return
        state = file_state(out_path, text)
        if state is FileState.UP_TO_DATE:
            return
        if args.check:
            stale.append(out_path)
            print(f"{out_path}: {state.value}")
        elif state in (FileState.EDITED, FileState.FOREIGN) and not args.force:
            why = "edited since it was generated" if state is FileState.EDITED else "not written by gen-tests"
            report(f"{out_path}: {why}; not overwritten (use --force)")
        else:
            try:
                write_python_atomic(out_path, text)
            except OSError as error:
                report(f"{out_path}: cannot be written ({error.strerror or error})")
                return
            print(f"wrote {out_path} ({what})")

    for target in targets:
        try:
            lines = [line.rstrip("\r\n") for line in split_lines(read_source(target.path).text)]
        except SourceError as error:
            report(str(error))
            continue
        root_from_test = os.path.relpath(target.import_root, out_dir).replace(os.sep, "/")

        def plan_module() -> tuple[list[FunctionPlan], str]:
            plans = []
            for spec in target.functions:
                try:
                    low_precision = declared_low_precision(spec, lines, configured_low_precision)
                except DeclarationError as error:
                    report(str(error))
                    low_precision = None
                try:
                    surrogate = declared_surrogate(spec, lines, configured_surrogates)
                except DeclarationError as error:
                    report(str(error))
                    surrogate = None
                if low_precision is not None:
                    if surrogate is not None:
                        report(f"{spec.path}:{spec.position.line}: {spec.qualname} is declared both a surrogate "
                               "gradient and a low-precision kernel; its test compares it with the low-precision "
                               "reference only")
                    surrogate = None
                elif surrogate is None and (reason := not_the_derivative(spec, lines)
                                            or surrogate_of_a_step(spec, lines)) is not None:
                    surrogate = Surrogate(None, inferred=reason, sampled=sampled_gradient(spec, lines) is not None)
                    hints.append(f"{spec.path}:{spec.position.line}: {spec.qualname}: backward plainly is not the "
                                 f"derivative of forward: {reason}; generated as a surrogate gradient with "
                                 "test_gradcheck expected to fail (declare it, or fix backward)")
                elif surrogate is None and (reason := sampled_gradient(spec, lines)) is not None:
                    surrogate = Surrogate(None, inferred=reason, sampled=True)
                    hints.append(f"{spec.path}:{spec.position.line}: {spec.qualname}: backward plainly is not the "
                                 f"derivative of forward: {reason}; generated as a surrogate gradient with "
                                 "test_gradcheck expected to fail (declare it, or fix backward)")
                elif surrogate is not None and surrogate.inferred is None and sampled_gradient(spec, lines):
                    surrogate = Surrogate(surrogate.reference, sampled=True)
                try:
                    tolerance = declared_tolerance(spec, lines, configured_tolerances)
                except DeclarationError as error:
                    report(str(error))
                    tolerance = None
                plans.append(plan_function(spec, specs, sites, recorded, surrogate, args.compile_parity, tolerance,
                                           low_precision, preferred_domains(spec, lines),
                                           parameter_uses(spec, lines), parameter_ranks(spec, lines),
                                           parameter_sizes(spec, lines),
                                           random_forward(spec, lines) is not None))
            return plans, render_module(target.module, plans, root_from_test)

        hints: list[str] = []
        try:
            plans, body = run_guarded(target.path, "planning the tests", plan_module)
        except SourceError as error:
            report(str(error))
            continue
        for hint in hints:
            print(hint)
        origins.update(plan.inputs.origin for plan in plans)
        display = os.path.relpath(target.path).replace(os.sep, "/")
        text = compose(header_comment(display, target.module), body)
        emit(os.path.join(args.out, output_name(target.module)), text, f"{len(plans)} Function(s)", display)
    for op_target in op_targets([r.custom_ops for r in found.results if r.custom_ops is not None]):
        op_plans = [plan_op(op, args.compile_parity, recorded.cases_for_op(op)) for op in op_target.ops]
        op_origins.update(plan.inputs.origin for plan in op_plans)
        root_from_test = os.path.relpath(import_root(op_target.path, op_target.module), out_dir).replace(os.sep, "/")
        body = render_op_module(op_target.module, op_plans, root_from_test, op_target.registering)
        display = os.path.relpath(op_target.path).replace(os.sep, "/")
        emit(os.path.join(args.out, op_output_name(op_target.module)),
             compose(header_comment(display, op_target.module), body), f"{len(op_plans)} custom op(s)", display)

    for problem in recorded.problems:
        report(problem)
    summary = ", ".join(f"{origins[origin]} {origin.value}" for origin in Origin)
    print(f"inputs of {sum(origins.values())} Function(s): {summary}")
    if op_origins:
        summary = ", ".join(f"{op_origins[origin]} {origin.value}" for origin in Origin)
        print(f"inputs of {sum(op_origins.values())} custom op(s): {summary}")
    if errors:
        return EXIT_ERROR
    return EXIT_STALE if stale else EXIT_OK
