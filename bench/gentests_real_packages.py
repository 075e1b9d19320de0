"""gen-tests on real packages from PyPI: per-Function outcomes without and with recordings.

Usage::

    python3 -m venv --system-site-packages /work/venvs/gentests-real
    /work/venvs/gentests-real/bin/pip install --no-deps \\
        entmax==1.3 pytorch-revgrad==0.2.0 torchdiffeq==0.2.5 torchsde==0.2.6 qpth==0.0.18 \\
        e3nn==0.6.0 linear-operator==0.6.1 sparsemax==0.1.9 \\
        trampoline boltons cvxpy qdldl clarabel numdifftools opt_einsum_fx opt_einsum
    python bench/gentests_real_packages.py --venv /work/venvs/gentests-real --work /tmp/gentests-real --agl009

(``--no-deps`` keeps pip away from torch; the second line is what the packages
and their tests import beyond the system site: cvxpy with a solver for qpth's
tests, numdifftools for them too, opt_einsum_fx for e3nn.)

For each package: ``autograd-lint gen-tests`` on the installed package
(``--isolated``, plus the package's entry in :data:`CONFIG`), the generated suite
run with the venv's python; then the package's own tests (from its repository,
at the pinned commit, taken from the ``fetch`` mirror under ``/work/.mirror``,
or shipped in the package) run with ``--autograd-record``, and gen-tests and the
suite again with that recording.  A Function *ran* when one of its generated
tests was not skipped; it *passed* when every test that ran passed.  Prints one
Markdown table row per package and one line per failing test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

WORKTREE = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Package:
    """An installed package, and the tests that record its inputs."""

    name: str  # import name, a directory of site-packages
    repository: str | None  # owner+name of the /work/.mirror directory
    commit: str | None
    tests: tuple[str, ...]  # test paths: in the repository, or (no repository) in site-packages
    pytest_args: tuple[str, ...] = ()  # e.g. ("-k", "...") to run only the tests that call the Functions
    # Further pytest runs (paths and options, in the same tree) recorded into the same file
    # (the recorder merges into an existing recording): tests of one Function elsewhere.
    more_tests: tuple[tuple[str, ...], ...] = ()


PACKAGES = (
    Package("entmax", None, None, ("entmax/test_losses.py", "entmax/test_root_finding.py", "entmax/test_topk.py",
                                   "entmax/test_mask.py")),
    Package("pytorch_revgrad", "janfreyberg+pytorch-revgrad", "330efbe28c70172d152205c8211b37e8a7491392",
            ("tests",)),
    Package("torchdiffeq", "rtqichen+torchdiffeq", "657943acefa826ef04c025ebeb1ff5e9d60dc268",
            ("tests/gradient_tests.py",)),  # event_tests.py never calls odeint_event (ImplicitFnGradientRerouting)
    Package("torchsde", "google-research+torchsde", "eb3a00e31cbd56176270066ed2f62c394cf6acb7",
            ("tests/test_adjoint.py",), ("-k", "test_basic")),
    Package("qpth", "locuslab+qpth", "528e9f629c7d0cfeef766bbcf4902e2fe264c61c", ("test.py",)),
    Package("e3nn", "e3nn+e3nn", "2aa7f58440a06b15352a2cbce01fa4c26f824969", ("tests/math/soft_unit_step_test.py",)),
    Package("linear_operator", "cornellius-gp+linear_operator", "386cff780e1fc17317d3c1ce19604b5637736ca5",
            ("test/functions",),
            # SqrtInvMatmul is called only by the operators' shared test case (152 tests, 48 s).
            more_tests=(("test/operators", "-k", "sqrt_inv_matmul"),)),
    Package("sparsemax", None, None, ()),  # no tests in the package, none in its repository
)

# Issue 25: packages never used before by this project's benches (venv recipe:
#   python3 -m venv /work/venvs/gentests-real25 && .../pip install torch==2.13.0
#   .../pip install --no-deps snntorch==1.0.0 pypose==0.9.5 torch-struct==0.5 pytorch-wavelets==1.3.0 \
#       spikingjelly==2.0.0 norse==1.1.0 diffsort==0.2.0 nir nirtorch
#   .../pip install numpy scipy PyWavelets h5py pytest "setuptools<81" py3nvml dtcwt; .../pip install -e <worktree>
#   (py3nvml, dtcwt: imported by pytorch-wavelets' tests, which otherwise error at collection)
# ).  norse and diffsort are the held-out two: looked at only after the harness changes were done.
PACKAGES_ISSUE25 = (
    Package("snntorch", "jeshraghian+snntorch", "634fc22385ec5581998e62787bbe39b53662140f",
            ("tests/test_snntorch",)),
    Package("pypose", "pypose+pypose", "2b684b00857edae2c2a125a58f806ada95dfa72c",
            ("tests/lietensor/test_lietensor.py",)),
    Package("torch_struct", "harvardnlp+pytorch-struct", "7146de5659ff17ad7be53023c025ffd099866412",
            ("tests/test_algorithms.py",)),
    Package("pytorch_wavelets", "fbcotter+pytorch_wavelets", "9a0c507f04f43c5397e384bb6be8340169b2fd9a",
            # The package's gradient tests are all skipped ("take a very long time"): its forward tests call
            # the Functions too (DWTForward/DWTInverse, DTCWTForward/DTCWTInverse, ScatLayer).
            ("tests/test_dwt_grad.py", "tests/test_dtcwt_grad.py", "tests/test_dwt1d.py", "tests/test_scatnet_bwd.py",
             "tests/test_dwt.py", "tests/test_dtcwt.py", "tests/test_scatnet_fwd.py")),
    Package("spikingjelly", "fangwei123456+spikingjelly", "afb132264a8cbe38d0f221dcef04053e6ba134d3",
            ("test/activation_based/test_neuron_kernel_surrogate_contract.py",
             "test/activation_based/test_functional_neuron.py")),
    Package("norse", "norse+norse", "065a3b45cf13bc8156d18987380f6d26c09f08a2",
            ("norse/torch/functional/test/test_heaviside.py", "norse/torch/functional/test/test_threshold.py",
             "norse/torch/functional/test/test_lif.py")),
    Package("diffsort", None, None, ()),  # no tests in the package or its repository
)
HELD_OUT = frozenset({"norse", "diffsort"})

# [tool.autograd-lint] per package: what a user of the package would declare.
CONFIG = {
    "pytorch_revgrad": '[tool.autograd-lint]\nsurrogate-gradients = '
                       '{"pytorch_revgrad.functional.RevGrad" = "lambda input_, alpha_: -alpha_ * input_"}\n',
}
# With --declared: what the package's authors would declare besides (torchdiffeq
# reroutes gradients on purpose: _StitchGradient sends out's gradient to x1,
# _UncheckedAssign writes past the version counter and passes every gradient through).
DECLARED = {
    "torchdiffeq": '[tool.autograd-lint]\nsurrogate-gradients = {'
                   '"torchdiffeq._impl.misc._StitchGradient" = "lambda x1, out: x1", '
                   '"torchdiffeq._impl.rk_common._UncheckedAssign" = ""}\n',
    # The root R of RootDecomposition (R R^T = A) is defined only up to an orthogonal
    # factor, and its backward is the gradient for losses that do not depend on that
    # factor: not the derivative of forward's R.  Diagonalization's forward is Lanczos
    # with a relative jitter, an approximation of eigh whose derivative backward is
    # (bench/gentests_verify_linear_operator.py): gradcheck passes at 10 times its tolerances.
    "linear_operator": '[tool.autograd-lint]\nsurrogate-gradients = {'
                       '"linear_operator.functions._root_decomposition.RootDecomposition" = ""}\n'
                       'gradcheck-tolerances = {'
                       '"linear_operator.functions._diagonalization.Diagonalization" = "atol=1e-4, rtol=1e-2"}\n',
}
TEST_TIMEOUT = 1800


def site_packages(venv: Path) -> Path:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(WORKTREE)}


def gen_tests(source: Path, package: Package, out: Path, inputs: Path, config: Path | None) -> str:
    command = [sys.executable, "-m", "autograd_lint", "gen-tests", package.name, "--out", str(out),
               "--inputs", str(inputs)]
    command += ["--config", str(config)] if config else ["--isolated"]
    result = subprocess.run(command, cwd=source, capture_output=True, text=True, env=environment())
    return (result.stdout + result.stderr).strip().splitlines()[-1]


def run_suite(python: Path, suite: Path, report: Path,
              timeout: float = TEST_TIMEOUT) -> tuple[dict[str, Counter[str]], list[str], float]:
    """Per-Function outcome counts, the failing node ids with their first message line, wall time.

    An expected failure (xfail: gradcheck of a Function whose backward plainly is not
    the derivative) is "skipped" in JUnit XML: it counts as not run.
    """
    start = time.perf_counter()
    outcomes: dict[str, Counter[str]] = {}
    failures: list[str] = []
    try:
        subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite),
                        f"--junitxml={report}"], capture_output=True, text=True, env=environment(),
                       timeout=timeout)
    except subprocess.TimeoutExpired:  # no report is written: the row says so, the other packages still run
        return outcomes, [f"the suite did not finish within {timeout} s"], time.perf_counter() - start
    elapsed = time.perf_counter() - start
    for case in ElementTree.parse(report).iter("testcase"):
        function = case.get("classname", "").rsplit(".", 1)[-1].removeprefix("Test")
        kinds = [child for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = kinds[0].tag if kinds else "passed"
        outcomes.setdefault(function, Counter())[outcome] += 1
        if outcome in ("failure", "error"):
            message = (kinds[0].get("message") or "").strip().splitlines()
            failures.append(f"{function}::{case.get('name')}: {message[0][:160] if message else ''}")
    return outcomes, failures, elapsed


def classify(outcomes: dict[str, Counter[str]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for counter in outcomes.values():
        ran = counter["passed"] + counter["failure"] + counter["error"]
        counts["functions"] += 1
        if not ran:
            counts["skipped"] += 1
        elif counter["failure"] or counter["error"]:
            counts["ran"] += 1
            counts["failed"] += 1
        else:
            counts["ran"] += 1
            counts["passed"] += 1
    return counts


def record(python: Path, package: Package, sources: Path, work: Path, recording: Path) -> str:
    """Run the package's own tests with the recorder; the pytest summary line."""
    if not package.tests:
        return "no tests"
    if package.repository is None:
        cwd = sources
    else:
        cwd = work / f"{package.name}-repo"
        if not cwd.exists():
            cwd.mkdir(parents=True)
            # Only the test paths: a mirror may lack large files (images) elsewhere in the tree.
            top_levels = sorted({path.split("/")[0] for path in package.tests})
            git = ["git", f"--git-dir=/work/.mirror/{package.repository}/repo"]
            archive = subprocess.run([*git, "archive", package.commit or "HEAD", "--", *top_levels],
                                     capture_output=True)
            if archive.returncode == 0:
                subprocess.run(["tar", "-x", "-C", str(cwd)], input=archive.stdout, check=True)
            else:  # a blob missing elsewhere in the tree fails the archive: the files one by one
                listed = subprocess.run([*git, "ls-tree", "-r", "--name-only", package.commit or "HEAD", "--",
                                         *top_levels], capture_output=True, text=True, check=True).stdout.split()
                for name in listed:
                    blob = subprocess.run([*git, "show", f"{package.commit or 'HEAD'}:{name}"], capture_output=True)
                    if blob.returncode == 0:
                        (cwd / name).parent.mkdir(parents=True, exist_ok=True)
                        (cwd / name).write_bytes(blob.stdout)
    summaries = []
    for arguments in ((*package.pytest_args, *package.tests), *package.more_tests):
        try:
            # The plugin is found through its entry point: PYTHONPATH holds the worktree and its egg-info.
            result = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                     f"--autograd-record-file={recording}", *arguments],
                                    cwd=cwd, capture_output=True, text=True, env=environment(), timeout=TEST_TIMEOUT)
        except subprocess.TimeoutExpired:
            summaries.append(f"timed out after {TEST_TIMEOUT} s")
            continue
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        recorded = next((line for line in lines if line.startswith("autograd-lint:")), "nothing recorded")
        summaries.append(f"{lines[-1].strip('= ') if lines else result.stderr[-200:]}; {recorded}")
    return " / ".join(summaries)


