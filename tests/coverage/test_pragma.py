"""``autograd-lint pragma``: libcst edits that add and remove coverage markers, end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import other_user
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


def test_an_undecodable_byte_in_a_comment_is_named_and_the_file_left_as_it_is(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Python imports such a file (the byte is in a comment), but a rewrite would replace the byte.
    latin = SOURCE.replace("import torch", "import torch  # caf\xe9", 1).encode("latin-1")
    (project / "ops.py").write_bytes(latin)
    offset = latin.index(b"\xe9")
    assert main(["pragma", str(project)]) == 2
    assert capsys.readouterr().err == (f"error: {project / 'ops.py'}:1: not rewritten: byte 0xe9 at offset "
                                       f"{offset} is not utf-8 (Python skips it in a comment)\n")
    assert (project / "ops.py").read_bytes() == latin


def test_print_config_edits_nothing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pragma", "--print-config", str(project)]) == 0
    assert (project / "ops.py").read_text() == SOURCE
    out = capsys.readouterr().out
    assert out.endswith('[tool.coverage.report]\nexclude_also = [\n    "def backward\\\\(",\n'
                        '    "def jvp\\\\(",\n    "def vjp\\\\(",\n]\n')


def test_print_config_with_an_unparsable_file_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The config is still printed for the files that parse; the bad file is named, and the exit code says so."""
    (project / "broken.py").write_text("import torch\n\nclass Bad(torch.autograd.Function):\n    def backward(ctx, g)\n")
    assert main(["pragma", "--print-config", str(project)]) == 2
    captured = capsys.readouterr()
    assert '"def backward\\\\(",' in captured.out
    (error,) = captured.err.splitlines()
    assert error.startswith(str(project / "broken.py"))


