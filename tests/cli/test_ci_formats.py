"""``--output-format`` gitlab, junit, json-lines, concise and full, from the real command."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from cli_process import run_cli

jsonschema = pytest.importorskip("jsonschema")
junitparser = pytest.importorskip("junitparser")

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
MESSAGE = (
    "Mul.backward returns 1 gradient, but forward takes 2 inputs: "
    "backward raises `returned an incorrect number of gradients (expected 2, got 1)`"
)

# GitLab's code quality report, as its documentation defines it (a subset of the
# CodeClimate spec): a JSON array of issues, each with a description, a check
# name, a unique fingerprint, a severity of info/minor/major/critical/blocker, and
# a location with a path relative to the repository and a begin line
# (https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format).
# Strict: only these fields, so that nothing undocumented is emitted.
GITLAB_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "lines"],
                "properties": {
                    # relative to the repository, with / separators: no leading /, no ..
                    "path": {"type": "string", "pattern": "^(?!/)(?!\\.\\./)(?!.*/\\.\\./)[^\\\\]+$"},
                    "lines": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1}},
                    },
                },
            },
        },
    },
}


def check(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, timeout=120, env=env)


def gitlab_report(text: str) -> list[dict]:
    document = json.loads(text)
    validator = jsonschema.Draft7Validator(GITLAB_SCHEMA)
    errors = sorted(validator.iter_errors(document), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    return document


def test_gitlab_report_is_valid_and_fingerprints_survive_shifted_lines(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mul.py").write_text(BUGGY)
    (tmp_path / "pkg" / "twice.py").write_text(BUGGY + "\n\n" + BUGGY.replace("import torch\n", ""))
    (tmp_path / "broken.py").write_text("class F(torch.autograd.Function):\n    def forward(ctx x):\n")
    result = check("--output-format", "gitlab", "pkg", "broken.py", cwd=tmp_path)
    assert result.returncode == 2
    issues = gitlab_report(result.stdout)
    assert len({issue["fingerprint"] for issue in issues}) == len(issues) == 4
    mul = next(issue for issue in issues if issue["location"]["path"] == "pkg/mul.py")
    assert mul == {
        "description": f"AGL001: {MESSAGE}",
        "check_name": "AGL001",
        "fingerprint": mul["fingerprint"],
        "severity": "critical",
        "location": {"path": "pkg/mul.py", "lines": {"begin": 12}},
    }
    # GitLab compares fingerprints across pipelines, and so across autograd-lint versions: the
    # value is pinned (sha256 of the JSON of path, code, scope, line text and the rank 1 of
    # the first finding with that key), else an upgrade would show every finding as new.
    assert mul["fingerprint"] == "6b5e874a1c50e5b3cbf34e08d4c525756ad5d0cfde8bf0ca5d40cadd9cf87c78"
    broken = next(issue for issue in issues if issue["location"]["path"] == "broken.py")
    assert broken["check_name"] == "AGL000" and broken["location"]["lines"]["begin"] == 2
    # Code added above a finding moves it, but GitLab must not see a new finding.
    (tmp_path / "pkg" / "mul.py").write_text("# a new header\n\n" + BUGGY)
    moved = gitlab_report(check("--output-format", "gitlab", "pkg", cwd=tmp_path).stdout)
    after = next(issue for issue in moved if issue["location"]["path"] == "pkg/mul.py")
    assert after["location"]["lines"]["begin"] == 14 and after["fingerprint"] == mul["fingerprint"]
    # In a GitLab job, paths are relative to the checkout, wherever the command ran.
    env = {"PATH": "/usr/bin:/bin", "CI_PROJECT_DIR": str(tmp_path)}
    inner = check("--output-format", "gitlab", "mul.py", cwd=tmp_path / "pkg", env=env)
    assert [issue["location"]["path"] for issue in gitlab_report(inner.stdout)] == ["pkg/mul.py"]


def test_gitlab_report_of_a_clean_run_is_an_empty_array(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text(CLEAN)
    result = check("--output-format", "gitlab", cwd=tmp_path)
    assert result.returncode == 0 and gitlab_report(result.stdout) == []


def test_junit_report_reads_with_junitparser(tmp_path: Path) -> None:
    (tmp_path / "mul.py").write_text(BUGGY)
    (tmp_path / "odd <&>.py").write_text(BUGGY)
    result = check("--output-format", "junit", "--output-file", "junit.xml", "mul.py", "odd <&>.py", "gone.py", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    report = junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml"))
    assert (report.tests, report.failures, report.errors) == (3, 2, 1)
    suites = {suite.name: suite for suite in report}
    assert set(suites) == {"mul.py", "odd <&>.py", "gone.py"}
    assert {name: (s.tests, s.failures, s.errors, s.skipped) for name, s in suites.items()} == {
        "mul.py": (1, 1, 0, 0), "odd <&>.py": (1, 1, 0, 0), "gone.py": (1, 0, 1, 0)}
    (case,) = list(suites["mul.py"])
    assert case.name == "AGL001 at line 12, col 9" and case.classname == "mul"
    (failure,) = case.result
    assert isinstance(failure, junitparser.Failure)
    assert failure.message == MESSAGE and failure.type == "AGL001"
    assert failure.text == f"mul.py:12:9: AGL001 {MESSAGE}"
    (missing,) = list(suites["gone.py"])
    assert missing.classname == "gone"  # named as the findings' cases are: the path without its suffix
    (error,) = missing.result
    assert isinstance(error, junitparser.Error) and "no such file" in error.message


def test_junit_report_of_a_clean_run_has_one_passing_case(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text(CLEAN)
    result = check("--output-format", "junit", cwd=tmp_path)
    assert result.returncode == 0
    report = junitparser.JUnitXml.fromstring(result.stdout.encode())
    assert (report.tests, report.failures, report.errors) == (1, 0, 0)
    (suite,) = list(report)
    # The suite's own counts, as CI systems read them, not only the totals.
    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == ("autograd-lint", 1, 0, 0, 0)
    (case,) = list(suite)
    assert case.is_passed


def test_json_lines(tmp_path: Path) -> None:
    (tmp_path / "mul.py").write_text(BUGGY)
    (tmp_path / "also.py").write_text(BUGGY)
    result = check("--output-format", "json-lines", cwd=tmp_path)
    assert result.returncode == 1
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["path"] for row in rows] == ["./also.py", "./mul.py"]
    assert rows[1] == {
        "path": "./mul.py", "line": 12, "column": 9, "code": "AGL001", "message": MESSAGE,
        "severity": "error", "title": "backward returns the wrong number of gradients",
    }
    # The same objects as the json format's diagnostics.
    document = json.loads(check("--output-format", "json", cwd=tmp_path).stdout)
    assert document["diagnostics"] == rows


def test_concise_is_the_text_format(tmp_path: Path) -> None:
    (tmp_path / "mul.py").write_text(BUGGY)
    concise = check("--output-format", "concise", "mul.py", cwd=tmp_path)
    assert concise.stdout == check("mul.py", cwd=tmp_path).stdout
    assert concise.stdout.splitlines() == [
        f"mul.py:12:9: AGL001 {MESSAGE}",
        "Found 1 problem in 1 file (1 files, 1 autograd.Functions).",
    ]


def test_full_shows_the_source_line_and_a_caret(tmp_path: Path) -> None:
    (tmp_path / "spaces.py").write_text(BUGGY)
    result = check("--output-format", "full", "spaces.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == (
        f"spaces.py:12:9: AGL001 {MESSAGE}\n"
        "   |\n"
        "12 |         return grad * b\n"
        "   |         ^ AGL001\n"
        "   |\n"
        "\n"
        "Found 1 problem in 1 file (1 files, 1 autograd.Functions).\n"
    )
    quiet = check("--output-format", "full", "-q", "spaces.py", cwd=tmp_path)
    assert quiet.stdout == result.stdout.rsplit("\n\n", 1)[0] + "\n\n"
    # stdin: the lines come from the buffer, not from a file.
    piped = run_cli(
        ["check", "--output-format", "full", "-", "--stdin-filename", "nowhere.py"], cwd=tmp_path, timeout=120, input=BUGGY
    )
    assert "12 |         return grad * b\n   |         ^ AGL001\n" in piped.stdout
