"""What a single-file ``check`` costs (pre-commit's case), next to another tree of autograd-lint.

Usage:
  python bench/startup.py [--rounds N] [--other SRC] [--cache] FILE [FILE ...]

Each round runs, for each FILE, ``check --isolated --no-cache FILE`` (with
``--cache``: ``check --isolated FILE``, the cache warm, as pre-commit's second run
over unchanged files) with this
tree's ``autograd_lint`` and (with ``--other``, a directory holding another
``autograd_lint`` package, e.g. a ``git archive`` of main) with that one, in
alternation, each in a fresh process of this interpreter with ``-P`` and the
tree first on ``sys.path``.  Printed: the median wall and CPU time (user+sys, from
``getrusage``) per file and tree, and the modules each imported (``-X importtime``,
one run): the number of libcst and rule modules and the total import time.
Bytecode is written (``PYTHONDONTWRITEBYTECODE`` unset), as for an installed package.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# As the console script does: `console` where the tree has it (it ends a check without the
# interpreter's teardown), else `main`.
_LAUNCH = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from autograd_lint import cli; "
    "cli.console() if hasattr(cli, 'console') else sys.exit(cli.main())"
)


def command(src: Path, path: str, *extra: str, cache: bool = False) -> list[str]:
    # A tree from before the result cache has no --no-cache (and no cache).
    cached = "--no-cache" in (src / "autograd_lint" / "lint" / "commands" / "check.py").read_text()
    no_cache = ["--no-cache"] if cached and not cache else []
    return [sys.executable, "-P", *extra, "-c", _LAUNCH, str(src), "check", "--isolated", *no_cache, "--exit-zero", path]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imports(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:") and "self" not in line]
    names = [row[2].strip() for row in rows]
    total = sum(int(row[0].split(":")[1]) for row in rows) / 1e6
    libcst = sum(name.startswith("libcst") for name in names)
    rules = sum(name.startswith("autograd_lint.rules") for name in names)
    return f"{len(names)} modules imported in {total:.3f} s ({libcst} of libcst, {rules} of autograd_lint.rules)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--other", type=Path, help="a directory holding another autograd_lint package")
    parser.add_argument(
        "--cache",
        action="store_true",
        help="with the result cache (in .autograd_lint_cache/ of the working directory), the file unchanged: "
        "pre-commit run again on the same files",
    )
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    trees = {"this": ROOT, **({"other": args.other} if args.other else {})}
    print(f"load {os.getloadavg()[0]:.1f}")
    for path in args.files:
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        for src in trees.values():  # untimed: bytecode written, files cached
            subprocess.run(command(src, path, cache=args.cache), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for _ in range(args.rounds):
            for name, src in trees.items():
                times[name].append(timed(command(src, path, cache=args.cache), env))
        for name, src in trees.items():
            wall = statistics.median(t[0] for t in times[name])
            cpu = statistics.median(t[1] for t in times[name])
            print(f"{path}  {name:5}  wall {wall:.3f} s  CPU {cpu:.3f} s   {imports(command(src, path, '-X', 'importtime', cache=args.cache), env)}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