def test_only_unexercised_follows_the_report(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ran = {"forward": {"eager": {"main": 1}}, "jvp": {"eager": {"main": 1}}}
    report = {
        "version": 2,
        "root": "/somewhere/else",
        "functions": [
            # Relative to the root the report was made in: matches ops.py here.
            {"kind": "autograd.Function", "path": "ops.py", "qualname": "Scale", "line": 4, "has_backward": True,
             "backward_ran": False, "backward_defined_in": None, "counts": ran, "code_counts": ran},
            # Shift is not in the report: unknown, so left alone.
        ],
    }
    (project / "report.json").write_text(json.dumps(report))
    assert main(["pragma", "--only-unexercised", str(project / "report.json"), str(project / "ops.py")]) == 0
    text = (project / "ops.py").read_text()
    assert text.count(MARKER) == 1
    assert f"def backward(ctx, grad):  # noqa: D102  {MARKER}" in text
    assert f"{project / 'report.json'}: 1 of 1 entries match a Function here; 1 methods never ran" in (
        capsys.readouterr().out
    )


def test_only_unexercised_leaves_a_backward_whose_lines_ran_in_another_process(project: Path) -> None:
    """No counter saw Shift's vjp run (it ran in a multiprocessing child), but coverage saw its lines:
    it ran, so it is not marked; Scale's backward, no count and no line, is."""
    ran = {"forward": {"eager": {"main": 1}}, "jvp": {"eager": {"main": 1}}}
    lines = {"path": "ops.py", "line": 18, "missing": []}
    report = {
        "version": 2,
        "root": "/somewhere/else",
        "functions": [
            {"kind": "autograd.Function", "path": "ops.py", "qualname": "Scale", "line": 4, "has_backward": True,
             "backward_ran": False, "backward_defined_in": None, "counts": ran, "code_counts": ran,
             "lines": {"backward": {**lines, "qualname": "Scale.backward", "line": 9, "executed": []}}},
            {"kind": "autograd.Function", "path": "ops.py", "qualname": "Shift", "line": 15, "has_backward": True,
             "backward_ran": True, "backward_defined_in": None, "counts": {}, "code_counts": {},
             "lines": {"backward": {**lines, "qualname": "Shift.vjp", "executed": [23]}}},
        ],
    }
    (project / "report.json").write_text(json.dumps(report))
    assert main(["pragma", "--only-unexercised", str(project / "report.json"), str(project / "ops.py")]) == 0
    text = (project / "ops.py").read_text()
    assert text.count(MARKER) == 1
    assert f"def backward(ctx, grad):  # noqa: D102  {MARKER}" in text


def test_only_unexercised_marks_a_jvp_that_never_ran_beside_a_backward_whose_lines_ran(project: Path) -> None:
    """Lines of the backward that ran say nothing of the jvp: Scale's jvp, never counted, is marked."""
    ran = {"forward": {"eager": {"main": 1}}}
    report = {
        "version": 2,
        "root": "/somewhere/else",
        "functions": [
            {"kind": "autograd.Function", "path": "ops.py", "qualname": "Scale", "line": 4, "has_backward": True,
             "backward_ran": True, "backward_defined_in": None, "counts": ran, "code_counts": ran,
             "lines": {"backward": {"path": "ops.py", "qualname": "Scale.backward", "line": 10, "missing": [],
                                    "executed": [11]}}},
        ],
    }
    (project / "report.json").write_text(json.dumps(report))
    assert main(["pragma", "--only-unexercised", str(project / "report.json"), str(project / "ops.py")]) == 0
    text = (project / "ops.py").read_text()
    assert text.count(MARKER) == 1
    assert f"def jvp(ctx, tangent): return tangent * 2  {MARKER}" in text


def test_a_report_made_for_another_tree_exits_2_and_edits_nothing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = {"forward": {"eager": {"main": 1}}}
    report = {
        "version": 2,
        "root": "/somewhere/else",
        "functions": [
            {"kind": "autograd.Function", "path": "other/ops.py", "qualname": "Scale", "line": 4, "has_backward": True,
             "backward_ran": False, "backward_defined_in": None, "counts": ran, "code_counts": ran},
        ],
    }
    (project / "report.json").write_text(json.dumps(report))
    assert main(["pragma", "--only-unexercised", str(project / "report.json"), str(project / "ops.py")]) == 2
    assert "no entry matches a Function under" in capsys.readouterr().err
    assert (project / "ops.py").read_text() == SOURCE


def test_a_bad_configuration_is_one_line_and_exit_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text("[tool.autograd-lint]\nexclude = [1]\n")
    assert main(["pragma", str(project)]) == 2
    (error,) = capsys.readouterr().err.splitlines()
    assert error.startswith("error: ") and "exclude: expected a list of strings" in error
    assert (project / "ops.py").read_text() == SOURCE


def test_a_file_that_cannot_be_written_is_named_and_the_rest_is_marked() -> None:
    """As nobody (root writes anywhere): a read-only folder's file is one error line, exit 2,
    left as it was; the file beside it is still marked."""
    prefix = other_user.as_nobody()
    with other_user.shared_folder() as root:
        locked = root / "locked"
        locked.mkdir()
        (locked / "ops.py").write_text(SOURCE)
        (root / "free.py").write_text(SOURCE)
        other_user.hand_over(prefix, root, locked, locked / "ops.py", root / "free.py")
        locked.chmod(0o555)
        try:
            result = other_user.autograd_lint(prefix, "pragma", ".", cwd=root)
        finally:
            locked.chmod(0o755)
        assert result.returncode == 2, result.stdout + result.stderr
        (error,) = result.stderr.splitlines()
        assert "locked/ops.py" in error and "cannot be written" in error
        assert (locked / "ops.py").read_text() == SOURCE
        assert (root / "free.py").read_text() == MARKED


def test_a_line_that_already_carries_a_pragma_is_left_alone(project: Path) -> None:
    text = SOURCE.replace("def backward(ctx, grad):  # noqa: D102", "def backward(ctx, grad):  # pragma: no cover")
    (project / "ops.py").write_text(text)
    assert main(["pragma", str(project)]) == 0
    marked = (project / "ops.py").read_text()
    assert "def backward(ctx, grad):  # pragma: no cover\n" in marked
    assert marked.count(MARKER) == 2  # jvp and vjp


def test_a_report_of_the_old_format_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "report.json").write_text(json.dumps({"version": 1, "functions": []}))
    assert main(["pragma", "--only-unexercised", str(project / "report.json"), str(project)]) == 2
    assert "not an autograd-cov report of version 2" in capsys.readouterr().err


def test_unreadable_report_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pragma", "--only-unexercised", str(project / "missing.json"), str(project)]) == 2
    assert capsys.readouterr().err == f"error: {project / 'missing.json'}: cannot be read (No such file or directory)\n"


def test_coverage_excludes_the_marked_methods(project: Path) -> None:
    pytest.importorskip("coverage")
    main(["pragma", str(project)])
    script = "import coverage, sys; print(sorted(coverage.Coverage().analysis2(sys.argv[1])[2]))"
    out = subprocess.run(
        [sys.executable, "-c", script, str(project / "ops.py")], capture_output=True, text=True, check=True
    ).stdout
    # backward (9-11), jvp (13-14) and vjp (22-27), decorators included.
    assert out.strip() == str([9, 10, 11, 13, 14, 22, 23, 24, 25, 26, 27])
