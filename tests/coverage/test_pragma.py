"""``autograd-lint pragma``: libcst edits that add and remove coverage markers, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_lint.cli import main
from autograd_lint.coverage.pragma import MARKER

SOURCE = '''\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        return grad * 2

    @staticmethod
    def jvp(ctx, tangent): return tangent * 2


class Shift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + 1

    @staticmethod
    def vjp(
        ctx,
        grad,
    ):
        return grad


class NotAFunction:
    def backward(self):
        return None
'''

MARKED = '''\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):  # noqa: D102  {m}
        return grad * 2

    @staticmethod
    def jvp(ctx, tangent): return tangent * 2  {m}


class Shift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + 1

    @staticmethod
    def vjp(
        ctx,
        grad,
    ):  {m}
        return grad


class NotAFunction:
    def backward(self):
        return None
'''.format(m=MARKER)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "ops.py").write_text(SOURCE)
    return tmp_path


def test_adds_markers_to_backward_vjp_and_jvp_only(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pragma", str(project)]) == 0
    assert (project / "ops.py").read_text() == MARKED
    assert capsys.readouterr().out == f"changed: {project / 'ops.py'}\n"


def test_is_idempotent_and_check_reports_pending_changes(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pragma", "--check", str(project)]) == 1
    assert (project / "ops.py").read_text() == SOURCE
    assert main(["pragma", str(project)]) == 0
    capsys.readouterr()
    assert main(["pragma", str(project)]) == 0
    assert main(["pragma", "--check", str(project)]) == 0
    assert capsys.readouterr().out == ""
    assert (project / "ops.py").read_text() == MARKED


def test_remove_restores_the_file(project: Path) -> None:
    assert main(["pragma", str(project)]) == 0
    assert main(["pragma", "--check", "--remove", str(project)]) == 1
    assert main(["pragma", "--remove", str(project)]) == 0
    assert (project / "ops.py").read_text() == SOURCE
    assert main(["pragma", "--remove", "--check", str(project)]) == 0


def test_syntax_error_is_named_and_the_rest_is_processed(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = "import torch\n\nclass Bad(torch.autograd.Function):\n    def backward(ctx, g)\n        return g\n"
    (project / "broken.py").write_text(broken)
    assert main(["pragma", str(project)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(str(project / "broken.py")), err
    assert (project / "broken.py").read_text() == broken
    assert (project / "ops.py").read_text() == MARKED


def test_print_config_edits_nothing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pragma", "--print-config", str(project)]) == 0
    assert (project / "ops.py").read_text() == SOURCE
    out = capsys.readouterr().out
    assert out.endswith('[tool.coverage.report]\nexclude_also = [\n    "def backward\\\\(",\n'
                        '    "def jvp\\\\(",\n    "def vjp\\\\(",\n]\n')


def test_only_unexercised_follows_the_report(project: Path) -> None:
    ops = os.path.realpath(project / "ops.py")
    ran = {"forward": {"eager": {"main": 1}}, "jvp": {"eager": {"main": 1}}}
    report = {
        "version": 1,
        "functions": [
            {"path": ops, "qualname": "Scale", "line": 4, "has_backward": True, "backward_ran": False, "counts": ran},
            # Shift is not in the report: unknown, so left alone.
        ],
    }
    (project / "report.json").write_text(json.dumps(report))
    assert main(["pragma", "--only-unexercised", str(project / "report.json"), str(project / "ops.py")]) == 0
    text = (project / "ops.py").read_text()
    assert text.count(MARKER) == 1
    assert f"def backward(ctx, grad):  # noqa: D102  {MARKER}" in text


def test_unreadable_report_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pragma", "--only-unexercised", str(project / "missing.json"), str(project)]) == 2
    assert "cannot read the report" in capsys.readouterr().err


def test_coverage_excludes_the_marked_methods(project: Path) -> None:
    pytest.importorskip("coverage")
    main(["pragma", str(project)])
    script = "import coverage, sys; print(sorted(coverage.Coverage().analysis2(sys.argv[1])[2]))"
    out = subprocess.run(
        [sys.executable, "-c", script, str(project / "ops.py")], capture_output=True, text=True, check=True
    ).stdout
    # backward (9-11), jvp (13-14) and vjp (22-27), decorators included.
    assert out.strip() == str([9, 10, 11, 13, 14, 22, 23, 24, 25, 26, 27])
