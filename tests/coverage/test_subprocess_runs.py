"""Real coverage.py, pytest-cov and xdist runs over the sample project, exact line sets asserted.

The runs are session fixtures (``conftest.py``) shared by every assertion
about them: torch.compile is slow, so every scenario is compiled once per run.
"""

from __future__ import annotations

import importlib.util

import pytest

from conftest import Run, marked

# torch only ever runs in the subprocesses.
pytestmark = [
    pytest.mark.slow,
    # One worker runs them all (CI: --dist loadgroup): a session fixture runs once per
    # worker, and each is a compiled subprocess run of 10-40 s.
    pytest.mark.xdist_group("sample_project_runs"),
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("torch", "pytest_cov", "xdist")),
        reason="needs torch, pytest-cov and pytest-xdist",
    ),
]

THREAD_TAGS = ("raw-bwd", "deep-bottom", "tensor-hook", "module-hook")
COMPILE_FILE = "compilelib.py"


def test_disabled_plugin_leaves_coverage_numbers_unchanged(off: Run, idle: Run) -> None:
    off_data, idle_data = off.data(), idle.data()
    assert {f.replace(str(off.root), "") for f in off_data.measured_files()} == {
        f.replace(str(idle.root), "") for f in idle_data.measured_files()
    }
    for name in ("threadlib.py", "compilelib.py", "test_threads.py", "test_compile.py"):
        assert off.lines(name) == idle.lines(name), name
    assert "autograd-cov" not in idle.output


def test_without_plugin_engine_thread_code_is_missed(off: Run) -> None:
    """The problem itself, so that the other tests prove a change."""
    for tag in THREAD_TAGS:
        assert not marked("threadlib.py", tag) & off.lines("threadlib.py"), tag
    for tag in ("eager-fwd-bwd-fwd", "aot-fwd-bwd-bwd"):
        assert not marked(COMPILE_FILE, tag) & off.lines(COMPILE_FILE), tag


@pytest.mark.parametrize("tag", THREAD_TAGS)
def test_engine_thread_code_is_covered(lines_on: Run, with_pytest_cov: Run, tag: str) -> None:
    for run in (lines_on, with_pytest_cov):
        assert marked("threadlib.py", tag) <= run.lines("threadlib.py"), run.output


def test_thread_bridge_adds_exactly_the_engine_thread_lines(off: Run, lines_on: Run) -> None:
    added = lines_on.lines("threadlib.py") - off.lines("threadlib.py")
    assert added == set().union(*(marked("threadlib.py", tag) for tag in THREAD_TAGS))
    # The forward a raw thread calls itself is no engine callback: still missed.
    assert not marked("threadlib.py", "raw-fwd") & lines_on.lines("threadlib.py")
    assert not marked("threadlib.py", "never-bwd") & lines_on.lines("threadlib.py")


def test_compiled_lines_equal_compile_disabled_lines(lines_on: Run, branch_truth: Run) -> None:
    assert lines_on.lines(COMPILE_FILE) == branch_truth.lines(COMPILE_FILE)


def test_compiled_arcs_equal_compile_disabled_arcs(branch_on: Run, branch_truth: Run) -> None:
    truth = branch_truth.arcs(COMPILE_FILE)
    data = branch_on.data()
    assert data.has_arcs()
    data.set_query_contexts([r"\|torch\.compile$"])
    evidence = set(data.arcs(str(branch_on.root / COMPILE_FILE)) or ())
    assert evidence and evidence <= truth
    # coverage itself records the frame Dynamo rewrites as running on its
    # ``def`` line only: the one difference from the eager truth.
    (entry,) = marked(COMPILE_FILE, "compiled-entry")
    assert branch_on.arcs(COMPILE_FILE) - truth == {(-entry, entry), (entry, -entry)}
    assert truth <= branch_on.arcs(COMPILE_FILE)


@pytest.mark.parametrize("backend", ["eager", "aot"])
def test_forward_only_leaves_backward_uncovered(lines_on: Run, branch_on: Run, backend: str) -> None:
    for run in (lines_on, branch_on):
        covered = run.lines(COMPILE_FILE)
        assert marked(COMPILE_FILE, f"{backend}-fwd-only-fwd") <= covered
        assert not marked(COMPILE_FILE, f"{backend}-fwd-only-bwd") & covered
        assert marked(COMPILE_FILE, f"{backend}-fwd-bwd-bwd") <= covered


def test_compile_evidence_has_its_own_context(with_pytest_cov: Run) -> None:
    data = with_pytest_cov.data()
    path = str(with_pytest_cov.root / COMPILE_FILE)
    contexts = data.contexts_by_lineno(path)
    (backward_line,) = sorted(marked(COMPILE_FILE, "aot-fwd-bwd-bwd"))[-1:]
    assert contexts[backward_line] == ["test_compile.py::test_compiled[aot_eager-AotFwdBwd-True]|torch.compile"]
    (forward_line,) = sorted(marked(COMPILE_FILE, "eager-fwd-only-fwd"))[-1:]
    assert contexts[forward_line] == ["test_compile.py::test_compiled[eager-EagerFwdOnly-False]|torch.compile"]
    # Engine-thread lines land in the running test's own context.
    thread_contexts = data.contexts_by_lineno(str(with_pytest_cov.root / "threadlib.py"))
    for line in marked("threadlib.py", "raw-bwd"):
        assert thread_contexts[line] == ["test_threads.py::test_backward_on_raw_thread|run"]


def test_pytest_cov_branch_numbers_match_coverage_run(with_pytest_cov: Run, branch_on: Run) -> None:
    for name in ("threadlib.py", COMPILE_FILE):
        assert with_pytest_cov.lines(name) == branch_on.lines(name), name
        assert with_pytest_cov.arcs(name) == branch_on.arcs(name), name


def test_xdist_workers_measure_the_same(xdist: Run, branch_on: Run) -> None:
    for name in ("threadlib.py", COMPILE_FILE):
        assert xdist.lines(name) == branch_on.lines(name), name
        assert xdist.arcs(name) == branch_on.arcs(name), name
    # The controller prints counts merged from both workers.
    assert "threadlib.py:19::Deep" in xdist.output
    assert "71" in [line.split()[1] for line in xdist.output.splitlines() if "::Deep" in line]
