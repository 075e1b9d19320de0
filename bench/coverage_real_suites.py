"""The coverage plugin on real packages' own test suites: covered backward code, verdicts, overhead.

For each package in :data:`SUITES` (repository and commit pinned), the
repository's files at that commit are taken from the local mirror
(``git archive``), and its tests are run from that tree, twice per round:

* plain: ``coverage run --source=<package> -m pytest -p no:autograd_lint_cov``;
* plugin: the same with ``--autograd-cov --autograd-cov-fail-unexercised
  --autograd-cov-json=report.json``.

The arms take turns (plain-plugin, plugin-plain, ...).  It prints, per
package: the statements of the ``backward``/``vjp``/``jvp`` methods of its
autograd Functions (found by autograd-lint's analyser) that coverage saw run
in each arm, the ``--autograd-cov-fail-unexercised`` verdict (last line of
the run), the share of Functions whose backward code ran (what
``--autograd-cov-fail-under`` compares), the tests' outcomes in each arm,
and the ratios plugin/plain per round (median [min, max]) of the wall time
and of the CPU time (user+sys, less disturbed by other load) of the whole
``coverage run`` process.

    python bench/coverage_real_suites.py --python /work/venvs/coverage-real/bin/python \\
        --mirrors /work/.mirror --workdir /tmp/real-suites [--rounds 3] [--only NAME ...]

``--python`` is an interpreter with torch 2.13, coverage, pytest, this
autograd-lint and the packages' own dependencies (see docs/coverage.md for
how that venv was made).  The packages are measured from the extracted tree
(``--source``), which the tests import first because pytest runs from its
root.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Suite:
    name: str
    repo: str  # owner/name on GitHub
    commit: str
    paths: tuple[str, ...]  # what to extract from the repository
    source: str  # the package directory, relative to the tree
    tests: tuple[str, ...]  # pytest arguments, relative to the tree
    pythonpath: str = ""  # a src layout's import root, relative to the tree


SUITES = (
    Suite("pytorch-revgrad", "janfreyberg/pytorch-revgrad", "330efbe28c70172d152205c8211b37e8a7491392",
          ("src", "tests"), "src/pytorch_revgrad", ("tests",), pythonpath="src"),
    Suite("entmax", "deep-spin/entmax", "c2bec6d5e7d649cba7766c2172d89123ec2a6d70",
          ("entmax",), "entmax", ("entmax",)),
    Suite("torchdiffeq", "rtqichen/torchdiffeq", "657943acefa826ef04c025ebeb1ff5e9d60dc268",
          ("torchdiffeq", "tests"), "torchdiffeq", ("tests/gradient_tests.py",)),
    Suite("linear_operator", "cornellius-gp/linear_operator", "386cff780e1fc17317d3c1ce19604b5637736ca5",
          ("linear_operator", "test"), "linear_operator", ("test/functions",)),
)
ARMS = {
    "plain": ["-p", "no:autograd_lint_cov"],
    "plugin": ["--autograd-cov", "--autograd-cov-fail-unexercised", "--autograd-cov-json=report.json"],
}
BACKWARD_METHODS = ("backward", "vjp", "jvp")
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.MULTILINE)


def extract(suite: Suite, mirrors: Path, workdir: Path) -> Path:
    """The repository's ``paths`` at the pinned commit, in a fresh directory."""
    tree = workdir / suite.name
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    git_dir = mirrors / suite.repo.replace("/", "+") / "repo"
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", suite.commit, *suite.paths], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def run_arm(python: str, tree: Path, suite: Suite, arm: str) -> dict[str, object]:
    """One ``coverage run -m pytest`` of the suite; its wall time, exit code, last line and outcomes."""
    data_file = tree / f".coverage.{arm}"
    command = [
        python, "-m", "coverage", "run", f"--data-file={data_file}", f"--source={suite.source}",
        "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *ARMS[arm], *suite.tests,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_CORE_", "COVERAGE_"))}
    if suite.pythonpath:
        env["PYTHONPATH"] = str(tree / suite.pythonpath)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return {
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "returncode": result.returncode,
        "last_line": lines[-1] if lines else "",
        "outcomes": dict((test, outcome) for outcome, test in OUTCOME.findall(output)),
        "table": _table(result.stdout),
    }


