"""Wall time of a backward-heavy test suite under coverage, with and without --autograd-cov.

Runs ``coverage run -m pytest`` over ``bench/coverage/suite`` (40 tests, 4,000
backward passes through two custom Functions, a tensor hook and a Module full
backward hook, all on the main thread: the common case, where the bridge has
nothing to add and only costs) alternately without and with the plugin, and
prints the median wall time of each, whole process and test loop alone.

    python bench/coverage_overhead.py [--repeat N] [--branch] [--no-compile]

The test-loop time runs from the first test to the last (the suite's
conftest.py prints it); the whole-process time also includes starting
Python, importing torch and collecting.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = Path(__file__).parent / "coverage" / "suite"


def run_once(directory: Path, plugin_args: list[str], branch: bool) -> tuple[float, float]:
    """One ``coverage run -m pytest``: (whole-process seconds, pytest's test-loop seconds)."""
    command = [sys.executable, "-m", "coverage", "run", *(["--branch"] if branch else []), "-m", "pytest", "-q", "-s"]
    start = time.perf_counter()
    result = subprocess.run(command + plugin_args, cwd=directory, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(result.stdout + result.stderr)
    loop = re.search(r"test loop: ([0-9.]+) s", result.stdout)
    assert loop is not None, result.stdout
    return wall, float(loop.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--branch", action="store_true", help="measure with coverage --branch")
    parser.add_argument("--no-compile", action="store_true", help="pass --autograd-cov-no-compile")
    args = parser.parse_args()
    off = ["-p", "no:autograd_lint_cov"]
    on = ["--autograd-cov", "--autograd-cov-report=none"] + (["--autograd-cov-no-compile"] if args.no_compile else [])
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "suite"
        shutil.copytree(SUITE, directory)
        run_once(directory, off, args.branch)  # warm the file system caches
        samples: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
        for _ in range(args.repeat):
            for name, plugin_args in (("off", off), ("on", on)):
                samples[name].append(run_once(directory, plugin_args, args.branch))
    medians = {
        name: (statistics.median(s[0] for s in runs), statistics.median(s[1] for s in runs))
        for name, runs in samples.items()
    }
    for name, (wall, loop) in medians.items():
        print(f"{name:>3}: process {wall:6.2f} s   test loop {loop:6.2f} s   (median of {args.repeat})")
    (wall_off, loop_off), (wall_on, loop_on) = medians["off"], medians["on"]
    print(f"added: process {100 * (wall_on / wall_off - 1):+.1f} %   test loop {100 * (loop_on / loop_off - 1):+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
