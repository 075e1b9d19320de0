"""Whether a change leaves ``autograd-lint check`` output byte for byte as it was.

Usage:
  python bench/same_output.py run --out DIR [--ref REF] [--only NAME ...] [--extra DIR ...] [--jobs N] [--cache MODE]
  python bench/same_output.py compare BEFORE_DIR AFTER_DIR

``run`` lints every tree of the benches (bench/accuracy_repos.txt, which holds
the repositories of bench/fuzz_repos.txt at the same commits, and the installed
torch package) with every rule code named on the command line (``--select``
with the whole catalogue, not a group name whose meaning may change), in the
text and JSON output formats, and writes each run's exit code, stdout and
stderr to DIR/<tree>.<format>.  ``--extra`` lints further trees already on disk
(named by their directory), e.g. repositories no bench has tuned on.  With ``--ref``, the autograd_lint package of
that git commit is extracted to DIR/src and run instead of the working tree's,
with this interpreter (so a refactoring can be compared with the commit
before it).  Trees are extracted as bench/accuracy.py does
(/work/realcode/<name>, from the ``fetch`` tool's mirrors).

``--cache`` says how ``check``'s result cache is used: ``off`` (``--no-cache``, the
default, so that the output is the analysis's own), ``cold`` (the tree's
``.autograd_lint_cache`` removed first: every result computed, then stored) or ``warm``
(the same run made twice, the second recorded: every result it can take from the cache).

``compare`` prints the files of two runs that differ, and exits 1 if any does.

Issue 27's check (a result from the cache is the one a fresh run gives)::

  nice -n 10 .venv/bin/python bench/same_output.py run --out /tmp/same-off --extra /work/realcode/pytorch-test_custom_ops
  nice -n 10 .venv/bin/python bench/same_output.py run --cache cold --out /tmp/same-cold --extra /work/realcode/pytorch-test_custom_ops
  nice -n 10 .venv/bin/python bench/same_output.py run --cache warm --out /tmp/same-warm --extra /work/realcode/pytorch-test_custom_ops
  .venv/bin/python bench/same_output.py compare /tmp/same-off /tmp/same-cold
  .venv/bin/python bench/same_output.py compare /tmp/same-off /tmp/same-warm

Reproduce issue 20's check (behaviour unchanged by the layout work)::

  nice -n 10 .venv/bin/python bench/same_output.py run --ref 1b46f4f --out /tmp/same-before
  nice -n 10 .venv/bin/python bench/same_output.py run --out /tmp/same-after
  .venv/bin/python bench/same_output.py compare /tmp/same-before /tmp/same-after
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import accuracy  # noqa: E402  (bench/accuracy.py: the pinned trees and their extraction)

FORMATS = ("text", "json")
# Runs the package found first on sys.path[1] (the given source tree); -P keeps the
# working directory (a linted tree) from shadowing it or the standard library.
# As the console script does: `console` where the tree has it (it ends a check without the
# interpreter's teardown), else `main`.
_LAUNCH = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from autograd_lint import cli; "
    "cli.console() if hasattr(cli, 'console') else sys.exit(cli.main())"
)
_CODES = (
    "import sys; sys.path.insert(0, sys.argv[1]); from autograd_lint.rules import all_rules; "
    "print(','.join(r.code for r in all_rules()))"
)


def fuzz_slugs() -> dict[str, str]:
    """owner/name -> commit of bench/fuzz_repos.txt."""
    pins = {}
    for line in (BENCH / "fuzz_repos.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            slug, commit = line.split()
            pins[slug] = commit
    return pins


def trees(only: list[str] | None) -> list[accuracy.PinnedRepo]:
    """The pinned repositories of both benches, each once (those named in ``only``, if given)."""
    repos = accuracy.pinned_repos()
    pinned = {repo.slug: repo.commit for repo in repos}
    for slug, commit in fuzz_slugs().items():
        if pinned.get(slug) != commit:
            # Not the same tree as the accuracy bench's: lint it under its own name.
            repos.append(accuracy.PinnedRepo(slug.replace("/", "+") + "@" + commit[:12], slug, commit))
    return [repo for repo in repos if only is None or repo.name in only]


def source_tree(ref: str | None, out: Path) -> Path:
    """The directory holding the autograd_lint package to run."""
    if ref is None:
        return ROOT
    src = out / "src"
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "autograd_lint"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    return src


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    src = source_tree(args.ref, out)
    codes = subprocess.run(
        [sys.executable, "-P", "-c", _CODES, str(src)], check=True, capture_output=True, text=True
    ).stdout.strip()
    (out / "codes.txt").write_text(codes + "\n")
    located = [(repo.name, accuracy.extract(repo, args.mirrors, args.realcode)) for repo in trees(args.only)]
    located += [(Path(extra).name, Path(extra)) for extra in args.extra]
    # A source tree from before the cache has no --no-cache (and no cache).
    has_cache = "--no-cache" in (src / "autograd_lint" / "lint" / "commands" / "check.py").read_text()
    for name, tree in located:
        for output_format in args.formats:
            command = [
                sys.executable, "-P", "-c", _LAUNCH, str(src), "check", "--isolated", "--select", codes,
                "--output-format", output_format, "--jobs", str(args.jobs), ".",
            ]  # fmt: skip
            if has_cache and args.cache == "off":
                command.insert(-1, "--no-cache")
            if args.cache == "cold":
                shutil.rmtree(tree / ".autograd_lint_cache", ignore_errors=True)
            elif args.cache == "warm":
                subprocess.run(command, cwd=tree, capture_output=True)
            started = time.perf_counter()
            done = subprocess.run(command, cwd=tree, capture_output=True)
            seconds = time.perf_counter() - started
            record = b"exit %d\n--- stdout\n%s--- stderr\n%s" % (done.returncode, done.stdout, done.stderr)
            (out / f"{name}.{output_format}").write_bytes(record)
            print(f"{name:28} {output_format:5} exit {done.returncode}  {len(done.stdout):>9} bytes  {seconds:6.1f} s")


def compare(args: argparse.Namespace) -> None:
    before, after = Path(args.before), Path(args.after)
    names = sorted({p.name for p in before.iterdir() if p.is_file()} | {p.name for p in after.iterdir() if p.is_file()})
    differ = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"{name}: only in {before if a.exists() else after}")
            differ += 1
        elif a.read_bytes() != b.read_bytes():
            print(f"{name}: differs")
            differ += 1
    print(f"{len(names) - differ} of {len(names)} identical")
    sys.exit(1 if differ else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    runner = sub.add_parser("run")
    runner.add_argument("--out", required=True)
    runner.add_argument("--ref", help="a git commit whose autograd_lint to run (default: the working tree)")
    runner.add_argument(
        "--only", nargs="*", default=None, help="tree names (as in bench/accuracy_repos.txt); none: only --extra"
    )
    runner.add_argument("--extra", nargs="*", default=[], help="further trees to lint, by directory")
    runner.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    runner.add_argument("--jobs", type=int, default=2)
    runner.add_argument("--cache", choices=("off", "cold", "warm"), default="off", help="how check's result cache is used")
    runner.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    runner.add_argument("--realcode", type=Path, default=Path("/work/realcode"))
    comparer = sub.add_parser("compare")
    comparer.add_argument("before")
    comparer.add_argument("after")
    args = parser.parse_args()
    run(args) if args.command == "run" else compare(args)


if __name__ == "__main__":
    main()