def _table(stdout: str) -> list[str]:
    """The plugin's per-Function table and its summary lines."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if "autograd-cov: runs per Function" in line:
            table = []
            for line in lines[i + 1:]:
                if line.startswith("="):
                    break
                table.append(line)
            return table
    return []


def backward_statements(python: str, tree: Path, suite: Suite, arm: str) -> tuple[int, int]:
    """(statements run, statements) in the bodies of the backward/vjp/jvp methods of the package's Functions.

    Exclusion pragmas are ignored: a ``# pragma: no cover`` on a backward is
    what the plugin is meant to make unnecessary, so its lines count too.
    """
    script = f"""
import json, sys, coverage
from autograd_lint.model.discovery import discover_functions
cov = coverage.Coverage(data_file={str(tree / f'.coverage.{arm}')!r})
cov.set_option("report:exclude_lines", [])
cov.load()
ran = total = 0
for spec in discover_functions([{str(tree / suite.source)!r}]):
    for name in {BACKWARD_METHODS!r}:
        method = spec.methods.get(name)
        if method is None:
            continue
        _, statements, _, missing, _ = cov.analysis2(method.path)
        body = [n for n in statements if method.position.line < n <= method.last_line]
        total += len(body)
        ran += len([n for n in body if n not in missing])
print(json.dumps([ran, total]))
"""
    out = subprocess.run([python, "-c", script], cwd=tree, capture_output=True, text=True, check=True).stdout
    ran, total = json.loads(out.strip().splitlines()[-1])
    return ran, total


def exercised(tree: Path) -> str:
    """From the plugin's JSON report: Functions whose backward code ran, of those with a backward."""
    report = json.loads((tree / "report.json").read_text())
    with_backward = [f for f in report["functions"] if f["has_backward"] is not False]
    ran = [f for f in with_backward if f["backward_ran"]]
    return f"{len(ran)} of {len(with_backward)} Functions' backward code ran"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter of the measuring venv")
    parser.add_argument("--mirrors", type=Path, required=True, help="directory of the fetched mirrors (owner+name/repo)")
    parser.add_argument("--workdir", type=Path, required=True, help="where to extract the trees")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (one run of each arm per round)")
    parser.add_argument("--only", nargs="*", help="suite names to run (default: all)")
    args = parser.parse_args()
    version = subprocess.run(
        [args.python, "-c", "import torch, coverage, pytest; print(torch.__version__, coverage.__version__, pytest.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    print(f"torch, coverage, pytest: {version}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}")
    for suite in SUITES:
        if args.only and suite.name not in args.only:
            continue
        tree = extract(suite, args.mirrors, args.workdir)
        walls: dict[str, list[float]] = {"plain": [], "plugin": []}
        cpus: dict[str, list[float]] = {"plain": [], "plugin": []}
        last: dict[str, dict[str, object]] = {}
        for round_ in range(args.rounds):
            for arm in ("plain", "plugin") if round_ % 2 == 0 else ("plugin", "plain"):
                last[arm] = run_arm(args.python, tree, suite, arm)
                walls[arm].append(float(last[arm]["wall"]))  # type: ignore[arg-type]
                cpus[arm].append(float(last[arm]["cpu"]))  # type: ignore[arg-type]
        print(f"\n== {suite.name} ({suite.repo}@{suite.commit[:12]}), tests: {' '.join(suite.tests)}")
        for arm in ("plain", "plugin"):
            ran, total = backward_statements(args.python, tree, suite, arm)
            outcomes = last[arm]["outcomes"]
            counts = {o: list(outcomes.values()).count(o) for o in sorted(set(outcomes.values()))}  # type: ignore[union-attr]
            print(f"{arm:7} backward statements run {ran}/{total}; exit {last[arm]['returncode']}; tests {counts}; "
                  f"wall median {statistics.median(walls[arm]):.1f} s {[round(w, 1) for w in walls[arm]]}, "
                  f"cpu median {statistics.median(cpus[arm]):.1f} s")
        same = last["plain"]["outcomes"] == last["plugin"]["outcomes"]
        print(f"test outcomes identical in both arms: {same}")
        print(f"--autograd-cov-fail-unexercised: exit {last['plugin']['returncode']}, last line: {last['plugin']['last_line']}")
        print(f"report: {exercised(tree)}")
        for line in last["plugin"]["table"]:  # type: ignore[union-attr]
            print(f"  {line}")
        for metric, samples in (("wall", walls), ("cpu", cpus)):
            ratios = [b / a for a, b in zip(samples["plain"], samples["plugin"])]
            print(f"overhead plugin/plain per round, {metric} time: median {statistics.median(ratios):.3f} "
                  f"[{min(ratios):.3f}, {max(ratios):.3f}] over {args.rounds} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
