"""Adopting autograd-lint in an existing codebase: statistics, add-noqa, file-level noqa, AGL100,
stdin, --show-fixes and --show-settings, each run as users run it (a subprocess)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_process import run_cli

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
            a, b = ctx.saved_tensors
            return grad * b


    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return [grad * 2]


    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return [grad * 2]
    """
).lstrip()
EXTRA = (
    "\n\nclass Extra(torch.autograd.Function):\n"
    "    @staticmethod\n    def forward(ctx, x):\n        return x * 3\n\n"
    "    @staticmethod\n    def backward(ctx, grad):\n        return [grad * 3]\n"
)
# 1-based lines of the findings in SOURCE.
AGL001_LINE, FIRST_AGL016_LINE = 13, 23


def check(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, input=stdin, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "ops.py").write_text(SOURCE)
    return tmp_path


def test_statistics_as_ruff_prints_them(project: Path) -> None:
    result = check("--statistics", "ops.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "2\tAGL016\t[*] backward returns a list or another non-tuple container",
        "1\tAGL001\t[ ] backward returns the wrong number of gradients",
    ]
    # Only json changes the statistics' layout (as ruff's); every other format prints the table.
    assert check("--statistics", "--output-format", "concise", "ops.py", cwd=project).stdout == result.stdout
    document = json.loads(check("--statistics", "--output-format", "json", "ops.py", cwd=project).stdout)
    assert document[0] == {
        "code": "AGL016",
        "count": 2,
        "fixable": True,
        "title": "backward returns a list or another non-tuple container",
    }
    clean = check("--statistics", "--ignore", "AGL001,AGL016", "ops.py", cwd=project)
    assert clean.returncode == 0 and clean.stdout == ""


def test_add_noqa_silences_everything_once_and_keeps_formatting(project: Path) -> None:
    path = project / "ops.py"
    text = SOURCE.replace("return grad * b\n", "return grad * b  # noqa: E501 (long)\n")
    path.write_bytes(text.replace("\n", "\r\n").encode())
    result = check("--add-noqa=kernel rewrite, see #12", "ops.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Added noqa comments to 3 lines." in result.stderr and result.stdout == ""
    lines = path.read_bytes().decode().split("\r\n")
    assert lines[AGL001_LINE - 1] == "        return grad * b  # noqa: E501, AGL001 (long)"
    assert lines[FIRST_AGL016_LINE - 1] == "        return [grad * 2]  # noqa: AGL016  # kernel rewrite, see #12"
    assert path.read_bytes().count(b"\r\n") == text.count("\n")  # line endings kept
    assert check("ops.py", cwd=project).returncode == 0
    before = path.read_bytes()
    again = check("--add-noqa", "ops.py", cwd=project)
    assert again.returncode == 0 and "Added noqa comments to 0 lines." in again.stderr
    assert path.read_bytes() == before


def test_add_noqa_leaves_a_line_that_ends_in_a_string(project: Path) -> None:
    text = SOURCE.replace(
        "return [grad * 2]\n\n\nclass Twice", 'return [grad * 2, """\n        """]\n\n\nclass Twice'
    )
    (project / "ops.py").write_text(text)
    result = check("--add-noqa", "ops.py", cwd=project)
    assert result.returncode == 0
    assert f"warning: ops.py:{FIRST_AGL016_LINE}: the line ends inside a string" in result.stderr
    assert 'return [grad * 2, """\n' in (project / "ops.py").read_text()


def test_nothing_is_written_unless_asked(project: Path) -> None:
    for args in ([], ["--statistics"], ["--diff"], ["--show-settings"], ["--output-format", "json"]):
        check(*args, "ops.py", cwd=project)
        assert (project / "ops.py").read_text() == SOURCE, args
    # Only the result cache, which git ignores (a .gitignore inside it) and --no-cache leaves out.
    assert sorted(p.name for p in project.iterdir()) == [".autograd_lint_cache", "ops.py"]
    assert (project / ".autograd_lint_cache" / ".gitignore").read_text().endswith("*\n")
    shutil.rmtree(project / ".autograd_lint_cache")
    for args in ([], ["--statistics"], ["--diff"]):
        check("--no-cache", *args, "ops.py", cwd=project)
    assert sorted(p.name for p in project.iterdir()) == ["ops.py"]


@pytest.mark.parametrize(
    ("comment", "reported"),
    [
        ("# flake8: noqa", []),
        ("# autograd-lint: noqa", []),
        ("# autograd-lint: noqa: AGL016", ["AGL001"]),
        ("# AUTOGRAD-LINT: NOQA: AGL0", []),
        ("x = 1  # flake8: noqa", ["AGL001", "AGL016", "AGL016"]),  # flake8 wants the comment alone on its line
    ],
)
def test_file_level_noqa(project: Path, comment: str, reported: list[str]) -> None:
    (project / "ops.py").write_text(SOURCE.replace("import torch\n", f"import torch\n{comment}\n"))
    result = check("--output-format", "json", "ops.py", cwd=project)
    assert [d["code"] for d in json.loads(result.stdout)["diagnostics"]] == reported


@pytest.mark.slow
def test_file_level_noqa_through_flake8_agrees(project: Path) -> None:
    pytest.importorskip("flake8")
    for comment, expected in (("# flake8: noqa", ""), ("# autograd-lint: noqa: AGL016", "AGL001")):
        (project / "ops.py").write_text(SOURCE.replace("import torch\n", f"import torch\n{comment}\n"))
        flake8 = subprocess.run(
            [sys.executable, "-m", "flake8", "--select", "AGL", "ops.py"],
            cwd=project, capture_output=True, text=True, timeout=120,
        )
        codes = " ".join(line.split()[1] for line in flake8.stdout.splitlines())
        assert codes == expected, flake8.stdout + flake8.stderr


def test_unused_noqa_is_off_by_default_and_names_the_codes(project: Path) -> None:
    text = SOURCE.replace("return grad * b\n", "return grad * b  # noqa: AGL001, AGL005, E501\n")
    text = text.replace("return x * 2\n", "return x * 2  # noqa: AGL999\n", 1)
    (project / "ops.py").write_text(text)
    assert "AGL100" not in check("ops.py", cwd=project).stdout
    result = check("--extend-select", "AGL100", "--ignore", "AGL016", "ops.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout.splitlines()[:-1] == [
        f"ops.py:{AGL001_LINE}:26: AGL100 `# noqa` lists AGL005, which silences nothing on this line",
        "ops.py:19:23: AGL100 `# noqa` lists AGL999 (not a rule), which silences nothing on this line",
    ]


def test_stdin_with_config_and_per_file_ignores_of_its_path(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.autograd-lint]\nignore = ["AGL001"]\n\n[tool.autograd-lint.per-file-ignores]\n"legacy/*.py" = ["AGL016"]\n'
    )
    plain = check("-", "--stdin-filename", "src/ops.py", cwd=project, stdin=SOURCE)
    assert plain.returncode == 1
    assert [line.split()[1] for line in plain.stdout.splitlines()[:-1]] == ["AGL016", "AGL016"]
    assert plain.stdout.startswith(f"src/ops.py:{FIRST_AGL016_LINE}:9: AGL016")
    ignored = check("-", "--stdin-filename", "legacy/ops.py", cwd=project, stdin=SOURCE)
    assert ignored.returncode == 0, ignored.stdout
    assert check("-", cwd=project, stdin=SOURCE).stdout.startswith("-:")


