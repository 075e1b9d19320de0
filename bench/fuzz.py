"""The long fuzz run: generated programs and mutated real Function files (see docs/robustness.md).

Usage:
    python bench/fuzz.py programs --count 10000 [--out DIR]
    python bench/fuzz.py mutations --repos REPOS --count 5000 [--out DIR]

``programs``: hypothesmith programs, each placed at module level after a Function
and inside its ``forward``.  ``mutations``: the Function files of the
repositories pinned in ``bench/fuzz_repos.txt`` (extracted under REPOS), each
mutated (truncation, deleted or duplicated lines, mixed endings, BOM, NUL,
invalid UTF-8, tabs, form feeds and other non-breaks, long lines, deep nesting),
checked alone and, in batches of 100, by ``autograd-lint check`` over a directory.
Every file is checked in this process against the properties of
``tests/robustness/fuzz_support.py``; a failure is saved under ``--out`` with
its reason, and the figures are printed and written to ``--out/figures.json``
as the run goes (so an interrupted run still says how far it got).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "robustness"))

from fuzz_support import PropertyFailure, check_file, check_run, embed, mutate  # noqa: E402

_BATCH = 100
# One file taking more CPU than this counts as a hang. CPU, not wall time: on the shared
# 2-core machine a file that needs 65 s of CPU took 534 s of wall time while the test
# suite ran beside the fuzzing (the 2,900-deep chain, checked and fixed twice).
_FILE_SECONDS = 300.0


class Tally:
    def __init__(self, out: Path, kind: str) -> None:
        self.out = out
        self.kind = kind
        self.checked = 0
        self.errors_reported = 0
        self.failures: list[dict[str, str]] = []
        self.slowest = 0.0
        self.slowest_cpu = 0.0
        self.runs = 0
        self.started = time.time()

    def fail(self, reason: str, data: bytes, label: str) -> None:
        name = f"{self.kind}-{len(self.failures):04d}.py.bin"
        (self.out / name).write_bytes(data)
        self.failures.append({"file": name, "input": label, "reason": reason[:4000]})

    def save(self) -> None:
        figures = {
            "kind": self.kind,
            "files_checked": self.checked,
            "files_reported_as_errors": self.errors_reported,
            "directory_runs": self.runs,
            "failures": self.failures,
            "slowest_file_s": round(self.slowest, 2),
            "slowest_file_cpu_s": round(self.slowest_cpu, 2),
            "elapsed_s": round(time.time() - self.started, 1),
        }
        (self.out / f"figures-{self.kind}.json").write_text(json.dumps(figures, indent=1))
        print(json.dumps({k: v for k, v in figures.items() if k != "failures"} | {"failures": len(self.failures)}),
              flush=True)


def check_one(tally: Tally, data: bytes, label: str) -> None:
    start, start_cpu = time.time(), time.process_time()
    try:
        outcome = check_file(data)
        tally.errors_reported += outcome.error is not None
    except PropertyFailure as failure:
        tally.fail(str(failure), data, label)
    except BaseException as error:  # a traceback out of the analysis: the worst failure
        tally.fail(f"traceback: {type(error).__name__}: {str(error)[:300]}", data, label)
    elapsed, cpu = time.time() - start, time.process_time() - start_cpu
    tally.slowest = max(tally.slowest, elapsed)
    tally.slowest_cpu = max(tally.slowest_cpu, cpu)
    if cpu > _FILE_SECONDS:
        tally.fail(f"hang: {cpu:.0f} s of CPU ({elapsed:.0f} s of wall time)", data, label)
    tally.checked += 1


def run_batch(tally: Tally, batch: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        try:
            check_run(batch, Path(directory) / "run", timeout=600)
        except PropertyFailure as failure:
            # Keep the batch's files themselves, so that the run can be repeated.
            kept = tally.out / f"batch-{tally.runs:04d}"
            kept.mkdir(exist_ok=True)
            for name, data in batch.items():
                (kept / name).write_bytes(data)
            tally.fail(f"directory run: {failure}", b"", f"batch {kept.name}")
    tally.runs += 1


def programs(count: int, tally: Tally) -> None:
    import hypothesmith
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=count, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(program=hypothesmith.from_grammar(), where=st.sampled_from(["module", "forward"]))
    def one(program: str, where: str) -> None:
        check_one(tally, embed(program, where).encode(), f"hypothesmith/{where}")
        if tally.checked % 250 == 0:
            tally.save()

    one()


def function_files(repos: Path) -> list[str]:
    texts = []
    for path in sorted(repos.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "autograd" in text and "Function" in text and "class " in text and len(text) < 400_000:
            texts.append(text)
    return texts


def mutations(repos: Path, count: int, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    seeds = function_files(repos)
    print(f"{len(seeds)} Function files under {repos}", flush=True)
    batch: dict[str, bytes] = {}
    for index in range(count):
        label, data = mutate(rng.choice(seeds), rng)
        check_one(tally, data, label)
        batch[f"m{index:05d}.py"] = data
        if len(batch) == _BATCH:
            run_batch(tally, batch)
            batch = {}
            tally.save()
    if batch:
        run_batch(tally, batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["programs", "mutations"])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--repos", type=Path, help="directory holding the extracted repositories")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tally = Tally(args.out, args.kind)
    if args.kind == "programs":
        programs(args.count, tally)
    else:
        if args.repos is None:
            parser.error("mutations needs --repos")
        mutations(args.repos, args.count, tally, args.seed)
    tally.save()


if __name__ == "__main__":
    main()
