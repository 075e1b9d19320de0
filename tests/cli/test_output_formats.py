"""``--output-format sarif`` and ``github``, from the real command."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from autograd_lint.lint.docs import rule_page
from autograd_lint.lint.output import _github_command
from autograd_lint.rules import all_rules, rule_by_code

jsonschema = pytest.importorskip("jsonschema")

# The SARIF 2.1.0 JSON schema as Microsoft publishes it (sarif-2.1.0-rtm.5.json, the
# release schema of the 2.1.0 standard), taken from the npm registry at test time so
# that no copy of it lives in this repository.
SCHEMA_PACKAGE = "@microsoft/jest-sarif@1.0.0-beta.0"
SCHEMA_MEMBER = "package/lib/schemas/sarif-2.1.0-rtm.5.json"
SCHEMA_SHA256 = "2d99159ae54a3eea97f81781cff48780548657c35949f4b7f25e99a2ba4de4f8"
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
MESSAGE = (
    "Mul.backward returns 1 gradient, but forward takes 2 inputs: "
    "backward raises `returned an incorrect number of gradients (expected 2, got 1)`"
)


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autograd_lint", "check", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )


@pytest.fixture(scope="session")
def sarif_schema(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The official schema, fetched once per session with ``npm pack`` and checked by hash.

    Without npm or the registry the test is skipped, except under CI, where a
    schema test that quietly did not run would read as a pass.
    """
    folder = tmp_path_factory.mktemp("sarif-schema")
    npm = shutil.which("npm")
    result = (
        subprocess.run([npm, "pack", "--silent", SCHEMA_PACKAGE], cwd=folder, capture_output=True, text=True, timeout=180)
        if npm
        else None
    )
    if result is None or result.returncode != 0:
        reason = f"cannot fetch {SCHEMA_PACKAGE} with npm: " + (result.stderr.strip() if result else "npm not found")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    archive = next(folder.glob("*.tgz"))
    with tarfile.open(archive) as bundle:
        member = bundle.extractfile(SCHEMA_MEMBER)
        assert member is not None
        data = member.read()
    assert hashlib.sha256(data).hexdigest() == SCHEMA_SHA256
    return json.loads(data)


def validate_sarif(text: str, schema: dict) -> dict:
    document = json.loads(text)
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(document), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    return document


def test_sarif_is_valid_and_complete(tmp_path: Path, sarif_schema: dict) -> None:
    project = tmp_path / "project"
    (project / "src dir").mkdir(parents=True)
    (project / "src dir" / "mul.py").write_text(BUGGY)
    (project / "syntax.py").write_text("class F(torch.autograd.Function):\n    def forward(ctx x):\n")
    (tmp_path / "outside.py").write_text(BUGGY)
    result = check(
        "--output-format", "sarif", "src dir", "syntax.py", "missing.py", str(tmp_path / "outside.py"),
        cwd=project,
    )
    assert result.returncode == 2
    document = validate_sarif(result.stdout, sarif_schema)
    assert document["version"] == "2.1.0"
    (run,) = document["runs"]

    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [rule.code for rule in all_rules()]
    agl001 = rules[[r["id"] for r in rules].index("AGL001")]
    rule = rule_by_code("AGL001")
    assert agl001["name"] == rule.__name__
    assert agl001["shortDescription"]["text"] == rule.title
    assert agl001["help"] == {"text": rule.why, "markdown": rule_page(rule)}
    assert agl001["defaultConfiguration"] == {"level": "error", "enabled": True}

    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"
    locations = []
    for found in run["results"]:
        assert found["ruleId"] == "AGL001" and found["level"] == "error"
        assert rules[found["ruleIndex"]]["id"] == "AGL001"
        assert found["message"]["text"] == MESSAGE
        (location,) = found["locations"]
        locations.append(location["physicalLocation"])
    assert {"artifactLocation": {"uri": "src%20dir/mul.py", "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": 12, "startColumn": 9}} in locations
    assert {"artifactLocation": {"uri": (tmp_path / "outside.py").as_uri()},
            "region": {"startLine": 12, "startColumn": 9}} in locations
    assert len(locations) == 2

    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    notified = {
        n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: n
        for n in invocation["toolExecutionNotifications"]
    }
    assert set(notified) == {"syntax.py", "missing.py"}
    assert notified["syntax.py"]["level"] == "error"
    assert notified["syntax.py"]["locations"][0]["physicalLocation"]["region"] == {"startLine": 2}
    assert "no such file" in notified["missing.py"]["message"]["text"]


def test_sarif_of_a_clean_run(tmp_path: Path, sarif_schema: dict) -> None:
    (tmp_path / "clean.py").write_text(BUGGY.replace("return grad * b", "return grad * b, grad * a"))
    result = check("--output-format", "sarif", cwd=tmp_path)
    assert result.returncode == 0
    (run,) = validate_sarif(result.stdout, sarif_schema)["runs"]
    assert run["results"] == []
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_github_annotations(tmp_path: Path) -> None:
    (tmp_path / "mul.py").write_text(BUGGY)
    (tmp_path / "odd,name%.py").write_text(BUGGY)
    result = check("--output-format", "github", "mul.py", "odd,name%.py", "missing.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"::error file=mul.py,line=12,col=9,title=AGL001::{MESSAGE}",
        f"::error file=odd%2Cname%25.py,line=12,col=9,title=AGL001::{MESSAGE}",
        "::error file=missing.py,title=autograd-lint::no such file or directory",
    ]


def test_github_warning_severity(tmp_path: Path) -> None:
    rule = rule_by_code("AGL021")
    assert rule is not None and rule.severity.value == "warning"
    (tmp_path / "direct.py").write_text(rule.INVALID[0].source)
    result = check("--output-format", "github", "--select", "AGL021", "direct.py", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("::warning file=direct.py,line=") for line in lines), lines
    assert all(",title=AGL021::" in line for line in lines)


def test_github_escaping() -> None:
    assert _github_command("error", "50% done\r\nnext: a, b", file="a:b,c%.py", line=3) == (
        "::error file=a%3Ab%2Cc%25.py,line=3::50%25 done%0D%0Anext: a, b"
    )
