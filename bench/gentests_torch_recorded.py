"""gen-tests on torch's own Functions, without and with a recording: per-Function outcomes.

Usage (from the repository root, with expecttest installed beside torch)::

    python bench/gentests_torch_recorded.py --work /tmp/torchrec

1. records ``bench/gentests_torch_driver.py`` (``pytest --autograd-record-torch``;
   see that file for why it stands in for torch's test files; ``--driver`` names
   another, ``bench/gentests_torch_cuda_driver.py`` on a machine with a GPU);
2. ``autograd-lint gen-tests --isolated TORCH_DIR``, without and with ``--inputs``;
3. runs both generated suites (``test_gradcheck_*.py``) and prints, per Function
   (generated test class), ran / passed / failed / skipped, the totals over torch's
   own Functions and over the ones only the recording adds (classes defined inside
   a function, pickled with their calls), and every failing test.

A Function *ran* when one of its tests ran (not skipped, not an expected
failure); it *failed* when one of them failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree

WORKTREE = Path(__file__).resolve().parents[1]


def run(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    path = os.pathsep.join(filter(None, (str(WORKTREE), os.environ.get("PYTHONPATH"))))
    subprocess.run(command, cwd=cwd, env={**os.environ, "PYTHONPATH": path}, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def outcomes(report: Path) -> tuple[dict[str, Counter[str]], list[str]]:
    """Test class (generated module tail + class) -> outcome counts; failing tests with their first line."""
    found: dict[str, Counter[str]] = {}
    failures = []
    for case in ElementTree.parse(report).iter("testcase"):
        name = case.get("classname", "").split("test_gradcheck_")[-1]
        if not name:  # a module skipped at collection (it needs CUDA): each of its classes is skipped
            module = (case.get("name") or "").rsplit(".", 1)[-1]
            path = report.parent / f"gt-{report.stem.removeprefix('junit-')}" / f"{module}.py"
            for line in path.read_text().splitlines() if path.exists() else []:
                if line.startswith("class Test"):
                    cls = line.removeprefix("class ").split("(")[0].split(":")[0]
                    found.setdefault(f"{module.removeprefix('test_gradcheck_')}.{cls}", Counter())["skipped"] += 1
            continue
        kinds = [child for child in case if child.tag in ("failure", "error", "skipped")]
        kind = kinds[0].tag if kinds else "passed"
        if kind == "skipped" and (kinds[0].get("type") or "") == "pytest.xfail":
            kind = "xfail"
        found.setdefault(name, Counter())[kind] += 1
        if kind in ("failure", "error"):
            message = (kinds[0].get("message") or "").strip().splitlines()
            failures.append(f"{name}::{case.get('name')}: {message[0][:200] if message else ''}")
    return found, failures


def verdict(counts: Counter[str]) -> str:
    if counts["failure"] + counts["error"]:
        return "failed"
    return "passed" if counts["passed"] else "skipped"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/torchrec"))
    parser.add_argument("--driver", type=Path, default=WORKTREE / "bench" / "gentests_torch_driver.py",
                        help="the test file whose calls are recorded (the CUDA one: gentests_torch_cuda_driver.py)")
    args = parser.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    import importlib.util

    if importlib.util.find_spec("expecttest") is None:
        # torch.testing._internal imports it: without it, most of torch's Functions live in modules
        # the generated tests skip as unimportable (5 of 78 ran instead of 18), and the driver's
        # recording comes out empty. Numbers from such a run would look like a regression.
        print("bench/gentests_torch_recorded.py needs expecttest beside torch: pip install expecttest",
              file=sys.stderr)
        return 2
    import torch

    torch_dir = os.path.dirname(torch.__file__)
    recording = work / "inputs.json"
    recording.unlink(missing_ok=True)
    seconds = {"record": run([python, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                              str(args.driver.resolve()),
                              f"--autograd-record-file={recording}", "--autograd-record-torch"], WORKTREE)}
    results = {}
    for label, extra in (("without", []), ("with", ["--inputs", str(recording)])):
        out = work / f"gt-{label}"
        subprocess.run(["rm", "-rf", str(out)], check=True)
        # --inputs defaults to .autograd-lint/inputs.json of the working directory: run where there is none.
        run([python, "-m", "autograd_lint", "gen-tests", "--isolated", "--out", str(out), *extra, torch_dir], work)
        report = work / f"junit-{label}.xml"
        seconds[label] = run([python, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                              *sorted(str(p) for p in out.glob("test_gradcheck_*.py")), "--continue-on-collection-errors",
                              f"--junitxml={report}"], work)
        results[label] = outcomes(report)
    before, _ = results["without"]
    after, failures = results["with"]
    print("| Function (generated module.class) | without | with | tests with: passed/failed/skipped/xfail |")
    print("| --- | --- | --- | --- |")
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name, Counter())
        print(f"| `{name}` | {verdict(a) if a else '(not generated)'} | {verdict(b)} | "
              f"{b['passed']}/{b['failure'] + b['error']}/{b['skipped']}/{b['xfail']} |")
    for label, (found, _) in results.items():
        own = {n: c for n, c in found.items() if n in before}
        added = {n: c for n, c in found.items() if n not in before}
        for what, group in (("torch's own Functions", own), ("added by the recording", added)):
            counts = Counter(verdict(c) for c in group.values())
            ran = counts["passed"] + counts["failed"]
            print(f"{label} recording, {what}: {len(group)} Functions, {ran} ran, {counts['failed']} failed, "
                  f"{counts['passed']} passed, {counts['skipped']} skipped")
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    print("failing tests with the recording:")
    for line in failures:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