def trim_recording(recording: Path, per_function: int) -> None:
    """Keep, in ``recording``, the ``per_function`` smallest cases of each Function (by recorded elements):
    a bound for a package whose full recorded suite does not finish in time (pypose: 30 min)."""
    data = json.loads(recording.read_text())

    def size(case: dict) -> int:
        shapes = [arg["tensor"].get("shape", []) for arg in case.get("args", []) if isinstance(arg, dict)
                  and isinstance(arg.get("tensor"), dict)]
        total = 0
        for shape in shapes:
            count = 1
            for extent in shape:
                count *= max(int(extent), 1)
            total += count
        return total

    for entry in data.get("functions", {}).values():
        if isinstance(entry, dict) and isinstance(entry.get("cases"), list):
            entry["cases"] = sorted(entry["cases"], key=size)[:per_function]
    recording.write_text(json.dumps(data))


def agl009_cross_check(sources: Path, package: Package, outcomes: dict[str, dict[str, Counter[str]]]) -> list[str]:
    """Where the generated gradgradcheck and the static rule AGL009 disagree about a Function.

    ``outcomes`` maps the Function's test-class name to its per-test outcome counts.
    AGL009 names the class that defines backward (a base class for inherited ones).
    """
    sys.path.insert(0, str(WORKTREE))
    from autograd_lint.config import project_settings
    from autograd_lint.model.discovery import run as discover

    root = sources / package.name
    result = subprocess.run([sys.executable, "-m", "autograd_lint", "check", str(root), "--select", "AGL009",
                             "--isolated", "--output-format", "json", "--exit-zero", "-j", "1"],
                            capture_output=True, text=True, env=environment())
    flagged = {d["message"].split(".backward", 1)[0].split(".vjp", 1)[0]
               for d in json.loads(result.stdout or "{}").get("diagnostics", [])}
    settings = project_settings([str(root)], None, True)
    lines = []
    for spec in discover([str(root)], settings, lambda analysis, settings: None).functions:
        backward = spec.backward_method
        if backward is None:
            continue
        name = spec.qualname.replace(".<locals>.", "_").replace(".", "_")
        tests = outcomes.get(name, Counter())
        gradgrad = tests.get("gradgradcheck", Counter())
        static = backward.defined_in.rsplit(".", 1)[-1] in flagged
        failed = bool(gradgrad["failure"] or gradgrad["error"])
        passed = bool(gradgrad["passed"]) and not failed
        if failed and not static:
            lines.append(f"  {spec.qualname}: gradgradcheck fails, AGL009 silent")
        elif static and passed:
            lines.append(f"  {spec.qualname}: AGL009 reports it, gradgradcheck passes")
        elif failed and static:
            lines.append(f"  {spec.qualname}: both (gradgradcheck fails, AGL009 reports it)")
        elif static and backward.is_once_differentiable is False and not gradgrad:
            lines.append(f"  {spec.qualname}: AGL009 reports it, gradgradcheck did not run")
    return lines


