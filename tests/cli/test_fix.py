"""``autograd-lint check --fix / --unsafe-fixes / --diff``, run as users run it: a real subprocess."""

from __future__ import annotations

import json
import stat
import subprocess
import textwrap
from pathlib import Path

import libcst as cst
import other_user
import pytest

from autograd_lint.lint.fix import fix_file
from autograd_lint.rules.agl016_container_return import ContainerReturn
from autograd_lint.rules.base import Fixer
from autograd_lint.settings import Settings
from cli_process import run_cli

# AGL027 (safe fix), AGL021 (unsafe fix) and AGL001 (no fix).
SOURCE = textwrap.dedent(
    """
    import torch


    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_variables  # old API
            return grad * b


    def mul(a, b):
        return Mul.forward(None, a, b)
    """
).lstrip()
SAFE_FIXED = SOURCE.replace("ctx.saved_variables", "ctx.saved_tensors")
ALL_FIXED = SAFE_FIXED.replace("Mul.forward(None, a, b)", "Mul.apply(a, b)")
# Only fixable findings: AGL016 (safe).
FIXABLE = textwrap.dedent(
    """
    import torch


    class Neg(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return -x

        @staticmethod
        def backward(ctx, grad):
            return [-grad]
    """
).lstrip()
FIXABLE_FIXED = FIXABLE.replace("return [-grad]", "return (-grad,)")


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, timeout=120)


def test_fix_applies_safe_fixes_and_reports_what_remains(tmp_path: Path) -> None:
    path = tmp_path / "mul.py"
    path.write_text(SOURCE)
    result = check("--fix", "mul.py", cwd=tmp_path)
    assert path.read_text() == SAFE_FIXED
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[1] for line in lines[:2]] == ["AGL001", "AGL021"]
    assert lines[-1] == "Fixed 1 problem (2 remaining)."
    assert result.stderr == ""


def test_unsafe_fixes_only_with_unsafe_fixes(tmp_path: Path) -> None:
    path = tmp_path / "mul.py"
    path.write_text(SOURCE)
    check("--fix", "mul.py", cwd=tmp_path)
    assert "Mul.forward(None, a, b)" in path.read_text()
    result = check("--fix", "--unsafe-fixes", "mul.py", cwd=tmp_path)
    assert path.read_text() == ALL_FIXED
    assert result.returncode == 1  # AGL001 has no fix
    assert result.stdout.splitlines()[-1] == "Fixed 1 problem (1 remaining)."


