"""The conventions people bring from ruff, through the real command: ``--force-exclude``,
``--exit-non-zero-on-fix``, ``--output-file``, ``-q``/``--silent``, ``extend`` and ``--watch``."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from cli_process import run_cli

BUGGY = textwrap.dedent(
    """
    import torch

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * b
    """
).lstrip()
CLEAN = BUGGY.replace("return grad * b\n", "return grad * b, grad * a\n")
LISTED = BUGGY.replace("return grad * b\n", "return [grad * b, grad * a]\n")  # AGL016, safe fix


def check(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, timeout=120, input=stdin)


def configure(directory: Path, table: str) -> None:
    (directory / "pyproject.toml").write_text("[tool.autograd-lint]\n" + textwrap.dedent(table))


# --force-exclude


def test_force_exclude_applies_the_excludes_to_named_files(tmp_path: Path) -> None:
    configure(tmp_path, 'extend-exclude = ["vendor", "*_pb2.py"]\n')
    (tmp_path / "vendor" / "deep").mkdir(parents=True)
    (tmp_path / "vendor" / "deep" / "x.py").write_text(BUGGY)
    (tmp_path / "ops_pb2.py").write_text(BUGGY)
    (tmp_path / "ops.py").write_text(BUGGY)
    named = ("vendor/deep/x.py", "ops_pb2.py")
    # Named files are checked even when excluded, as in ruff ...
    assert check(*named, cwd=tmp_path).returncode == 1
    # ... unless --force-exclude says otherwise; a named excluded directory is skipped too.
    skipped = check("--force-exclude", *named, "vendor", cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "All checks passed (0 files" in skipped.stdout
    found = check("--force-exclude", *named, "ops.py", cwd=tmp_path)
    assert found.returncode == 1 and "ops.py:12:9: AGL001" in found.stdout
    assert "vendor" not in found.stdout and "pb2" not in found.stdout


def test_force_exclude_stops_at_the_project_root(tmp_path: Path) -> None:
    """A project that lives under a directory named like a default exclude (build/) is still checked."""
    project = tmp_path / "build" / "project"
    project.mkdir(parents=True)
    configure(project, "select = ['AGL']\n")
    (project / "ops.py").write_text(BUGGY)
    result = check("--force-exclude", str(project / "ops.py"), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr


def test_force_exclude_with_stdin_filename(tmp_path: Path) -> None:
    configure(tmp_path, 'extend-exclude = ["vendor"]\n')
    excluded = check("--force-exclude", "-", "--stdin-filename", "vendor/x.py", cwd=tmp_path, stdin=BUGGY)
    assert excluded.returncode == 0 and excluded.stdout == ""
    echoed = check("--force-exclude", "--fix", "-", "--stdin-filename", "vendor/x.py", cwd=tmp_path, stdin=LISTED)
    assert echoed.returncode == 0 and echoed.stdout == LISTED
    checked = check("--force-exclude", "-", "--stdin-filename", "x.py", cwd=tmp_path, stdin=BUGGY)
    assert checked.returncode == 1 and "x.py:12:9: AGL001" in checked.stdout


def test_the_pre_commit_hook_passes_force_exclude() -> None:
    hooks = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "entry: autograd-lint check --force-exclude\n" in hooks


# --exit-non-zero-on-fix


def test_exit_non_zero_on_fix(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(LISTED)
    plain = check("--fix", "ops.py", cwd=tmp_path)
    assert plain.returncode == 0 and "Fixed 1 problem (0 remaining)." in plain.stdout
    (tmp_path / "ops.py").write_text(LISTED)
    strict = check("--fix", "--exit-non-zero-on-fix", "ops.py", cwd=tmp_path)
    assert strict.returncode == 1 and "return (grad * b, grad * a)" in (tmp_path / "ops.py").read_text()
    # Nothing left to fix: nothing changed, exit 0.
    assert check("--fix", "--exit-non-zero-on-fix", "ops.py", cwd=tmp_path).returncode == 0
    # --exit-zero wins, as in ruff.
    (tmp_path / "ops.py").write_text(LISTED)
    assert check("--fix", "--exit-non-zero-on-fix", "--exit-zero", "ops.py", cwd=tmp_path).returncode == 0
    # stdin: the fixed source on stdout, exit 1 because it changed.
    piped = check("--fix", "--exit-non-zero-on-fix", "-", cwd=tmp_path, stdin=LISTED)
    assert piped.returncode == 1 and "return (grad * b, grad * a)" in piped.stdout
    usage = check("--exit-non-zero-on-fix", "ops.py", cwd=tmp_path)
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1


# --output-file


def test_output_file_takes_the_report(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(BUGGY)
    result = check("--output-format", "json-lines", "--output-file", "reports/lint.jsonl", "ops.py", "gone.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == ["error: gone.py: no such file or directory"]
    report = (tmp_path / "reports" / "lint.jsonl").read_text()
    assert report.count("\n") == 1 and '"code": "AGL001"' in report
    text = check("-o", "lint.txt", "ops.py", cwd=tmp_path)
    assert text.returncode == 1 and text.stdout == ""
    assert (tmp_path / "lint.txt").read_text().endswith("Found 1 problem in 1 file (1 files, 1 autograd.Functions).\n")


def test_output_file_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(CLEAN)
    (tmp_path / "taken").mkdir()
    result = check("--output-file", "taken", "ops.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: taken: cannot be written") and result.stderr.count("\n") == 1


def test_output_file_never_replaces_a_source_file(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(BUGGY)
    (tmp_path / "other.py").write_text(CLEAN)
    result = check("-o", "other.py", "ops.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: --output-file other.py: an existing Python source file is never replaced by a report"
    ]
    assert (tmp_path / "other.py").read_text() == CLEAN
    assert (tmp_path / "ops.py").read_text() == BUGGY


# -q, -qq, --silent


def test_quiet_prints_the_findings_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    quiet = check("-q", "ops.py", cwd=tmp_path)
    assert quiet.returncode == 1 and quiet.stdout.splitlines() == [quiet.stdout.splitlines()[0]]
    assert quiet.stdout.startswith("ops.py:12:9: AGL001 ") and quiet.stderr == ""
    assert check("--quiet", "clean.py", cwd=tmp_path).stdout == ""
    (tmp_path / "fix.py").write_text(LISTED)
    fixed = check("-q", "--fix", "fix.py", cwd=tmp_path)
    assert fixed.returncode == 0 and fixed.stdout == "" and fixed.stderr == ""
    for flag in ("-qq", "--silent", "-s"):
        silent = check(flag, "ops.py", "gone.py", cwd=tmp_path)
        assert silent.returncode == 2 and silent.stdout == "" and silent.stderr == "", flag
        assert check(flag, "ops.py", cwd=tmp_path).returncode == 1
    # Errors stay under -q: they tell why the exit code is 2.
    errors = check("-q", "gone.py", cwd=tmp_path)
    assert errors.returncode == 2 and errors.stderr == "error: gone.py: no such file or directory\n"


# extend


def test_extend_reads_the_base_relative_to_the_file_that_names_it(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "base.toml").write_text(
        '[tool.autograd-lint]\nextend-select = ["AGL100"]\nignore = ["AGL016"]\nextend-exclude = ["gen"]\n'
    )
    package = tmp_path / "packages" / "ops"
    (package / "gen").mkdir(parents=True)
    configure(package, 'extend = "../../shared/base.toml"\nextend-exclude = ["vendor"]\n')
    (package / "mul.py").write_text(LISTED.replace("return [", "return [  # noqa: AGL005\n            ") )
    (package / "gen" / "x.py").write_text(BUGGY)
    # Run from elsewhere: the base is found from the file that names it, not from here.
    shown = check("--show-settings", str(package), cwd=tmp_path / "shared")
    assert shown.returncode == 0, shown.stderr
    assert 'extend-select = ["AGL100"]' in shown.stdout
    assert 'ignore = ["AGL016"]' in shown.stdout
    assert 'extend-exclude = ["gen", "vendor"]' in shown.stdout
    result = check(str(package), cwd=tmp_path / "shared")
    codes = {line.split()[1] for line in result.stdout.splitlines() if ": AGL" in line}
    assert codes == {"AGL100"}, result.stdout


def test_extend_cycle_is_one_line_naming_the_files_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    configure(tmp_path / "a", 'extend = "../b/pyproject.toml"\n')
    configure(tmp_path / "b", 'extend = "../a/pyproject.toml"\n')
    (tmp_path / "a" / "ops.py").write_text(BUGGY)
    result = check("a", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "error: b/pyproject.toml: [tool.autograd-lint] extend: cycle "
        "a/pyproject.toml -> b/pyproject.toml -> a/pyproject.toml\n"
    )
    configure(tmp_path / "b", 'extend = "missing.toml"\n')
    missing = check("a", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == "error: b/pyproject.toml: [tool.autograd-lint] extend: 'missing.toml': no such file\n"


# --watch


class Watcher:
    """``check --watch`` in a subprocess, its output read line by line with a deadline."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograd_lint", "check", "--watch", *args],
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def until(self, text: str, timeout: float = 60) -> list[str]:
        """The lines up to the first that holds ``text``; fails after ``timeout`` seconds."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no {text!r} within {timeout} s; saw {seen}")
            seen.append(line)
            if text in line:
                return seen

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=30)
        finally:
            self.process.kill()


@pytest.mark.slow
def test_watch_checks_again_when_a_file_or_the_configuration_changes(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(BUGGY)
    watcher = Watcher(cwd=tmp_path)
    try:
        first = watcher.until("Found 1 problem")
        assert any("Starting check in watch mode" in line for line in first)
        assert any("ops.py:12:9: AGL001" in line for line in first)
        time.sleep(0.05)  # a later modification time, on filesystems that count coarsely
        (tmp_path / "ops.py").write_text(CLEAN)
        second = watcher.until("All checks passed")
        assert any("File change detected" in line for line in second)
        (tmp_path / "more.py").write_text(BUGGY)  # a new file in a checked directory
        assert any("more.py:12:9: AGL001" in line for line in watcher.until("Found 1 problem"))
        configure(tmp_path, 'ignore = ["AGL001"]\n')  # the configuration is watched too
        watcher.until("All checks passed")
    finally:
        code = watcher.stop()
    assert code == 0


def test_watch_does_not_combine_with_stdin_or_writers(tmp_path: Path) -> None:
    for extra in (["-"], ["--add-noqa"], ["--write-baseline", "b.json"]):
        result = check("--watch", *extra, cwd=tmp_path, stdin="")
        assert result.returncode == 2 and result.stderr.count("\n") == 1, extra
