"""Wall time of ``autograd-lint check`` on the installed torch package, next to ruff.

Usage: python bench/lint_torch.py [--runs N] [--tree PATH]

Prints the best-of-N wall time of each command, the ratio, and a CPU profile
summary of one serial run (where the time goes). Needs torch (for its source
tree) and ruff on PATH; neither is imported by autograd-lint itself.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import time
from pathlib import Path


def torch_tree() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed; pass --tree")
    return Path(spec.origin).parent


def best_wall(command: list[str], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def profile_summary(tree: Path) -> str:
    from autograd_lint.model.discovery import run
    from autograd_lint.lint.engine import check_analysis
    from autograd_lint.settings import Settings

    profiler = cProfile.Profile()
    profiler.enable()
    run([tree], Settings(jobs=1), check_analysis)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(r"autograd_lint|parse_module|position_provider", 25)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--profile", action="store_true", help="also print a serial CPU profile")
    args = parser.parse_args()
    tree = args.tree or torch_tree()
    files = sum(1 for _ in tree.rglob("*.py"))
    size = sum(p.stat().st_size for p in tree.rglob("*.py")) / 1e6
    print(f"tree: {tree} ({files} files, {size:.1f} MB), {os.cpu_count()} cores, best of {args.runs}")
    ours = best_wall([sys.executable, "-m", "autograd_lint", "check", "--exit-zero", str(tree)], args.runs)
    print(f"autograd-lint check        {ours:6.2f} s")
    ruff = shutil.which("ruff")
    if ruff:
        theirs = best_wall([ruff, "check", "--select", "F", "--no-cache", "--exit-zero", "-q", str(tree)], args.runs)
        print(f"ruff check --select F      {theirs:6.2f} s")
        print(f"ratio                      {ours / theirs:6.2f} x  (target: under 3x)")
    if args.profile:
        print(profile_summary(tree))


if __name__ == "__main__":
    main()
