"""What ``gen-tests --compile-parity`` costs: the generated suites' run time with and without it.

Usage: ``python bench/gentests_compile_parity.py``.  In temporary copies of the
custom-op fixture package (``tests/gentests/fixtures/custom_ops/correct``) and of
the Function fixture project (``tests/gentests/fixtures/project``, with its inputs
recorded first), generates the tests with and without ``--compile-parity`` and
runs each suite in a fresh pytest process; prints pytest's own wall time and the
test counts for each.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "gentests"))

from gentests_support import copy_project, gen_tests  # noqa: E402

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def run_suite(project: Path, target: str, out: str, *options: str) -> str:
    generated = gen_tests(project, target, "--out", out, *options)
    assert generated.returncode == 0, generated.stderr
    result = subprocess.run([*PYTEST, out], cwd=project, capture_output=True, text=True)
    return result.stdout.strip().splitlines()[-1]


def seconds(summary: str) -> float:
    match = re.search(r"in ([\d.]+)s", summary)
    return float(match.group(1)) if match else float("nan")


def main() -> int:
    with tempfile.TemporaryDirectory() as directory:
        ops = Path(directory) / "ops"
        shutil.copytree(REPO / "tests" / "gentests" / "fixtures" / "custom_ops" / "correct", ops)
        functions = Path(directory) / "functions"
        copy_project(functions)
        subprocess.run([*PYTEST, "usage_tests", "--autograd-record"], cwd=functions, check=True, capture_output=True)
        for name, project, target in (("9 custom ops", ops, "."), ("26 Functions", functions, "agl_ops")):
            plain = run_suite(project, target, "plain")
            parity = run_suite(project, target, "parity", "--compile-parity")
            print(f"{name}: without --compile-parity: {plain}")
            print(f"{name}: with --compile-parity:    {parity}")
            print(f"{name}: ratio {seconds(parity) / seconds(plain):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
