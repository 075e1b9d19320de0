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

Not part of CI: the copy and the test runs are slow by nature.  Needs the ``mutation``
extra (``pip install -e ".[mutation,test]"``).  Run it niced on a shared machine::

    nice -n 15 python bench/mutation.py --area model --sample 25
    nice -n 15 python bench/mutation.py --module autograd_lint/lint/baseline.py --sample 0
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--area", choices=sorted({s.area for s in SHARDS}), action="append",
                        help="run the shards of this area (repeatable; default: all)")
    parser.add_argument("--module", action="append", help="run the shard of this module (repeatable)")
    parser.add_argument("--sample", type=int, default=25, help="mutant sites per module (0: every site)")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's test run")
    args = parser.parse_args(argv)
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