def test_all_fixed_exits_0_and_a_second_fix_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "neg.py"
    path.write_text(FIXABLE)
    first = check("--fix", ".", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert path.read_text() == FIXABLE_FIXED
    assert first.stdout.splitlines()[-1] == "Fixed 1 problem (0 remaining)."
    written = path.stat().st_mtime_ns
    second = check("--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert second.returncode == 0
    assert second.stdout.splitlines()[-1] == "Fixed 0 problems (0 remaining)."
    assert path.read_text() == FIXABLE_FIXED
    assert path.stat().st_mtime_ns == written  # not even rewritten with the same text
    cst.parse_module(path.read_text())
    compile(path.read_text(), str(path), "exec")


def test_diff_prints_the_patch_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mul.py"
    path.write_text(SOURCE)
    result = check("--diff", "--unsafe-fixes", "mul.py", cwd=tmp_path)
    assert path.read_text() == SOURCE
    assert result.returncode == 1
    assert result.stdout.startswith("--- mul.py\n+++ mul.py\n@@ ")
    assert "-        a, b = ctx.saved_variables  # old API\n" in result.stdout
    assert "+        a, b = ctx.saved_tensors  # old API\n" in result.stdout
    assert "+    return Mul.apply(a, b)\n" in result.stdout
    assert "Would fix 2 problems (1 remaining)." in result.stderr
    # No temporary file left (the result cache is check's own, in .autograd_lint_cache/).
    assert [p.name for p in tmp_path.iterdir() if p.name != ".autograd_lint_cache"] == ["mul.py"]


def test_diff_with_nothing_to_fix_exits_0(tmp_path: Path) -> None:
    (tmp_path / "neg.py").write_text(FIXABLE_FIXED)
    result = check("--diff", ".", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == ""


def test_file_with_a_syntax_error_is_never_written(tmp_path: Path) -> None:
    broken = SOURCE.replace("return a * b", "return a * (b")
    (tmp_path / "broken.py").write_text(broken)
    (tmp_path / "neg.py").write_text(FIXABLE)
    for args in (("--fix", "--unsafe-fixes", "."), ("--fix", "--unsafe-fixes", "broken.py", "neg.py")):
        (tmp_path / "neg.py").write_text(FIXABLE)
        result = check(*args, cwd=tmp_path)
        assert (tmp_path / "broken.py").read_text() == broken
        assert (tmp_path / "neg.py").read_text() == FIXABLE_FIXED  # the other file is still fixed
        assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".autograd_lint_cache") == ["broken.py", "neg.py"]
        if "broken.py" in args:
            assert result.returncode == 2
            assert "broken.py" in result.stderr and "syntax error" in result.stderr


def test_fix_keeps_mode_line_endings_and_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "neg.py"
    path.write_bytes(b"\xef\xbb\xbf" + FIXABLE.replace("\n", "\r\n").encode())
    path.chmod(0o754)
    result = check("--fix", "neg.py", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXABLE_FIXED.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o754


def test_fix_through_a_symlink_writes_the_target(tmp_path: Path) -> None:
    target = tmp_path / "real.py"
    target.write_text(FIXABLE)
    (tmp_path / "link.py").symlink_to(target)
    result = check("--fix", "link.py", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "link.py").is_symlink()
    assert target.read_text() == FIXABLE_FIXED


def test_noqa_findings_are_not_fixed(tmp_path: Path) -> None:
    path = tmp_path / "neg.py"
    source = FIXABLE.replace("return [-grad]", "return [-grad]  # noqa: AGL016")
    path.write_text(source)
    result = check("--fix", "neg.py", cwd=tmp_path)
    assert result.returncode == 0
    assert path.read_text() == source


def test_fix_with_json_output_keeps_stdout_json(tmp_path: Path) -> None:
    path = tmp_path / "mul.py"
    path.write_text(SOURCE)
    result = check("--fix", "--output-format", "json", "mul.py", cwd=tmp_path)
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert sorted(d["code"] for d in document["diagnostics"]) == ["AGL001", "AGL021"]
    assert "Fixed 1 problem (2 remaining)." in result.stderr


def test_unwritable_directory_is_an_error_and_leaves_the_file() -> None:
    prefix = other_user.as_nobody()
    with other_user.shared_folder() as root:
        directory = root / "locked"
        directory.mkdir()
        path = directory / "neg.py"
        path.write_text(FIXABLE)
        other_user.hand_over(prefix, root, directory, path)
        directory.chmod(0o555)
        try:
            result = other_user.autograd_lint(prefix, "check", "--fix", "locked/neg.py", cwd=root)
        finally:
            directory.chmod(0o755)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "locked/neg.py" in result.stderr and "cannot be written" in result.stderr
        assert path.read_text() == FIXABLE
        assert sorted(p.name for p in directory.iterdir()) == ["neg.py"]  # no temporary file left


class _BreakingFixer(Fixer):
    """Gives code that libcst prints but Python rejects (nonlocal at module level)."""

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        statement = cst.SimpleStatementLine([cst.Nonlocal([cst.NameItem(cst.Name("x"))])])
        return updated_node.with_changes(body=[*updated_node.body, statement])


def test_a_fix_that_breaks_the_code_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "neg.py"
    path.write_text(FIXABLE)
    monkeypatch.setattr(ContainerReturn, "fixer", _BreakingFixer)
    result = fix_file(str(path), {}, Settings(select=("AGL016",)), unsafe=False, write=True)
    assert not result.changed and result.fixed == 0
    assert [e.problem for e in result.errors] == [
        "the AGL016 fix gave code that does not parse "
        "(nonlocal declaration not allowed at module level (neg.py, line 12))"
    ]
    assert path.read_text() == FIXABLE
    assert [p.name for p in tmp_path.iterdir()] == ["neg.py"]


class _CrashingFixer(Fixer):
    """A fixer with a bug."""

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        raise KeyError("bug")


def test_a_fix_that_crashes_is_reported_and_the_file_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "neg.py"
    path.write_text(FIXABLE)
    monkeypatch.setattr(ContainerReturn, "fixer", _CrashingFixer)
    result = fix_file(str(path), {}, Settings(select=("AGL016",)), unsafe=False, write=True)
    assert [e.problem for e in result.errors] == [
        "internal error while fixing AGL016, please report it: KeyError: 'bug'"
    ]
    assert [d.code for d in result.remaining] == ["AGL016"]
    assert path.read_text() == FIXABLE


def test_stdin_fix_that_cannot_be_written_names_the_problem_and_gives_the_buffer_back(tmp_path: Path) -> None:
    # A backslash line at the start of a block: Python compiles it and the file is analysed,
    # but libcst rejects it, so no fix can be written from it.  An editor replaces its buffer
    # with stdout: it must get its own text back, and stderr must say why nothing changed.
    text = SOURCE.replace("def backward(ctx, grad):\n", "def backward(ctx, grad):\n        \\\n")
    compile(text, "ops.py", "exec")
    result = run_cli(["check", "--fix", "-", "--stdin-filename", "ops.py"], cwd=tmp_path, input=text, timeout=120)
    assert result.returncode == 2
    assert result.stdout == text
    problems = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(problems) == 1 and problems[0].startswith("error: ops.py: not fixed: libcst cannot parse it ("), result.stderr
