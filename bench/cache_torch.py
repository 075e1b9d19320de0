"""``check`` with and without its result cache on the torch tree, next to ruff's own cache.

Usage:
  python bench/cache_torch.py [--rounds N] [--ruff PATH] [--tree DIR] [--edit REL] [--kinds KIND ...]

The installed ``torch`` package is copied to a scratch directory (``--tree``), so
that edits never touch the environment.  Each round runs, in this order (alternating
autograd-lint and ruff):

* ``cold``: ``autograd-lint check --no-cache`` against ``ruff check --select F --no-cache``;
* ``warm``: both again with their caches present and the tree unchanged;
* ``edit``: one file (``--edit``, relative to the tree) gets a comment line at its
  end and is checked again by both in the warm tree; the file is then put back and
  both warm caches brought up to date (not timed).

``--kinds`` times only those (``--kinds warm``: the warm pairs alone, a minute instead of
the cold runs' several).

Each run is a fresh process (``autograd-lint check --isolated --exit-zero``,
``ruff check --select F --exit-zero -q``); its wall time and CPU time (user+sys of
the process and its workers, from ``getrusage``) are recorded, and the medians over
the rounds printed with the per-round ratios.  The first round is preceded by one
untimed run of each (caches filled, files in the page cache).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(command: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``command`` (its children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ruff", default=shutil.which("ruff") or "/work/venvs/ruff/bin/ruff")
    parser.add_argument("--tree", type=Path, default=Path("/tmp/bench-cache-torch"))
    parser.add_argument("--edit", default="torch/utils/checkpoint.py", help="the file edited, relative to --tree")
    parser.add_argument("--kinds", nargs="+", choices=("cold", "warm", "edit"), default=["cold", "warm", "edit"])
    args = parser.parse_args()

    import torch  # the installed package: only its location is used (its files are copied)

    source = Path(torch.__file__).parent
    if not (args.tree / "torch").is_dir():
        args.tree.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, args.tree / "torch", ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
    tree = args.tree / "torch"
    ours = [sys.executable, "-P", "-m", "autograd_lint", "check", "--isolated", "--exit-zero", "."]
    ruff = [args.ruff, "check", "--select", "F", "--exit-zero", "-q", "--cache-dir", str(args.tree / ".ruff_cache"), "."]
    edited = tree / Path(args.edit).relative_to("torch")
    original = edited.read_bytes()
    env_note = os.environ.get("PYTHONDONTWRITEBYTECODE")
    print(f"tree {tree} ({sum(1 for _ in tree.rglob('*.py'))} .py files); autograd-lint from {ROOT}; "
          f"PYTHONDONTWRITEBYTECODE={env_note!r}; load {os.getloadavg()[0]:.1f}")

    for command in (ours, ruff):  # untimed: caches filled
        subprocess.run(command, cwd=tree, check=True, stdout=subprocess.DEVNULL)
    results: dict[str, list[tuple[float, float]]] = {}
    for number in range(args.rounds):
        for name, command in (("cold ours", ours[:-1] + ["--no-cache", "."]), ("cold ruff", [*ruff[:-1], "--no-cache", "."]),
                              ("warm ours", ours), ("warm ruff", ruff)):
            if name.split()[0] in args.kinds:
                results.setdefault(name, []).append(timed(command, tree))
        if "edit" not in args.kinds:
            print(f"round {number + 1}: " + "  ".join(f"{k} {v[-1][0]:.2f}s/{v[-1][1]:.2f}s" for k, v in results.items()),
                  flush=True)
            continue
        edited.write_bytes(original + f"\n# edited, round {number}\n".encode())
        for name, command in (("edit ours", ours), ("edit ruff", ruff)):
            results.setdefault(name, []).append(timed(command, tree))
        edited.write_bytes(original)
        for command in (ours, ruff):
            subprocess.run(command, cwd=tree, check=True, stdout=subprocess.DEVNULL)
        print(f"round {number + 1}: " + "  ".join(f"{k} {v[-1][0]:.2f}s/{v[-1][1]:.2f}s" for k, v in results.items()),
              flush=True)
    print(f"\nmedians over {args.rounds} rounds (wall / CPU), load {os.getloadavg()[0]:.1f} at the end:")
    for kind in args.kinds:
        ours_runs, ruff_runs = results[f"{kind} ours"], results[f"{kind} ruff"]
        wall = [a[0] / b[0] for a, b in zip(ours_runs, ruff_runs)]
        cpu = [a[1] / b[1] for a, b in zip(ours_runs, ruff_runs)]
        print(
            f"  {kind}: autograd-lint {statistics.median(r[0] for r in ours_runs):.3f} s / "
            f"{statistics.median(r[1] for r in ours_runs):.3f} s;  ruff {statistics.median(r[0] for r in ruff_runs):.3f} s / "
            f"{statistics.median(r[1] for r in ruff_runs):.3f} s;  ratio per round, median: wall {statistics.median(wall):.2f}x, "
            f"CPU {statistics.median(cpu):.2f}x"
        )


if __name__ == "__main__":
    main()