def test_outcomes(report: Path) -> dict[str, dict[str, Counter[str]]]:
    """Test class -> check name (test_ and the case id removed) -> outcome counts."""
    found: dict[str, dict[str, Counter[str]]] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        function = case.get("classname", "").rsplit(".", 1)[-1].removeprefix("Test")
        check = (case.get("name") or "").split("[", 1)[0].removeprefix("test_")
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        found.setdefault(function, {}).setdefault(check, Counter())[kinds[0] if kinds else "passed"] += 1
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=None, help="package import names")
    parser.add_argument("--packages", choices=("earlier", "issue25"), default="earlier",
                        help="the earlier packages (PACKAGES) or issue 25's (PACKAGES_ISSUE25)")
    parser.add_argument("--declared", action="store_true",
                        help="add the declarations of DECLARED (surrogate gradients, tolerances) to the configuration")
    parser.add_argument("--modes", nargs="+", choices=("without", "with"), default=["without", "with"],
                        help="run without and/or with a recording (default both)")
    parser.add_argument("--agl009", action="store_true",
                        help="cross-check failing gradgradchecks with the static rule AGL009")
    parser.add_argument("--reuse-recording", action="store_true",
                        help="with recording: use the recording of an earlier run in --work when there is one")
    parser.add_argument("--suite-timeout", type=float, default=TEST_TIMEOUT,
                        help="seconds a generated suite may run (default %(default)s)")
    parser.add_argument("--cases-per-function", type=int, default=None,
                        help="with recording: keep only this many of each Function's recorded cases, the smallest")
    args = parser.parse_args()
    python = args.venv / "bin" / "python"
    sources = site_packages(args.venv)
    args.work.mkdir(parents=True, exist_ok=True)
    print("| package | Functions | without recording: ran / passed / failed / skipped | with recording: "
          "ran / passed / failed / skipped | suite time without / with |")
    print("| --- | --- | --- | --- | --- |")
    details: list[str] = []
    for package in PACKAGES if args.packages == "earlier" else PACKAGES_ISSUE25:
        if args.only and package.name not in args.only:
            continue
        config = None
        declared = DECLARED.get(package.name) if args.declared else None
        if package.name in CONFIG or declared:
            config = args.work / f"{package.name}.toml"
            config.write_text(declared or CONFIG[package.name])
        cells = []
        times = []
        for mode in args.modes:
            recording = args.work / f"{package.name}-inputs.json"
            if mode == "without":
                recording.unlink(missing_ok=True)
            elif args.reuse_recording and recording.exists():
                details.append(f"{package.name} own tests: not run again, recording {recording} reused")
            else:
                details.append(f"{package.name} own tests: {record(python, package, sources, args.work, recording)}")
            if mode == "with" and args.cases_per_function and recording.exists():
                trim_recording(recording, args.cases_per_function)
                details.append(f"{package.name}: recording trimmed to the {args.cases_per_function} smallest "
                               "case(s) of each Function")
            suite = args.work / f"{package.name}-{mode}"
            summary = gen_tests(sources, package, suite, recording, config)
            details.append(f"{package.name} {mode} recording: {summary}")
            outcomes, failures, elapsed = run_suite(python, suite, args.work / f"{package.name}-{mode}.xml",
                                                 args.suite_timeout)
            counts = classify(outcomes)
            cells.append(f"{counts['ran']} / {counts['passed']} / {counts['failed']} / {counts['skipped']}")
            times.append(f"{elapsed:.1f} s")
            details.extend(f"  {mode}: FAILED {failure}" for failure in failures)
            if args.agl009:
                details.append(f"{package.name} {mode} recording, gradgradcheck vs AGL009:")
                details.extend(agl009_cross_check(sources, package,
                                                  test_outcomes(args.work / f"{package.name}-{mode}.xml")) or
                               ["  no Function with a gradgradcheck or AGL009 finding"])
        print(f"| {package.name} | {counts['functions']} | {' | '.join(cells)} | {' / '.join(times)} |")
    print()
    print("\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
