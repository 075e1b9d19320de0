"""Helpers of the gen-tests suite: the fixture project, the command, result parsing."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path
from cli_process import run_cli

FIXTURE_PROJECT = Path(__file__).parent / "fixtures" / "project"
# "<code>  # wrong: <other code>" -> "<other code>", keeping the indentation.
WRONG_LINE = re.compile(r"^(\s*)\S.*?\s+# wrong: (.*)$", re.MULTILINE)
SUMMARY = re.compile(r"inputs of (\d+) Function\(s\): (\d+) recorded, (\d+) static, (\d+) search, (\d+) none")


def copy_project(destination: Path, wrong: bool = False) -> int:
    """Copy the fixture project into ``destination``; returns how many lines were made wrong."""
    shutil.copytree(FIXTURE_PROJECT, destination, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".autograd-lint", "generated"))
    replaced = 0
    if wrong:
        for path in sorted((destination / "agl_ops").glob("*.py")):
            text, count = WRONG_LINE.subn(lambda m: m.group(1) + m.group(2), path.read_text())
            path.write_text(text)
            replaced += count
    return replaced


def gen_tests(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``autograd-lint gen-tests ARGS`` in a real subprocess."""
    return run_cli(["gen-tests", *args], cwd=cwd, timeout=120)


def origin_counts(output: str) -> dict[str, int]:
    match = SUMMARY.search(output)
    assert match, output
    total, recorded, static, search, none = map(int, match.groups())
    return {"total": total, "recorded": recorded, "static": static, "search": search, "none": none}


def outcomes_by_class(junit_xml: Path) -> dict[str, Counter[str]]:
    """Test class name -> Counter of "passed"/"failed"/"error"/"skipped" from a JUnit XML report."""
    outcomes: dict[str, Counter[str]] = {}
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1]
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcome = {"failure": "failed"}.get(next(iter(kinds), ""), next(iter(kinds), "passed"))
        outcomes.setdefault(name, Counter())[outcome] += 1
    return outcomes


def reported_test_names(junit_xml: Path) -> set[str]:
    """The test function names (without parameters) in a JUnit XML report."""
    return {re.sub(r"\[.*", "", case.get("name", "")) for case in ElementTree.parse(junit_xml).iter("testcase")}
