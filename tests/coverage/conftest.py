"""Shared helpers: copy the sample project, run real coverage.py on it, read what it measured."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SAMPLES = Path(__file__).parent / "samples"
GRAPH_BREAKS = Path(__file__).parent / "graph_breaks"
CUSTOM_OPS = Path(__file__).parent / "custom_ops"
# The sample projects are run in subprocesses, never collected here.
collect_ignore = ["samples", "graph_breaks", "custom_ops", "cuda"]


@dataclass
class Run:
    """One finished subprocess run over a copy of the sample project."""

    root: Path
    output: str
    returncode: int

    def data(self, name: str = ".coverage") -> "coverage.CoverageData":  # noqa: F821
        import coverage

        data = coverage.CoverageData(basename=str(self.root / name))
        data.read()
        return data

    def lines(self, filename: str) -> set[int]:
        return set(self.data().lines(str(self.root / filename)) or ())

    def arcs(self, filename: str) -> set[tuple[int, int]]:
        return set(self.data().arcs(str(self.root / filename)) or ())


def marked(filename: str, tag: str, project: Path = SAMPLES) -> set[int]:
    """The lines of a sample file that end in ``# mark: <tag>``."""
    text = (project / filename).read_text().splitlines()
    return {n for n, line in enumerate(text, 1) if re.search(rf"# mark: {re.escape(tag)}$", line)}


def run_in_copy(
    tmp_path_factory: pytest.TempPathFactory, argv: list[str], project: Path = SAMPLES, **env: str
) -> Run:
    """Copy a sample project (default: ``samples``) to a fresh directory and run ``python -m <argv>`` there."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(project, root, dirs_exist_ok=True)
    environ = {**os.environ, **env}
    # Outer coverage (when this suite itself is measured) must not leak in.
    for name in ("COVERAGE_PROCESS_START", "COV_CORE_SOURCE", "COV_CORE_CONFIG", "COV_CORE_DATAFILE"):
        environ.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=root,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Run(root, result.stdout + result.stderr, result.returncode)


def _ok(run: Run) -> Run:
    assert run.returncode == 0, run.output
    return run


@pytest.fixture(scope="session")
def off(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """coverage's own numbers: our plugin not even loaded."""
    return _ok(run_in_copy(tmp_path_factory, ["coverage", "run", "-m", "pytest", "-p", "no:autograd_lint_cov"]))


@pytest.fixture(scope="session")
def idle(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Our plugin loaded (entry point) but not enabled."""
    return _ok(run_in_copy(tmp_path_factory, ["coverage", "run", "-m", "pytest"]))


@pytest.fixture(scope="session")
def lines_on(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _ok(
        run_in_copy(
            tmp_path_factory,
            ["coverage", "run", "-m", "pytest", "--autograd-cov", "--autograd-cov-json=report.json"],
        )
    )


@pytest.fixture(scope="session")
def branch_on(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _ok(run_in_copy(tmp_path_factory, ["coverage", "run", "--branch", "-m", "pytest", "--autograd-cov"]))


@pytest.fixture(scope="session")
def branch_truth(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The same tests with compilation turned off: what really runs eagerly."""
    return _ok(
        run_in_copy(
            tmp_path_factory,
            ["coverage", "run", "--branch", "-m", "pytest", "test_compile.py"],
            TORCH_COMPILE_DISABLE="1",
        )
    )


@pytest.fixture(scope="session")
def with_pytest_cov(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _ok(
        run_in_copy(
            tmp_path_factory,
            ["pytest", "--cov=.", "--cov-branch", "--cov-context=test", "--autograd-cov"],
        )
    )


@pytest.fixture(scope="session")
def xdist(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _ok(run_in_copy(tmp_path_factory, ["pytest", "--cov=.", "--cov-branch", "-n", "2", "--autograd-cov"]))
