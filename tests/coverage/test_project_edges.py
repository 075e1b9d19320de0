"""Issue 22, item 11: the coverage report on projects shaped otherwise than the samples.

An installed package named by ``--cov=<name>`` or ``source_pkgs``, a project
configuration the discovery worker must read, and autograd-lint's own modules
kept out of the user's coverage data.  Real coverage.py throughout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

coverage = pytest.importorskip("coverage")

FUNCTION = textwrap.dedent(
    """\
    import torch


    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2
    """
)


def test_the_discovery_worker_reads_the_project_configuration(tmp_path: Path) -> None:
    from autograd_lint.coverage.discovery_worker import discover

    (tmp_path / "pyproject.toml").write_text('[tool.autograd-lint]\nextra-function-bases = ["extlib.Base"]\n')
    (tmp_path / "ops.py").write_text(
        "from extlib import Base\n\n\nclass Op(Base):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        return x\n\n    @staticmethod\n    def backward(ctx, grad):\n        return grad\n"
    )
    found = discover([str(tmp_path)])
    assert [(f.qualname, f.has_backward) for f in found] == [("Op", True)]


@pytest.mark.parametrize("option", ["source", "source_pkgs"])
def test_an_installed_package_named_to_coverage_is_where_functions_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    from autograd_lint.coverage.pytest_plugin import _coverage_source

    installed = tmp_path / "site"
    (installed / "hostilepkg" / "sub").mkdir(parents=True)
    (installed / "hostilepkg" / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    (installed / "hostilepkg" / "sub" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(installed))
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cov = coverage.Coverage(data_file=None, **{option: ["hostilepkg", "hostilepkg.sub", "missing_pkg"]})
    cov.start()
    try:
        roots = _coverage_source()
    finally:
        cov.stop()
    assert roots == [str(installed / "hostilepkg"), str(installed / "hostilepkg" / "sub")]


def test_autograd_lint_s_own_modules_stay_out_of_the_user_s_coverage(tmp_path: Path) -> None:
    """With the coverage.py plugin configured (docs/coverage.md), none of autograd-lint's modules is measured,
    though the pytest plugin imports the analyser (model/*, files.py, gentests/*) during the run."""
    (tmp_path / "pyproject.toml").write_text('[tool.coverage.run]\nplugins = ["autograd_lint.coverage"]\n')
    (tmp_path / "ops.py").write_text(FUNCTION)
    (tmp_path / "test_ops.py").write_text(
        "import torch\nfrom ops import Double\n\n\ndef test_double():\n"
        "    x = torch.ones(2, requires_grad=True)\n    Double.apply(x).sum().backward()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_CORE_", "COVERAGE_"))}
    result = subprocess.run(
        [sys.executable, "-m", "coverage", "run", "-m", "pytest", "-p", "no:cacheprovider", "--autograd-cov",
         "--autograd-cov-no-compile", "test_ops.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = coverage.CoverageData(basename=str(tmp_path / ".coverage"))
    data.read()
    package = os.path.dirname(os.path.realpath(__import__("autograd_lint").__file__))
    measured = {os.path.realpath(path) for path in data.measured_files()}
    assert str(tmp_path / "ops.py") in measured
    assert not [path for path in measured if path.startswith(package + os.sep)]
