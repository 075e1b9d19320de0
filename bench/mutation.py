"""Mutation testing of autograd-lint's own suite, one module at a time, over cosmic-ray.

For each shard (a module and the test files that cover it) this copies the checkout to a
temporary folder, lets cosmic-ray list the module's mutants, keeps a sample of them, and
runs only the shard's tests (``pytest -x``, with a time limit) against each mutant in
that copy.  A mutant is killed when a test fails or the run times out; it survives when
every test passes.  The score is killed / (killed + survived).  Results, with the diff of
every surviving mutant, go to ``bench/mutation_results/<module>.json``; the summary table
is printed (and is what docs/testing.md publishes).

Why a sample: a module has hundreds of mutants, many of them operator swaps at one site
(``a + b`` to ``a - b``, ``a * b``, ...).  The sample takes one mutant per site, at sites
drawn with a fixed seed, after dropping mutants inside type annotations (never evaluated
under ``from __future__ import annotations``: equivalent mutants), swaps of a signature's
bare ``*`` and mutants that do not compile (which any test run would count as killed).  So a shard runs in
minutes on two shared cores; ``--sample 0`` runs every site.

``--whole-area AREA`` scores an area of issue 26 as a whole instead: every module of the area
(``AREAS``) is listed, ``--sample`` sites are drawn across all of them, proportionally to each
module's number of sites, and each mutant runs the area's test files; the score is printed
with its 95% (Wilson) interval and the survivors, and every outcome goes to
``bench/mutation_results/area.<area>.seed<seed>.json``.  Here the bench applies each mutant
itself (cosmic-ray makes the mutated text), with a limit of three times the unmutated run.

Not part of CI: the copy and the test runs are slow by nature.  Needs the ``mutation``
extra (``pip install -e ".[mutation,test]"``).  Run it niced on a shared machine::

    nice -n 15 python bench/mutation.py --area model --sample 25
    nice -n 15 python bench/mutation.py --module autograd_lint/lint/baseline.py --sample 0
    nice -n 15 python bench/mutation.py --whole-area rules --sample 40 --seed 26
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib.util
import json
import math
import os
import random
import signal
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "mutation_results"
# A mutant survives when its tests pass, or when no test runs its lines (nothing is run then).
SURVIVED = ("passed", "not run (no test runs the line)")


@dataclass(frozen=True)
class Shard:
    """One module to mutate and the tests that cover it."""

    area: str
    module: str
    tests: tuple[str, ...]
    select: str | None = None  # a pytest -k expression, where one file covers many modules
    # Only the sites inside these top-level functions and classes (the report side of a module
    # that also holds run-time code, which only slow subprocess tests reach); None: everywhere.
    scope: tuple[str, ...] | None = None


# One or two representative modules per area (the areas of issue 26), with the test files
# that exercise them; "lint" is the front end (engine, output, baseline, noqa), "gentests"
# the generation side, "coverage" the report side.
SHARDS = (
    Shard("model", "autograd_lint/model/positions.py", ("tests/model/test_positions.py",)),
    Shard("model", "autograd_lint/model/imports.py", ("tests/model/test_semantic.py", "tests/rules/test_rule_examples.py"),
          select="AGL001 or AGL002 or AGL021 or AGL027 or imports"),
    # Discovery's rounds, worker processes and kept analyses are tested in test_rounds.py, its
    # excludes through the command line (test_config.py); test_discovery.py alone scored 50%.
    Shard("model", "autograd_lint/model/discovery.py",
          ("tests/model/test_discovery.py", "tests/model/test_rounds.py", "tests/cli/test_config.py"),
          select="test_discovery or test_rounds or exclude"),
    Shard("rules", "autograd_lint/rules/agl001_gradient_count.py",
          ("tests/rules/test_rule_examples.py", "tests/rules/test_vjp_spelling.py"), select="AGL001 or vjp"),
    Shard("rules", "autograd_lint/rules/agl015_missing_return.py", ("tests/rules/test_rule_examples.py",), select="AGL015"),
    Shard("lint", "autograd_lint/lint/baseline.py", ("tests/cli/test_baseline.py",)),
    Shard("lint", "autograd_lint/lint/add_noqa.py", ("tests/cli/test_adoption.py", "tests/cli/test_noqa_comments.py"),
          select="noqa"),
    # The CI formats (GitHub, GitLab, JUnit) are tested in test_ci_formats.py, --statistics in
    # test_adoption.py, JSON also in test_check_command.py; test_output_formats.py alone scored 8%.
    Shard("lint", "autograd_lint/lint/output.py",
          ("tests/cli/test_output_formats.py", "tests/cli/test_ci_formats.py", "tests/cli/test_adoption.py",
           "tests/cli/test_check_command.py"),
          select="test_output_formats or test_ci_formats or statistics or json"),
    Shard("gentests", "autograd_lint/gentests/writer.py", ("tests/gentests/test_writer.py",)),
    Shard("gentests", "autograd_lint/gentests/literals.py",
          ("tests/gentests/test_static_inputs.py", "tests/gentests/test_input_kinds.py")),
    Shard("gentests", "autograd_lint/gentests/tolerance.py", ("tests/gentests/test_tolerance.py",)),
    Shard("coverage", "autograd_lint/coverage/pragma.py", ("tests/coverage/test_pragma.py",)),
    # The report side: joining counts with the analyser's Functions, the verdict, the table,
    # the JSON and reading it back, the lines other processes saved.  The run-time counting
    # (Tally's per-thread counters, the Function.apply wrapper) is left out: only the
    # subprocess tests of test_fast_paths.py and test_report_and_plugin.py reach it, several
    # minutes per mutant here.
    Shard("coverage", "autograd_lint/coverage/report.py",
          ("tests/coverage/test_report_unit.py", "tests/coverage/test_custom_op_report.py",
           "tests/coverage/test_pragma.py"),
          select="not slow",
          scope=("Row", "CodeLines", "build", "fill_lines", "_is_under", "unexercised", "exercised_percent",
                 "_cell", "relative_name", "format_table", "format_lines", "_ranges", "to_json", "CodeRuns",
                 "read_code_runs", "_merge_into")),
    Shard("coverage", "autograd_lint/coverage/coverage_data.py",
          ("tests/coverage/test_report_unit.py",), scope=("parallel_files", "lines_saved_since", "_running")),
)


@dataclass(frozen=True)
class Area:
    """One area of issue 26 as a whole: every module in it, and the test files that cover it."""

    name: str
    modules: tuple[str, ...]  # files, or folders meaning every .py file below them
    tests: tuple[str, ...]
    # Modules below ``modules`` that belong to another side or face (named with the reason in
    # docs/testing.md): the run-time half of gentests and coverage, the language server.
    left_out: tuple[str, ...] = ()
    # Per module, the top-level functions and classes whose sites are mutated (report.py also
    # holds the run-time counting); a module not named here is mutated everywhere.
    scopes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    select: str | None = None  # a pytest -k expression: leaves out the tests too slow to run per mutant


# The five areas of issue 26's "done when".  Test files are listed fastest-first where that
# does not matter and the broadest first where it does (-x stops at the first failure).
AREAS = (
    Area("model", ("autograd_lint/model",),
         ("tests/rules/test_rule_examples.py", "tests/model/test_semantic.py", "tests/model/test_semantic_queries.py",
          "tests/model/test_opaque.py", "tests/model/test_traverse.py", "tests/model/test_new_syntax.py",
          "tests/model/test_rounds.py", "tests/model/test_discovery.py", "tests/model/test_positions.py",
          "tests/rules/test_usage.py", "tests/model/test_flow.py", "tests/model/test_sequences.py",
          "tests/model/test_trainable.py", "tests/model/test_helpers.py",
          # Killed survivors of seed 41 that the list above missed (docs/testing.md).
          "tests/customops/test_picked_source.py", "tests/rules/test_cross_file_apply.py",
          # And of seed 53: the fast tests of these files (docs/testing.md).
          "tests/customops/test_model.py", "tests/robustness/test_discovery_scopes.py", "tests/cli/test_result_cache.py",
          # And of seed 61.
          "tests/model/test_incremental.py"),
         # Left out: a flake8 subprocess per rule example, a 2,500-deep expression (about 20 s
         # here), and the CLI runs of the result cache but one (its in-process tests stay).
         select="not (flake8_agrees_with_check_on_each_custom_op_example or as_deep_as_cpython_compiles_is_analysed) "
                "and (not test_result_cache or warm_run_prints or remembered_only or only_what_changed)"),
    Area("rules", ("autograd_lint/rules",),
         ("tests/rules/test_rule_examples.py", "tests/rules/test_agl003_allowlist.py",
          "tests/rules/test_gradient_given.py", "tests/rules/test_issue23_consequences.py",
          "tests/rules/test_tolist_in_backward.py", "tests/rules/test_usage.py", "tests/rules/test_vjp_spelling.py")),
    # test_adoption.py (--add-noqa, --statistics; about 2 minutes here) only for its noqa,
    # statistics and show-settings tests; test_ruff_conventions.py only for --watch (the killers
    # of seed 41's survivors there, with test_result_cache.py).
    Area("lint", ("autograd_lint/lint",),
         ("tests/cli/test_check_command.py", "tests/cli/test_output_formats.py", "tests/cli/test_ci_formats.py",
          "tests/cli/test_selection.py", "tests/cli/test_baseline.py", "tests/cli/test_noqa_comments.py",
          "tests/cli/test_fix.py", "tests/cli/test_unused_noqa_fix.py", "tests/docs/test_rule_docs.py",
          "tests/frontends/test_flake8_agrees.py", "tests/cli/test_adoption.py", "tests/cli/test_result_cache.py",
          "tests/cli/test_ruff_conventions.py", "tests/cli/test_fix_in_place.py"),
         select="not (test_adoption or test_ruff_conventions) or noqa or statistics or show_settings or watch",
         left_out=("autograd_lint/lint/server.py", "autograd_lint/lint/commands/server.py")),
    Area("gentests", ("autograd_lint/gentests",),
         ("tests/gentests/test_writer.py", "tests/gentests/test_static_inputs.py", "tests/gentests/test_input_kinds.py",
          "tests/gentests/test_domains.py", "tests/gentests/test_tolerance.py", "tests/gentests/test_surrogate.py",
          "tests/gentests/test_not_derivative_static.py", "tests/gentests/test_low_precision.py",
          "tests/gentests/test_command.py",
          # Killed survivors of seed 53 that the list above missed (docs/testing.md).
          "tests/gentests/test_process_groups.py",
          # pickled.py's own unit tests (subclass arguments kept and rebuilt), missed by the list until session 6.
          "tests/gentests/test_subclass_arguments.py"),
         # Left out: the tests that run a generated module's gradchecks under pytest in a
         # subprocess (20 to 60 s each here): twelve minutes for one unmutated run with them.
         select="not (declared or evidence_in_forward or dependency_is_missing or pickled_cuda or recorded_cuda "
                "or plainly_not or split_style or sign_error or cholesky or draws_random or wrong_backward)",
         left_out=("autograd_lint/gentests/harness.py", "autograd_lint/gentests/op_harness.py",
                   "autograd_lint/gentests/record_plugin.py", "autograd_lint/gentests/runtime")),
    Area("coverage", ("autograd_lint/coverage/report.py", "autograd_lint/coverage/coverage_data.py",
                      "autograd_lint/coverage/pragma.py"),
         ("tests/coverage/test_report_unit.py", "tests/coverage/test_pragma.py",
          "tests/coverage/test_custom_op_report.py"),
         scopes=(("autograd_lint/coverage/report.py",
                  ("Row", "CodeLines", "build", "fill_lines", "_is_under", "unexercised", "exercised_percent",
                   "_cell", "relative_name", "format_table", "format_lines", "_ranges", "to_json", "CodeRuns",
                   "read_code_runs", "_merge_into")),
                 ("autograd_lint/coverage/coverage_data.py", ("parallel_files", "lines_saved_since", "_running")))),
)


def copy_checkout(destination: Path) -> None:
    """The tracked and untracked-but-not-ignored files of this checkout, without .git."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) (line, column) of every type annotation in ``path``."""
    spans = []
    for node in ast.walk(ast.parse(path.read_text())):
        annotations: list[ast.expr | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations.append(node.returns)
        elif isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        for annotation in filter(None, annotations):
            assert annotation.end_lineno is not None and annotation.end_col_offset is not None
            spans.append(((annotation.lineno, annotation.col_offset), (annotation.end_lineno, annotation.end_col_offset)))
    return spans


def scope_lines(path: Path, names: tuple[str, ...] | None) -> set[int] | None:
    """The lines of the top-level functions and classes ``names`` of ``path``; None for no limit."""
    if names is None:
        return None
    lines: set[int] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            assert node.end_lineno is not None
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def in_annotation(position: tuple[int, int], spans: list[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    """Whether a mutant at ``position`` (cosmic-ray's: 1-based line, 0-based column, as ast's;
    an operator's own position, inside its expression) lies in an annotation."""
    return any(start <= position < end for start, end in spans)


def parameter_marker(lines: list[str], position: tuple[int, int]) -> bool:
    """Whether ``position`` is the bare ``*`` or ``/`` of a signature (``def f(a, *, b)``):
    cosmic-ray swaps it as an operator, giving a syntax error (``+``), which any test run
    "kills", or ``/``, a positional-only marker that changes next to nothing."""
    row, col = position
    text = lines[row - 1] if row <= len(lines) else ""
    return text[col:col + 1] in ("*", "/") and text[col + 1:].lstrip()[:1] in (",", ")", "")


def compiles(source: str, operator_name: str, arguments: str | None, occurrence: int) -> bool:
    """Whether the mutant is valid Python."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    options = json.loads(arguments or "{}")
    while isinstance(options, str):  # SQLAlchemy's JSON column stores an encoded string
        options = json.loads(options)
    operator = get_operator(operator_name)(**(options or {}))
    try:
        mutated = mutate_code(source, operator, occurrence)
    except Exception:  # noqa: BLE001 - cosmic-ray 8.7's own bugs (ExceptionReplacer on an
        return False  # `except (A, B)` tuple raises AttributeError): a mutant it cannot make
    if mutated is None:
        return False
    try:
        compile(mutated, "<mutant>", "exec")
    except SyntaxError:
        return False
    return True


def sample_jobs(session: Path, module: Path, size: int, seed: int,
                scope: tuple[str, ...] | None = None) -> tuple[int, int]:
    """Keep one mutant per site at ``size`` sites drawn with ``seed`` (all sites when 0),
    leaving out mutants outside ``scope`` (names of top-level functions and classes), inside
    annotations, of a signature's ``*`` marker, and not valid Python.

    Returns (mutants in scope, mutants kept)."""
    spans = annotation_spans(module)
    in_scope = scope_lines(module, scope)
    source = module.read_text()
    lines = source.splitlines()
    db = sqlite3.connect(session)
    rows = db.execute(
        "SELECT job_id, operator_name, operator_args, occurrence, start_pos_row, start_pos_col "
        "FROM mutation_specs ORDER BY job_id"
    ).fetchall()
    if in_scope is not None:
        rows = [r for r in rows if r[4] in in_scope]
    by_site: dict[tuple[int, int], list[tuple[str, str, str | None, int]]] = {}
    for job, operator, arguments, occurrence, row, col in rows:
        if not in_annotation((row, col), spans) and not parameter_marker(lines, (row, col)):
            by_site.setdefault((row, col), []).append((job, operator, arguments, occurrence))
    rng = random.Random(seed)
    sites = sorted(by_site)
    rng.shuffle(sites)
    keep: set[str] = set()
    for site in sites:
        if size and len(keep) == size:
            break
        candidates = sorted(by_site[site])
        rng.shuffle(candidates)
        chosen = next((c for c in candidates if compiles(source, c[1], c[2], c[3])), None)
        if chosen is not None:
            keep.add(chosen[0])
    drop = [(job,) for (job,) in db.execute("SELECT job_id FROM mutation_specs") if job not in keep]
    db.executemany("DELETE FROM mutation_specs WHERE job_id = ?", drop)
    db.executemany("DELETE FROM work_items WHERE job_id = ?", drop)
    db.commit()
    db.close()
    return len(rows), len(keep)


def pytest_command(shard: Shard) -> str:
    select = f' -k "{shard.select}"' if shard.select else ""
    # -x: the first failing test kills the mutant; one process: the machine is shared.
    return f"{sys.executable} -m pytest -x -q -p no:cacheprovider -p no:xdist {' '.join(shard.tests)}{select}"


def run_shard(shard: Shard, sample: int, seed: int, timeout: float) -> dict[str, object]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agl-mutation-") as name:
        copy = Path(name) / "repo"
        copy_checkout(copy)
        # Subprocesses the tests start import the mutated copy, not the editable install.
        env = {**os.environ, "PYTHONPATH": str(copy)}
        command = pytest_command(shard)
        baseline = subprocess.run(command, shell=True, cwd=copy, env=env, capture_output=True, text=True)
        if baseline.returncode != 0:
            raise SystemExit(f"{shard.module}: the tests fail without any mutant:\n{baseline.stdout[-2000:]}")
        base_seconds = time.monotonic() - started
        config = copy / "cosmic-ray.toml"
        config.write_text(
            "[cosmic-ray]\n"
            f"module-path = {json.dumps(shard.module)}\n"
            f"timeout = {timeout}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(command)}\n\n"
            "[cosmic-ray.distributor]\nname = \"local\"\n"
        )
        session = copy / "session.sqlite"
        cosmic_ray = [sys.executable, "-m", "cosmic_ray.cli"]
        subprocess.run([*cosmic_ray, "init", str(config), str(session)], cwd=copy, env=env, check=True,
                       capture_output=True)
        total, kept = sample_jobs(session, copy / shard.module, sample, seed, shard.scope)
        subprocess.run([*cosmic_ray, "exec", str(config), str(session)], cwd=copy, env=env, check=True,
                       capture_output=True)
        db = sqlite3.connect(session)
        results = db.execute(
            "SELECT s.operator_name, s.start_pos_row, s.start_pos_col, r.worker_outcome, r.test_outcome, r.diff "
            "FROM mutation_specs s JOIN work_results r USING (job_id) ORDER BY s.start_pos_row, s.start_pos_col"
        ).fetchall()
        db.close()
    killed = survived = incompetent = 0
    survivors = []
    for operator, row, col, worker, outcome, diff in results:
        worker, outcome = worker.lower(), (outcome or "").lower()  # cosmic-ray stores NORMAL, KILLED, ...
        if worker == "timeout" or outcome == "killed":
            killed += 1
        elif outcome == "survived":
            survived += 1
            survivors.append({"line": row, "column": col, "operator": operator, "diff": diff})
        else:
            incompetent += 1  # the mutant could not be run (an exception in cosmic-ray itself)
    tested = killed + survived
    return {
        "area": shard.area,
        "module": shard.module,
        "tests": list(shard.tests),
        "select": shard.select,
        "scope": list(shard.scope) if shard.scope else None,
        "mutants": total,
        "sampled": kept,
        "sample_sites": sample,
        "seed": seed,
        "killed": killed,
        "survived": survived,
        "incompetent": incompetent,
        "score": round(killed / tested, 3) if tested else None,
        "baseline_seconds": round(base_seconds, 1),
        "seconds": round(time.monotonic() - started, 1),
        "survivors": survivors,
    }


def area_modules(area: Area) -> list[str]:
    """The modules of ``area`` (relative to the checkout), without those it leaves out."""
    found: list[str] = []
    for entry in area.modules:
        path = REPO / entry
        found.extend(str(p.relative_to(REPO)) for p in (sorted(path.rglob("*.py")) if path.is_dir() else [path]))
    return [m for m in found if not any(m == out or m.startswith(out + "/") for out in area.left_out)]


def module_sites(path: Path, scope: tuple[str, ...] | None) -> dict[tuple[int, int], list[tuple[str, int]]]:
    """Every mutation site of ``path`` (cosmic-ray's operators that take no arguments, as its
    ``init`` lists them) with its (operator, occurrence) mutants, leaving out the sites outside
    ``scope``, in annotations and at a signature's ``*`` marker."""
    from cosmic_ray.ast import ast_nodes, get_ast_from_path
    from cosmic_ray.plugins import get_operator, operator_names

    spans = annotation_spans(path)
    in_scope = scope_lines(path, scope)
    lines = path.read_text().splitlines()
    nodes = list(ast_nodes(get_ast_from_path(path)))
    sites: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for name in operator_names():
        operator_class = get_operator(name)
        if operator_class.arguments():
            continue  # cosmic-ray runs these only when configured, and the bench configures none
        operator = operator_class()
        positions = (start for node in nodes for start, _ in operator.mutation_positions(node))
        for occurrence, site in enumerate(positions):
            if in_scope is not None and site[0] not in in_scope:
                continue
            if in_annotation(site, spans) or parameter_marker(lines, site):
                continue
            sites.setdefault(site, []).append((name, occurrence))
    return sites


def allocate(sizes: dict[str, int], size: int, rng: random.Random) -> dict[str, int]:
    """How many of ``size`` sites to draw in each module: systematic sampling proportional to
    the modules' numbers of sites (a random start, then every total/size-th site), so each
    module gets the floor or the ceiling of its share and every site the same chance."""
    total = sum(sizes.values())
    size = min(size, total)
    step = total / size
    points = [rng.uniform(0, step) + i * step for i in range(size)]
    counts: dict[str, int] = {}
    start = 0
    for module, count in sizes.items():
        counts[module] = sum(1 for p in points if start <= p < start + count)
        start += count
    return counts


def mutated_source(source: str, operator_name: str, occurrence: int) -> str | None:
    """The mutant's source, or None where cosmic-ray cannot make it or it does not compile."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    try:
        mutated = mutate_code(source, get_operator(operator_name)(), occurrence)
    except Exception:  # noqa: BLE001 - cosmic-ray 8.7's own bugs (see compiles())
        return None
    if mutated is None:
        return None
    try:
        compile(mutated, "<mutant>", "exec")
    except SyntaxError:
        return None
    return mutated


def draw_area(area: Area, size: int, seed: int) -> tuple[dict[str, int], list[dict[str, object]]]:
    """The sites of every module of ``area`` (count per module) and ``size`` mutants drawn from
    them, stratified by module size, one mutant per drawn site."""
    rng = random.Random(seed)
    scopes = dict(area.scopes)
    sites = {m: module_sites(REPO / m, scopes.get(m)) for m in area_modules(area)}
    sizes = {m: len(s) for m, s in sites.items() if s}
    drawn: list[dict[str, object]] = []
    for module, count in allocate(sizes, size, rng).items():
        source = (REPO / module).read_text()
        order = sorted(sites[module])
        rng.shuffle(order)
        taken = 0
        for site in order:  # a site with no valid mutant gives its turn to the next one
            if taken == count:
                break
            candidates = sorted(sites[module][site])
            rng.shuffle(candidates)
            for operator_name, occurrence in candidates:
                mutated = mutated_source(source, operator_name, occurrence)
                if mutated is not None:
                    drawn.append({"module": module, "line": site[0], "column": site[1],
                                  "operator": operator_name, "occurrence": occurrence, "source": mutated})
                    taken += 1
                    break
    return sizes, drawn


def wilson(killed: int, tested: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (sound at 0 and 100% and for small samples)."""
    if not tested:
        return 0.0, 1.0
    p = killed / tested
    centre = (p + z * z / (2 * tested)) / (1 + z * z / tested)
    half = z * math.sqrt(p * (1 - p) / tested + z * z / (4 * tested * tested)) / (1 + z * z / tested)
    return max(0.0, centre - half), min(1.0, centre + half)


def run_tests(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[str, float]:
    """Run ``command``: "passed", "failed" or "timeout", and the seconds it took."""
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the tests' own subprocesses too
        process.wait()
        return "timeout", time.monotonic() - started
    return ("passed" if code == 0 else "failed"), time.monotonic() - started


def area_command(area: Area, module: str, chosen: list[str] | None = None) -> list[str]:
    """pytest over the area's test files, the mutated module's own test files first (a mutant
    they kill dies sooner; a survivor still runs every file); with ``chosen`` (node ids), only
    the files that hold them (the plugin then runs only those tests: collecting the other
    files costs more than most selections take to run)."""
    stem = Path(module).stem
    files = [t for t in area.tests if chosen is None or any(c.startswith(t + "::") for c in chosen)] or area.tests
    tests = sorted(files, key=lambda t: stem not in Path(t).stem)
    # -x: the first failing test kills the mutant; one process: the machine is shared; the
    # tests marked slow (real coverage runs, whole generated suites) are left out of every run.
    # The language-server plugins only slow the start (no area's tests use them).
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-p", "no:pytest-lsp", "-p", "no:asyncio", "-p", "bench.mutation_plugin", "-m", "not slow", *tests,
            *(["-k", area.select] if area.select else [])]


# Started by every Python process of the area's unmutated run (the directory holding it is put
# first on PYTHONPATH): coverage.py with the test that is running as its context, read from
# AGL_MUTATION_TEST (set by bench/mutation_plugin.py); a process forked from a measured one
# (the CLI tests fork the test process; discovery forks workers) starts a measurement of its
# own under the same name and saves it at os._exit, which skips the atexit handlers.  A test
# that starts a coverage measurement of its own (tests/coverage/) suspends this one while its
# own runs, hiding the lines run meanwhile: its name is written to AGL_MUTATION_BLIND.
SITECUSTOMIZE = '''
import atexit, os
if os.environ.get("AGL_MUTATION_RC"):
    import coverage

    _agl_mine = []
    _agl_real_start = coverage.Coverage.start

    def _agl_start_any(self):
        if not any(self is mine for mine in _agl_mine):
            with open(os.environ["AGL_MUTATION_BLIND"], "a", encoding="utf-8") as blind:
                blind.write(os.environ.get("AGL_MUTATION_TEST", "") + "\\n")
        return _agl_real_start(self)

    coverage.Coverage.start = _agl_start_any

    def _agl_start():
        measuring = coverage.Coverage(config_file=os.environ["AGL_MUTATION_RC"], data_suffix=True,
                                      context=os.environ.get("AGL_MUTATION_TEST") or None)
        _agl_mine.append(measuring)
        measuring.start()
        owner = os.getpid()

        def _save():
            if os.getpid() == owner:
                measuring.stop()
                measuring.save()
        atexit.register(_save)
        return _save

    def _agl_after_fork():
        inherited = coverage.Coverage.current()
        if inherited is not None:
            inherited.stop()
        save = _agl_start()
        real_exit = os._exit

        def _exit(status):
            try:
                save()
            finally:
                real_exit(status)
        os._exit = _exit

    _agl_start()
    os.register_at_fork(after_in_child=_agl_after_fork)
'''


@dataclass
class Selection:
    """Which tests of an area's list ran which lines of the area's modules, from one run under coverage."""

    tests: list[str]  # node ids, in the order they ran
    contexts: dict[str, dict[int, set[str]]]  # module (relative) -> line -> contexts ("" : no test)
    # The tests that started a coverage measurement of their own: what they ran meanwhile is
    # unseen, so they are selected for every mutant.
    blind: frozenset[str] = frozenset()

    def for_lines(self, module: str, lines: range) -> list[str] | None:
        """The tests to run against a mutant on ``lines`` of ``module``: those that ran one of
        the lines, and the blind ones; None for the whole list (a line ran outside any test: at
        import, at collection); [] where no test ran any of them and none is blind."""
        names: set[str] = set(self.blind)
        for line in lines:
            names |= self.contexts.get(module, {}).get(line, set())
        if "" in names or "@" in names:
            return None
        scopes = [name[1:] for name in names if name.startswith("@")]
        return [t for t in self.tests if t in names or any(t.startswith(s) for s in scopes)]


def measure_selection(area: Area, copy: Path, env: dict[str, str], timeout: float) -> tuple[Selection, float]:
    """Run the area's list once, unmutated, under coverage.py with each test as a context."""
    import coverage

    work = copy.parent / "selection"
    (work / "site").mkdir(parents=True)
    (work / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    rc = work / "coveragerc"
    rc.write_text(f"[run]\ndata_file = {work / 'data' / '.coverage'}\nsource = {copy / 'autograd_lint'}\n")
    (work / "data").mkdir()
    (work / "data").chmod(0o777)  # for the measurement of the runs as nobody, too
    log = work / "tests.txt"
    blind = work / "blind.txt"
    blind.touch(mode=0o666)
    blind.chmod(0o666)
    # AUTOGRAD_LINT_TESTS_SUBPROCESS: tests/pytest_process.py forks pytester's runs from a
    # zygote started without PYTHONPATH (so without this measurement); a real interpreter per
    # run is measured, under the name of the test that started it.
    measured_env = {**env, "PYTHONPATH": f"{work / 'site'}{os.pathsep}{env['PYTHONPATH']}",
                    "AGL_MUTATION_RC": str(rc), "AGL_MUTATION_TESTS": str(log), "AGL_MUTATION_BLIND": str(blind),
                    "AUTOGRAD_LINT_TESTS_SUBPROCESS": "1"}
    outcome, seconds = run_tests(area_command(area, ""), copy, measured_env, timeout)
    if outcome != "passed":
        raise SystemExit(f"area {area.name}: the tests do not pass under coverage without any mutant ({outcome})")
    combined = coverage.Coverage(config_file=str(rc))
    combined.combine(strict=True)
    data = combined.get_data()
    contexts: dict[str, dict[int, set[str]]] = {}
    for measured in data.measured_files():
        relative = str(Path(measured).relative_to(copy))
        contexts[relative] = {line: set(names) for line, names in data.contexts_by_lineno(measured).items()}
    unseen = frozenset(blind.read_text().splitlines())
    if unseen:
        print(f"  tests that start their own coverage (selected for every mutant): {sorted(unseen)}", file=sys.stderr)
    return Selection(log.read_text().splitlines(), contexts, unseen), seconds


def statement_lines(source: str, line: int, column: int) -> range:
    """The lines of the innermost statement holding (line, column): a mutant there changes what
    runs only when one of them runs (a compound statement: its header, up to its body)."""
    best: ast.stmt | None = None
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        end = node.body[0].lineno - 1 if getattr(node, "body", None) and isinstance(node.body, list) else node.end_lineno
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        if first <= line <= max(end, node.lineno) and (best is None or node.lineno >= best.lineno):
            best = node
    if best is None:
        return range(line, line + 1)
    end = best.body[0].lineno - 1 if getattr(best, "body", None) and isinstance(best.body, list) else best.end_lineno
    first = min([best.lineno, *(d.lineno for d in getattr(best, "decorator_list", []))])
    return range(first, max(end, best.lineno, line) + 1)


def run_mutant(area: Area, mutant: dict[str, object], copy: Path, env: dict[str, str], limit: float,
               selection: Selection | None) -> tuple[str, float, int | None]:
    """Apply ``mutant`` in ``copy`` and run the area's tests, or only those selected for its
    lines: the outcome, the seconds and how many tests were selected (None: the whole list)."""
    target = copy / str(mutant["module"])
    original = target.read_text()
    chosen = None
    if selection is not None:
        lines = statement_lines(original, int(mutant["line"]), int(mutant["column"]))
        chosen = selection.for_lines(str(mutant["module"]), lines)
        if chosen == []:
            return "not run (no test runs the line)", 0.0, 0
    run_env = env
    if chosen is not None:
        listing = copy.parent / "selected.txt"
        listing.write_text("".join(f"{name}\n" for name in chosen))
        Path(f"{listing}.missing").unlink(missing_ok=True)
        run_env = {**env, "AGL_MUTATION_SELECT": str(listing)}
    cached = Path(importlib.util.cache_from_source(str(target)))
    try:
        target.write_text(str(mutant["source"]))
        cached.unlink(missing_ok=True)  # never the unmutated bytecode (same size and second)
        outcome, seconds = run_tests(area_command(area, str(mutant["module"]), chosen), copy, run_env, limit)
        if chosen is not None and Path(f"{copy.parent / 'selected.txt'}.missing").exists():
            # A selected test was not collected (its id changed): the whole list decides instead.
            outcome, extra = run_tests(area_command(area, str(mutant["module"])), copy, env, limit)
            seconds += extra
            chosen = None
    finally:
        target.write_text(original)
        cached.unlink(missing_ok=True)
    return outcome, seconds, None if chosen is None else len(chosen)


def run_area(area: Area, size: int, seed: int, timeout: float | None, select: bool = True,
             replay: list[dict[str, object]] | None = None) -> dict[str, object]:
    """Draw ``size`` mutants across ``area`` (or take ``replay``'s) and run the area's tests
    against each, in a copy; with ``select``, only the tests that ran the mutated lines."""
    started = time.monotonic()
    sizes, drawn = (draw_area(area, size, seed) if replay is None
                    else ({m: 0 for m in area_modules(area)}, replay))
    with tempfile.TemporaryDirectory(prefix="agl-mutation-") as name:
        # The permission tests run the CLI as nobody (tests/other_user.py): it must read the
        # mutated copy (else it imports the editable install, unmutated) and be measured.
        os.chmod(name, 0o755)
        copy = Path(name) / "repo"
        copy_checkout(copy)
        # Subprocesses the tests start import the mutated copy, not the editable install.
        env = {**os.environ, "PYTHONPATH": str(copy)}
        selection = None
        if select:
            # The unmutated run, under coverage (slower than a plain run: the limit it sets is generous).
            selection, baseline = measure_selection(area, copy, env, timeout or 3600)
        else:
            outcome, baseline = run_tests(area_command(area, ""), copy, env, timeout or 3600)
            if outcome != "passed":
                raise SystemExit(f"area {area.name}: the tests do not pass without any mutant ({outcome})")
        # A timeout kills a mutant only where the unmutated run is well within the limit.
        limit = timeout or max(60.0, 3 * baseline)
        timeouts_count = baseline * 2 <= limit
        results = []
        for number, mutant in enumerate(drawn, 1):
            outcome, seconds, chosen = run_mutant(area, mutant, copy, env, limit, selection)
            original = (copy / str(mutant["module"])).read_text()
            diff = "".join(difflib.unified_diff(original.splitlines(True), str(mutant["source"]).splitlines(True),
                                                mutant["module"], mutant["module"], n=1))
            results.append({**{k: v for k, v in mutant.items() if k not in ("source", "diff", "outcome")},
                            "outcome": outcome, "selected_tests": "all" if chosen is None else chosen,
                            "seconds": round(seconds, 1), "diff": diff})
            print(f"  {number}/{len(drawn)} {mutant['module']}:{mutant['line']} {mutant['operator']}: {outcome} "
                  f"({seconds:.0f} s, {'all' if chosen is None else chosen} tests)", file=sys.stderr, flush=True)
            # Written after every mutant, so a run stopped early still leaves what it measured.
            if replay is None:
                save(area_result(area, sizes, seed, results, baseline, limit, timeouts_count, started, len(drawn),
                                 select))
    return area_result(area, sizes, seed, results, baseline, limit, timeouts_count, started, len(drawn), select)


def area_result(area: Area, sizes: dict[str, int], seed: int, results: list[dict[str, object]], baseline: float,
                limit: float, timeouts_count: bool, started: float, drawn: int, select: bool) -> dict[str, object]:
    """The score of the mutants run so far (``complete`` once all ``drawn`` have run)."""
    killed = sum(r["outcome"] == "failed" or (r["outcome"] == "timeout" and timeouts_count) for r in results)
    survived = sum(r["outcome"] in SURVIVED for r in results)
    low, high = wilson(killed, killed + survived)
    return {
        "area": area.name,
        "modules": sizes,
        "left_out": list(area.left_out),
        "scopes": {m: list(s) for m, s in area.scopes},
        "tests": list(area.tests),
        "sites": sum(sizes.values()),
        "sampled": len(results),
        "drawn": drawn,
        "complete": len(results) == drawn,
        "seed": seed,
        "killed": killed,
        "survived": survived,
        "timeouts": sum(r["outcome"] == "timeout" for r in results),
        "timeouts_count_as_killed": timeouts_count,
        "score": round(killed / (killed + survived), 3) if killed + survived else None,
        "interval95": [round(low, 3), round(high, 3)],
        "baseline_seconds": round(baseline, 1),
        "timeout_seconds": round(limit, 1),
        "seconds": round(time.monotonic() - started, 1),
        "tests_selected_by_coverage": select,
        "survivors": [r for r in results if r["outcome"] in SURVIVED],
        "mutants": results,
    }


def save(result: dict[str, object]) -> None:
    """Write an area's result to ``bench/mutation_results/area.<area>.seed<seed>.json`` (atomically)."""
    target = RESULTS / f"area.{result['area']}.seed{result['seed']}.json"
    partial = target.with_suffix(".part")
    partial.write_text(json.dumps(result, indent=2) + "\n")
    partial.replace(target)


def replayed(recorded: Path, picks: list[int]) -> list[dict[str, object]]:
    """Mutants ``picks`` (1-based) of a recorded area run, made again from today's sources; one
    whose diff is no longer the recorded one (the module changed since) is left out, said so."""
    mutants = json.loads(recorded.read_text())["mutants"]
    again = []
    for number in picks:
        mutant = mutants[number - 1]
        module = str(mutant["module"])
        source = (REPO / module).read_text()
        mutated = mutated_source(source, str(mutant["operator"]), int(mutant["occurrence"]))
        diff = "" if mutated is None else "".join(difflib.unified_diff(
            source.splitlines(True), mutated.splitlines(True), module, module, n=1))
        if diff != mutant["diff"]:
            print(f"  {number}: {module}:{mutant['line']} changed since the recorded run: left out", file=sys.stderr)
            continue
        again.append({**mutant, "source": mutated, "recorded": mutant["outcome"], "number": number})
    return again


def main_replay(area_name: str, recorded: Path, picks: list[int], timeout: float | None) -> int:
    """``--replay``: run recorded mutants again with the tests selected by coverage and print
    each outcome beside the recorded one (the recorded runs ran the whole list)."""
    area = next(a for a in AREAS if a.name == area_name)
    result = run_area(area, 0, 0, timeout, select=True, replay=replayed(recorded, picks))
    for mutant in result["mutants"]:
        recorded_verdict = "survived" if mutant["recorded"] in SURVIVED else "killed"
        verdict = "survived" if mutant["outcome"] in SURVIVED else "killed"
        print(f"| {mutant['number']} | {mutant['module']}:{mutant['line']} {mutant['operator']} | {recorded_verdict} | "
              f"{verdict} ({mutant['outcome']}) | {mutant['selected_tests']} | {mutant['seconds']:.0f} |", flush=True)
    return 0


def main_areas(names: list[str], size: int, seed: int, timeout: float | None, select: bool = True) -> int:
    """``--whole-area``: one stratified sample per area, its score with a 95% interval, and the survivors."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    for area in (a for a in AREAS if a.name in names):
        result = run_area(area, size, seed, timeout, select)
        save(result)
        low, high = result["interval95"]
        score = "n/a" if result["score"] is None else f"{100 * result['score']:.0f}%"
        print(f"| {area.name} | {len(result['modules'])} | {result['sites']} | {result['sampled']} | "
              f"{result['killed']} | {result['survived']} | {result['timeouts']} | **{score}** "
              f"({100 * low:.0f}-{100 * high:.0f}%) | {result['seconds'] / 60:.0f} |", flush=True)
        for survivor in result["survivors"]:
            print(f"    survived: {survivor['module']}:{survivor['line']} {survivor['operator']}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--area", choices=sorted({s.area for s in SHARDS}), action="append",
                        help="run the shards of this area (repeatable; default: all)")
    parser.add_argument("--module", action="append", help="run the shard of this module (repeatable)")
    parser.add_argument("--sample", type=int, default=25, help="mutant sites per module (0: every site)")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's test run")
    parser.add_argument("--whole-area", choices=[a.name for a in AREAS], action="append",
                        help="sample mutants across every module of this area (repeatable); --sample is "
                             "then the number of mutants for the area, --timeout by default 3x the unmutated run")
    parser.add_argument("--every-test", action="store_true",
                        help="--whole-area: run the area's whole list against every mutant (no selection by coverage)")
    parser.add_argument("--replay", type=Path, help="a recorded area result: run --pick's mutants again, selected")
    parser.add_argument("--pick", type=int, nargs="+", default=[], help="--replay's mutants (1-based numbers)")
    args = parser.parse_args(argv)
    timeout = args.timeout if "--timeout" in (argv or sys.argv) else None
    if args.replay:
        return main_replay(json.loads(args.replay.read_text())["area"], args.replay, args.pick, timeout)
    if args.whole_area:
        return main_areas(args.whole_area, args.sample, args.seed, timeout, not args.every_test)
    shards = [s for s in SHARDS if (not args.area or s.area in args.area) and (not args.module or s.module in args.module)]
    if not shards:
        parser.error("no shard matches")
    RESULTS.mkdir(parents=True, exist_ok=True)
    print("| area | module | mutants | sampled | killed | survived | score | minutes |")
    print("|---|---|---|---|---|---|---|---|")
    for shard in shards:
        result = run_shard(shard, args.sample, args.seed, args.timeout)
        name = shard.module.removeprefix("autograd_lint/").replace("/", ".").removesuffix(".py")
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        score = "n/a" if result["score"] is None else f"{100 * result['score']:.0f}%"
        print(f"| {shard.area} | `{shard.module}` | {result['mutants']} | {result['sampled']} | {result['killed']} "
              f"| {result['survived']} | {score} | {result['seconds'] / 60:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
