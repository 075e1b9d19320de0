"""Record, generate and run the gen-tests fixture project; print input origins and run times.

Usage: ``python bench/gentests_fixture_suite.py [--wrong]``.  Works in a
temporary copy of ``tests/gentests/fixtures/project``; with ``--wrong`` the
Functions get their wrong backward formulas.  Prints the gen-tests summary line,
then the generated suite's test counts and its wall time (pytest's own figure,
without interpreter start-up, and the whole subprocess).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gentests"))

from gentests_support import copy_project, gen_tests  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wrong", action="store_true", help="use the wrong-backward variants")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        project = Path(directory)
        copy_project(project, wrong=args.wrong)
        pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        subprocess.run([*pytest_command, "usage_tests", "--autograd-record"], cwd=project, check=True,
                       capture_output=True)
        generated = gen_tests(project, "agl_ops", "--out", "generated")
        print(generated.stdout.strip().splitlines()[-1])
        start = time.perf_counter()
        run = subprocess.run([*pytest_command, "generated"], cwd=project, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        summary = run.stdout.strip().splitlines()[-1]
        print(f"generated suite: {re.sub(r'=+', '', summary).strip()}; subprocess wall time {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
