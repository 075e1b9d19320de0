"""A backward that runs in a ``multiprocessing`` child counts as run (issue 22, item 11a).

The child has no counters of the plugin, but coverage measures it
(``[run] concurrency = multiprocessing``) and saves its lines in a parallel
data file when it ends.  The per-Function report reads those files, with
the backward's line range from the analyser, so the gate no longer fails a
suite whose backward ran.  Real coverage.py, real pytest, in a subprocess.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

# Imported here, not in the test: pytester restores sys.modules after each test, and coverage's
# C tracer cannot be imported a second time into one process.
coverage = pytest.importorskip("coverage")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None, reason="needs torch"),
]

OPS = """\
import torch


class InChild(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        doubled = grad * 2
        return doubled


class NeverRan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        tripled = grad * 3
        return tripled
"""

TEST = """\
import multiprocessing

import torch
from ops import InChild, NeverRan


def work(_):
    x = torch.ones(2, requires_grad=True)
    InChild.apply(x).sum().backward()
    return x.grad.tolist()


def test_backward_in_a_child():
    pool = multiprocessing.get_context({method!r}).Pool(1)
    try:
        assert pool.map(work, [0]) == [[2.0, 2.0]]
    finally:
        pool.close()
        pool.join()


def test_forward_only_here():
    assert NeverRan.apply(torch.ones(1)).tolist() == [3.0]
"""

# ops.py's backward bodies
IN_CHILD_BODY = [11, 12]
NEVER_RAN_BODY = [22, 23]


# (start method, how coverage runs): coverage.py itself, then pytest-cov, which combines the data itself.
RUNS = [("spawn", "coverage run"), ("fork", "coverage run"), ("spawn", "pytest-cov")]


@pytest.mark.parametrize(("method", "runner"), RUNS)
def test_backward_run_in_a_multiprocessing_child_is_exercised(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, method: str, runner: str
) -> None:
    for name in list(os.environ):
        if name.startswith(("COV_CORE_", "COVERAGE_")):  # an outer coverage must not leak in
            monkeypatch.delenv(name)
    pytester.makepyfile(ops=OPS, test_ops=TEST.format(method=method))
    (pytester.path / ".coveragerc").write_text("[run]\nconcurrency = multiprocessing\nparallel = true\n")
    # A parallel data file left by an earlier run, never combined, claiming NeverRan's backward
    # ran: not this run's data, so it must not count.
    stale = coverage.CoverageData(basename=str(pytester.path / ".coverage"), suffix="earlier.1.x")
    stale.add_lines({str(pytester.path / "ops.py"): NEVER_RAN_BODY})
    stale.write()
    if runner == "pytest-cov":
        pytest.importorskip("pytest_cov")
    command = ["coverage", "run", "-m", "pytest"] if runner == "coverage run" else ["pytest", "--cov", "--cov-report="]
    result = pytester.run(
        sys.executable, "-m", *command, "-p", "no:cacheprovider",
        "--autograd-cov", "--autograd-cov-no-compile", "--autograd-cov-fail-unexercised",
        "--autograd-cov-json=report.json", "test_ops.py", timeout=300,
    )
    output = result.stdout.str() + result.stderr.str()
    assert "2 passed" in output, output
    # The gate names the Function whose backward never ran anywhere, and only that one.
    assert result.stdout.str().rstrip().splitlines()[-1] == (
        "FAIL: autograd-cov: --autograd-cov-fail-unexercised: backward code never ran: NeverRan"
    ), output
    assert result.ret == 1
    rows = {f["qualname"]: f for f in json.loads((pytester.path / "report.json").read_text())["functions"]}
    in_child, never = rows["InChild"], rows["NeverRan"]
    # No counter ran in the child: only coverage's lines say the backward ran.
    assert in_child["code_counts"].get("backward") is None
    assert in_child["backward_ran"] is True
    assert in_child["lines"]["backward"] == {
        "path": "ops.py", "qualname": "InChild.backward", "line": 10, "executed": IN_CHILD_BODY, "missing": [],
    }
    assert never["backward_ran"] is False
    assert never["lines"]["backward"]["executed"] == []
    assert never["lines"]["backward"]["missing"] == NEVER_RAN_BODY
    assert "0 (lines ran)" in next(line for line in output.splitlines() if "::InChild" in line)
    # What the report read is what `coverage combine` joins (pytest-cov joined it already): the
    # child's lines are in the data.
    (pytester.path / ".coverage.earlier.1.x").unlink(missing_ok=True)  # pytest-cov erased it at start
    if runner == "coverage run":
        coverage.Coverage(data_file=str(pytester.path / ".coverage")).combine()
    combined = coverage.CoverageData(basename=str(pytester.path / ".coverage"))
    combined.read()
    assert set(IN_CHILD_BODY) <= set(combined.lines(str(pytester.path / "ops.py")) or ())