def test_stdin_syntax_error_and_fix(project: Path) -> None:
    broken = check("-", "--stdin-filename", "ops.py", cwd=project, stdin="def f(:\n")
    assert broken.returncode == 2 and broken.stderr.startswith("error: ops.py:1: ") and broken.stdout == ""
    fixed = check("-", "--stdin-filename", "ops.py", "--fix", cwd=project, stdin=SOURCE)
    assert fixed.returncode == 1
    assert fixed.stdout == SOURCE.replace("return [grad * 2]", "return (grad * 2,)")
    assert f"ops.py:{AGL001_LINE}:9: AGL001" in fixed.stderr and "Fixed 2 problems (1 remaining)." in fixed.stderr
    assert (project / "ops.py").read_text() == SOURCE


def test_show_fixes_after_fix(project: Path) -> None:
    result = check("--fix", "--show-fixes", "ops.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-3:] == [
        "Fixed 2 problems:",
        "ops.py:",
        "    2 \u00d7 AGL016 (backward returns a list or another non-tuple container)",
    ]


def test_show_settings(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.autograd-lint]\nextend-select = ["AGL030"]\n')
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text("")
    result = check("--show-settings", cwd=project)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"Configuration: {project / 'pyproject.toml'}"
    assert 'extend-select = ["AGL030"]' in lines
    assert any(re.match(r"Rules that run \(\d+\): AGL001, ", line) for line in lines)
    assert lines[-2:] == ["Files to check (1):", "  ops.py"]
    shown = check("--show-settings", "--output-format", "json", cwd=project).stdout
    document = json.loads(shown)
    assert document["files"] == ["./ops.py"] and "AGL030" in document["rules"]
    assert shown == json.dumps(document, indent=2) + "\n"  # the same layout as the other JSON outputs


@pytest.mark.parametrize(
    "args",
    [
        ["-", "ops.py"],
        ["--stdin-filename", "x.py", "ops.py"],
        ["--add-noqa", "--diff", "ops.py"],
        ["--add-noqa=two\nlines", "ops.py"],
        ["--write-baseline", "b.json", "--diff", "ops.py"],
        ["--write-baseline", "b.json", "--add-noqa", "ops.py"],
        ["--show-fixes", "ops.py"],
    ],
)
def test_options_that_do_not_go_together(project: Path, args: list[str]) -> None:
    result = check(*args, cwd=project)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert (project / "ops.py").read_text() == SOURCE and not (project / "b.json").exists()


def test_add_noqa_after_a_baseline_comments_only_new_findings(project: Path) -> None:
    assert check("--write-baseline", "baseline.json", "ops.py", cwd=project).returncode == 0
    path = project / "ops.py"
    path.write_text(SOURCE + EXTRA)  # a new Function that returns a list (AGL016)
    result = check("--baseline", "baseline.json", "--add-noqa", "ops.py", cwd=project)
    assert result.returncode == 0 and "Added noqa comments to 1 line." in result.stderr
    assert [line for line in path.read_text().splitlines() if "noqa" in line] == [
        "        return [grad * 3]  # noqa: AGL016",
    ]
