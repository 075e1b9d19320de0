"""``--output-format sarif`` and ``github``, from the real command."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from autograd_lint import __version__
from autograd_lint.lint.docs import rule_page
from autograd_lint.lint.output import _github_command
from autograd_lint.rules import all_rules, rule_by_code
from cli_process import run_cli

jsonschema = pytest.importorskip("jsonschema")

# The SARIF 2.1.0 JSON schema as Microsoft publishes it (sarif-2.1.0-rtm.5.json, the
# release schema of the 2.1.0 standard), vendored with its license: see sarif/README.md.
SARIF_DATA = Path(__file__).parent / "sarif"
SCHEMA = SARIF_DATA / "sarif-2.1.0-rtm.5.json"
SCHEMA_SHA256 = "2d99159ae54a3eea97f81781cff48780548657c35949f4b7f25e99a2ba4de4f8"
GOLDEN = SARIF_DATA / "golden.sarif"
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
# A warning (AGL021): calling forward directly records no backward.
DIRECT_CALL = textwrap.dedent(
    """
    import torch

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    def exp(x):
        return Exp.forward(None, x)
    """
).lstrip()
MESSAGE = (
    "Mul.backward returns 1 gradient, but forward takes 2 inputs: "
    "backward raises `returned an incorrect number of gradients (expected 2, got 1)`"
)


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, timeout=120)


@pytest.fixture(scope="session")
def sarif_schema() -> dict:
    """The official schema, from the copy in this repository, checked by hash."""
    data = SCHEMA.read_bytes()
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
    # The schema requires none of the descriptions: each is checked here, for every rule.
    for entry, rule in zip(rules, all_rules()):
        assert entry["shortDescription"] == {"text": rule.title}, entry["id"]
        assert entry["fullDescription"] == {"text": rule.what_it_does()}, entry["id"]
        assert rule.what_it_does() and rule.title, entry["id"]

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


def normalised_sarif(text: str, root: Path) -> dict:
    """The SARIF log with what changes between runs and commits replaced by placeholders.

    The catalogue grows with every new rule: its ids are checked here, and the golden
    file keeps only the entries of the rules that reported, their texts checked
    against the rules' own and elided.
    """
    document = json.loads(text)
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    assert driver["version"] == driver["semanticVersion"] == __version__
    driver["version"] = driver["semanticVersion"] = "<version>"
    assert [entry["id"] for entry in driver["rules"]] == [rule.code for rule in all_rules()]
    reported = {found["ruleId"] for found in run["results"]}
    kept = [entry for entry in driver["rules"] if entry["id"] in reported]
    for entry in kept:
        rule = rule_by_code(entry["id"])
        assert rule is not None
        # Each text is checked against its source, then elided: a rule's wording may change
        # without touching the golden file, a missing or misplaced field may not.
        for field, text, placeholder in (
            ("shortDescription", rule.title, "<title>"),
            ("fullDescription", rule.what_it_does(), "<what_it_does>"),
        ):
            assert entry[field] == {"text": text}, (entry["id"], field)
            entry[field]["text"] = placeholder
        assert entry["help"] == {"text": rule.why, "markdown": rule_page(rule)}, entry["id"]
        entry["help"] = {"text": "<why>", "markdown": "<rule_page>"}
    driver["rules"] = kept
    for found in run["results"]:
        # An index into the whole catalogue: it moves whenever a rule is added before it.
        assert all_rules()[found["ruleIndex"]].code == found["ruleId"]
        found["ruleIndex"] = "<index>"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == root.resolve().as_uri() + "/"
    run["originalUriBaseIds"]["%SRCROOT%"]["uri"] = "file:///<root>/"
    return document


def test_sarif_golden(tmp_path: Path, sarif_schema: dict) -> None:
    """The whole log for a small project, against tests/cli/sarif/golden.sarif."""
    (tmp_path / "mul.py").write_text(BUGGY)
    (tmp_path / "direct.py").write_text(DIRECT_CALL)
    result = check("--output-format", "sarif", "mul.py", "direct.py", "missing.py", cwd=tmp_path)
    assert result.returncode == 2
    validate_sarif(result.stdout, sarif_schema)
    document = normalised_sarif(result.stdout, tmp_path)
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if os.environ.get("AUTOGRAD_LINT_REGENERATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "SARIF output differs from tests/cli/sarif/golden.sarif"


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
