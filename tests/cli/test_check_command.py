"""The ``autograd-lint check`` command, run as users run it: a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import other_user
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
CLEAN = BUGGY.replace("return grad * b", "return grad * b, grad * a")


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, timeout=120)


def test_findings_exit_1_with_location_and_summary(tmp_path: Path) -> None:
    (tmp_path / "buggy.py").write_text(BUGGY)
    result = check("buggy.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines()[0].startswith(
        "buggy.py:12:9: AGL001 Mul.backward returns 1 gradient, but forward takes 2 inputs: "
    )
    assert result.stdout.splitlines()[-1].startswith("Found 1 problem in 1 file")


def test_a_check_run_under_a_profiler_still_leaves_the_profile(tmp_path: Path) -> None:
    # check ends without the interpreter's teardown (cli.console) only when nothing waits for
    # the exit: cProfile writes its file after the module returns, without atexit.
    (tmp_path / "plain.py").write_text("x = 1\n")
    profile = tmp_path / "check.prof"
    result = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "autograd_lint", "check", "--no-cache", "plain.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert "All checks passed" in result.stdout, result.stdout + result.stderr
    assert profile.stat().st_size > 0


def test_clean_exits_0(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text(CLEAN)
    result = check(cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed" in result.stdout


def test_noqa_select_and_ignore(tmp_path: Path) -> None:
    (tmp_path / "buggy.py").write_text(BUGGY)
    assert check("--ignore", "AGL001", "buggy.py", cwd=tmp_path).returncode == 0
    assert check("--select", "AGL00", "buggy.py", cwd=tmp_path).returncode == 1
    assert check("--select", "AGL002", "buggy.py", cwd=tmp_path).returncode == 0
    (tmp_path / "buggy.py").write_text(BUGGY.replace("grad * b\n", "grad * b  # noqa: AGL001\n"))
    assert check("buggy.py", cwd=tmp_path).returncode == 0
    (tmp_path / "buggy.py").write_text(BUGGY.replace("grad * b\n", "grad * b  # noqa: AGL999\n"))
    assert check("buggy.py", cwd=tmp_path).returncode == 1
    (tmp_path / "buggy.py").write_text(BUGGY.replace("grad * b\n", "grad * b  # noqa\n"))
    assert check("buggy.py", cwd=tmp_path).returncode == 0


def test_json_output(tmp_path: Path) -> None:
    (tmp_path / "buggy.py").write_text(BUGGY)
    result = check("--output-format", "json", "buggy.py", cwd=tmp_path)
    document = json.loads(result.stdout)
    assert [(d["path"], d["line"], d["column"], d["code"]) for d in document["diagnostics"]] == [
        ("buggy.py", 12, 9, "AGL001")
    ]
    assert document["summary"]["functions"] == 1


def test_directory_walk_skips_virtualenvs_and_excludes(tmp_path: Path) -> None:
    for folder in ("src", ".venv/lib", "build", "vendored"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "mod.py").write_text(BUGGY)
    result = check("--exclude", "vendored", cwd=tmp_path)
    assert result.returncode == 1
    reported = {line.split(":")[0] for line in result.stdout.splitlines()[:-1]}
    assert reported == {str(Path("src/mod.py"))} or reported == {"./src/mod.py"}


def test_cross_file_subclass(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(
        "import torch\n\nclass Base(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, a, b):\n        return a * b\n"
    )
    (package / "impl.py").write_text(
        "from .base import Base\n\nclass Impl(Base):\n"
        "    @staticmethod\n    def backward(ctx, grad):\n        return (grad,)\n"
    )
    result = check("pkg", cwd=tmp_path)
    assert result.returncode == 1
    assert "impl.py:6:9: AGL001 Impl.backward returns 1 gradient, but forward takes 2 inputs" in result.stdout


BAD_INPUTS = {
    "syntax.py": (b"import torch\nclass F(torch.autograd.Function):\n    def forward(ctx x):\n", "syntax error"),
    "latin1.py": (b"x = '\xe9'\nclass Function: pass\n", "cannot be decoded"),
    "nul.py": (b"import torch\x00\n", "NUL byte"),
    "pep695.py": (b"type Alias = int\ndef first[T](items: list[T]) -> T:\n    return items[0]\n", "syntax"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_and_the_run_goes_on(tmp_path: Path, name: str) -> None:
    data, problem = BAD_INPUTS[name]
    if name == "pep695.py" and sys.version_info >= (3, 12):
        pytest.skip("PEP 695 syntax is valid on this Python")
    (tmp_path / name).write_bytes(data)
    (tmp_path / "buggy.py").write_text(BUGGY)
    result = check(name, "buggy.py", "missing.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2, errors
    assert any(name in line and problem in line for line in errors), errors
    assert any("missing.py" in line and "no such file" in line for line in errors), errors
    assert "buggy.py:12:9: AGL001" in result.stdout


def test_empty_file_and_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "empty.py").write_text("")
    assert check("empty.py", cwd=tmp_path).returncode == 0
    prefix = other_user.as_nobody()  # root reads any file
    with other_user.shared_folder() as root:
        locked = root / "locked.py"
        locked.write_text(BUGGY)
        (root / "other.py").write_text(BUGGY)
        other_user.hand_over(prefix, root, locked, root / "other.py")
        locked.chmod(0)
        result = other_user.autograd_lint(prefix, "check", "locked.py", "other.py", cwd=root)
    assert result.returncode == 2, result.stdout + result.stderr
    (error,) = [line for line in result.stderr.splitlines() if "locked.py" in line]
    assert "cannot be read" in error
    assert "other.py:12:9: AGL001" in result.stdout  # the rest of the run goes on


def test_usage_error_exit_2(tmp_path: Path) -> None:
    result = check("--output-format", "xml", cwd=tmp_path)
    assert result.returncode == 2


def test_an_internal_error_names_the_file_and_the_run_goes_on(tmp_path: Path) -> None:
    # A rule that crashes stands in for any bug of ours: a small script patches
    # one rule and runs the command line in its own process.
    (tmp_path / "buggy.py").write_text(BUGGY)
    (tmp_path / "other.py").write_text(BUGGY.replace("class Mul", "class Other"))
    script = tmp_path / "crashing_rule.py"
    script.write_text(
        "import sys\n"
        "from autograd_lint.rules import rule_by_code\n"
        "from autograd_lint.cli import main\n"
        "rule = rule_by_code('AGL001')\n"
        "original = rule.check_function\n"
        "def check_function(self, ctx):\n"
        "    if ctx.function.name == 'Mul':\n"
        "        raise ValueError('boom')\n"
        "    return original(self, ctx)\n"
        "rule.check_function = check_function\n"
        "sys.exit(main(['check', '--jobs', '1', 'buggy.py', 'other.py']))\n"
    )
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "error: buggy.py: internal error while running AGL001, please report it: ValueError: boom"
    )
    assert "other.py:12:9: AGL001 Other.backward returns 1 gradient" in result.stdout


def test_select_all_runs_rules_that_are_off_by_default(tmp_path: Path) -> None:
    # AGL100 (unused noqa) is off by default; ALL means every rule, as in ruff.
    (tmp_path / "clean.py").write_text(CLEAN.replace("grad * a\n", "grad * a  # noqa: AGL001\n"))
    assert check("clean.py", cwd=tmp_path).returncode == 0
    result = check("--select", "ALL", "--output-format", "json", "clean.py", cwd=tmp_path)
    assert [d["code"] for d in json.loads(result.stdout)["diagnostics"]] == ["AGL100"]
    assert check("--select", "ALL", "--ignore", "AGL100", "clean.py", cwd=tmp_path).returncode == 0
