"""flake8 with our plugin reports exactly what ``autograd-lint check`` reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_lint.rules import all_rules
from cli_process import run_cli

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("flake8")


def fixture_set(directory: Path) -> list[Path]:
    """The bundled examples plus every rule's INVALID and VALID examples, one file each."""
    files = []
    for source in sorted((REPO / "examples").rglob("*.py")):
        target = directory / f"example_{source.parent.name}_{source.name}"
        target.write_text(source.read_text())
        files.append(target)
    for rule in all_rules():
        if 101 <= int(rule.code[3:]) <= 117:
            continue  # custom-op examples link across files by op name: see tests/customops/test_model.py
        for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID)):
            for index, example in enumerate(examples):
                if not example.parses_here:
                    continue  # newer syntax: checked on the interpreters that have it
                target = directory / f"{rule.code.lower()}_{kind}_{index}.py"
                target.write_text(example.source)
                files.append(target)
    return files


def test_flake8_and_cli_agree(tmp_path: Path) -> None:
    files = fixture_set(tmp_path)
    names = [f.name for f in files]
    cli = run_cli(["check", "--output-format", "json", *names], cwd=tmp_path, timeout=300)
    assert cli.returncode in (0, 1), cli.stderr
    expected = {
        (d["path"], d["line"], d["column"], d["code"], d["message"])
        for d in json.loads(cli.stdout)["diagnostics"]
    }
    flake8 = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "AGL",
         "--format", "%(path)s\t%(row)d\t%(col)d\t%(code)s\t%(text)s", *names],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert flake8.returncode in (0, 1), flake8.stderr
    reported = set()
    for line in flake8.stdout.splitlines():
        path, row, col, code, text = line.split("\t")
        reported.add((path.removeprefix("./"), int(row), int(col), code, text))
    assert expected, "the fixture set should produce findings"
    assert reported == expected


BUGGY = '''import torch


class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b
'''


@pytest.mark.parametrize(
    ("directive", "check_reports", "flake8_reports"),
    [
        # flake8 reads the codes of `# flake8: noqa: B950` as nothing and skips the file;
        # check reads it as ruff does (B950 only), as its author meant.
        ("# flake8: noqa: B950", True, False),
        ("# flake8: noqa", False, False),
        ("# ruff: noqa: AGL001", False, True),  # flake8 knows no ruff directive
        ("# ruff: noqa: E501", True, True),
        ("# autograd-lint: noqa: AGL001", False, False),
        ("# autograd-lint: noqa: AGL002", True, True),
    ],
)
def test_file_level_directives_check_as_ruff_flake8_as_flake8(
    tmp_path: Path, directive: str, check_reports: bool, flake8_reports: bool
) -> None:
    (tmp_path / "mul.py").write_text(f"{directive}\n{BUGGY}")
    cli = run_cli(["check", "--isolated", "mul.py"], cwd=tmp_path, timeout=120)
    assert ("AGL001" in cli.stdout) is check_reports, cli.stdout + cli.stderr
    flake8 = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "AGL", "mul.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert ("AGL001" in flake8.stdout) is flake8_reports, flake8.stdout + flake8.stderr
