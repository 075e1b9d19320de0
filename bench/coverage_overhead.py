"""Time a backward-heavy test suite under coverage, with and without --autograd-cov.

Runs ``coverage run -m pytest`` over ``bench/coverage/suite``: 60 tests,
6,000 forward and backward passes on tiny tensors through six small custom
Functions (4,000 passes through two of them, with a tensor hook registered
in every forward and a Module full backward hook; 2,000 through a chain of
eight, one of them new-style with ``setup_context``), all on the main thread.  That is the common
case, where the thread bridge has nothing to add and only costs.  Coverage
measures in both arms; the only difference is the plugin (``-p
no:autograd_lint_cov`` against ``--autograd-cov``, which also builds and
prints the per-Function table).

    python bench/coverage_overhead.py [--repeat N] [--branch] [--no-compile] [--report none]

The arms take turns, in alternating order (off-on, on-off, ...), after one
warm-up run of each.  For the whole process and for the test loop alone (the
suite's conftest.py prints its wall and CPU time), it prints each arm's
median with its min-max range, the added time of the medians, and the
median and range of the per-round ratios.  CPU time is the child process's
user+sys time (``getrusage``), which other load on the machine disturbs
less than wall time.  The plugin measured is whichever ``autograd_lint``
the interpreter imports (printed; set PYTHONPATH to measure another tree).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = Path(__file__).parent / "coverage" / "suite"
METRICS = ("process wall", "process cpu", "test loop wall", "test loop cpu")
TARGET = 3.0  # percent


def run_once(directory: Path, plugin_args: list[str], branch: bool) -> dict[str, float]:
    """One ``coverage run -m pytest``: seconds per metric."""
    command = [sys.executable, "-m", "coverage", "run", *(["--branch"] if branch else []), "-m", "pytest", "-q", "-s"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command + plugin_args, cwd=directory, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(result.stdout + result.stderr)
    loop = re.search(r"test loop: ([0-9.]+) s wall ([0-9.]+) s cpu", result.stdout)
    assert loop is not None, result.stdout
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "process wall": wall,
        "process cpu": cpu,
        "test loop wall": float(loop.group(1)),
        "test loop cpu": float(loop.group(2)),
    }


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _plugin_location() -> str:
    script = "import autograd_lint, os; print(os.path.dirname(autograd_lint.__file__))"
    # From outside the repository, as the suite runs: PYTHONPATH decides.
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tempfile.gettempdir(), check=False
    ).stdout.strip()


def _percent(on: float, off: float) -> str:
    return f"{100 * (on / off - 1):+.1f} %"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds (one run of each arm per round)")
    parser.add_argument("--branch", action="store_true", help="measure with coverage --branch")
    parser.add_argument("--no-compile", action="store_true", help="pass --autograd-cov-no-compile")
    parser.add_argument(
        "--report", choices=("term", "none"), default="term",
        help="--autograd-cov-report: none builds no per-Function table, so it leaves out the "
        "analyser run and measures only the tracing and counting (default: term)",
    )
    args = parser.parse_args()
    arms = {
        "off": ["-p", "no:autograd_lint_cov"],
        # The default configuration: the per-Function table is built and printed.
        "on": ["--autograd-cov", f"--autograd-cov-report={args.report}"]
        + (["--autograd-cov-no-compile"] if args.no_compile else []),
    }
    print(
        f"python {platform.python_version()}, torch {_version('torch')}, coverage {_version('coverage')}"
        f"{' --branch' if args.branch else ''}, {os.cpu_count()} CPUs, plugin from {_plugin_location()}"
    )
    load_before = os.getloadavg()
    samples: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "suite"
        shutil.copytree(SUITE, directory)
        for plugin_args in arms.values():  # warm the file system caches and bytecode
            run_once(directory, plugin_args, args.branch)
        for round_ in range(args.repeat):
            order = ("off", "on") if round_ % 2 == 0 else ("on", "off")
            for name in order:
                samples[name].append(run_once(directory, arms[name], args.branch))
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min): before {load_before[0]:.1f} {load_before[1]:.1f} {load_before[2]:.1f}, "
          f"after {load_after[0]:.1f} {load_after[1]:.1f} {load_after[2]:.1f}")
    print(f"{args.repeat} rounds; seconds: median [min-max]")
    print(f"{'':15} {'without plugin':>22} {'with --autograd-cov':>22}  {'added (medians)':>15}  per-round ratio: median [min, max]")
    noisy = False
    for metric in METRICS:
        off = [s[metric] for s in samples["off"]]
        on = [s[metric] for s in samples["on"]]
        ratios = [b / a for a, b in zip(off, on)]
        m_off, m_on = statistics.median(off), statistics.median(on)
        spread = max((max(v) - min(v)) / statistics.median(v) for v in (off, on))
        noisy |= metric.endswith("wall") and 100 * spread > TARGET
        print(
            f"{metric:15} {m_off:7.3f} [{min(off):.3f}-{max(off):.3f}] {m_on:7.3f} [{min(on):.3f}-{max(on):.3f}]"
            f"  {_percent(m_on, m_off):>15}  {_percent(statistics.median(ratios), 1)} "
            f"[{_percent(min(ratios), 1)}, {_percent(max(ratios), 1)}]"
        )
    if noisy:
        print(f"note: the wall-time spread of an arm exceeds {TARGET:g} %, the size of the target; "
              f"read the CPU-time rows and the per-round ratios")
    return 0


if __name__ == "__main__":
    sys.exit(main())
