"""The per-Function report, the fail options, the coverage.py plugin and the inert default."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_lint.coverage import compile_recorder
from autograd_lint.coverage.pragma import MARKER
from conftest import Run, marked

# The torch tests run torch in subprocesses only: pytester restores sys.modules
# after each test, and torch cannot be imported twice into one process.
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

OPS = '''\
import torch


class Ran(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class NeverRan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class Base(torch.autograd.Function):
    """Never applied itself: its subclasses use its forward and backward."""

    @staticmethod
    def forward(ctx, x):
        return x * ctx.scale if hasattr(ctx, "scale") else x * 4

    @staticmethod
    def backward(ctx, grad):
        return grad * 4


class SubA(Base):
    pass


class SubB(Base):
    pass
'''

TEST_OPS = '''\
import torch
from ops import Ran, SubA, SubB


def test_ran():
    Ran.apply(torch.ones(2, requires_grad=True)).sum().backward()


def test_subclasses():
    for function in (SubA, SubA, SubB):
        function.apply(torch.ones(2, requires_grad=True)).sum().backward()
'''


def test_plugin_module_is_inert_and_cheap_until_enabled() -> None:
    script = (
        "import sys, autograd_lint.coverage.pytest_plugin, autograd_lint.coverage.pragma; "
        "print(sorted(m for m in ('torch', 'coverage') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_version_gate() -> None:
    assert compile_recorder.version_supported("2.13.0+cpu")
    assert compile_recorder.version_supported("2.13.1")
    assert not compile_recorder.version_supported("2.12.1")
    assert not compile_recorder.version_supported("2.14.0a0+git1234")
    assert not compile_recorder.version_supported("nonsense")


@pytest.fixture
def ops_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(ops=OPS, test_ops=TEST_OPS)
    return pytester


@pytest.mark.slow
@needs_torch
def test_fail_options_and_json(ops_project: pytest.Pytester) -> None:
    base = ["-p", "no:cacheprovider", "--autograd-cov", "--autograd-cov-no-compile"]
    result = ops_project.runpytest_subprocess(
        *base, "--autograd-cov-json=report.json", "--autograd-cov-fail-unexercised"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*autograd-cov: runs per Function*",
            "Function *forward*backward*backward code*double-bwd*jvp*backward threads",
            "ops.py:4::Ran *1 *1 *1 *0 *0 *main",
            "ops.py:14::NeverRan *0 *0 *0 *0 *0 *-",
            "ops.py:24::Base *0 *0 *3 *0 *0 *-",
            "ops.py:36::SubA *2 *2 *3 (of Base) *0 *0 *main",
            "ops.py:40::SubB *1 *1 *3 (of Base) *0 *0 *main",
            "backward code never ran: 1 of 5 Functions (80.0% exercised)",
        ]
    )
    # The verdict is the last line, after pytest's own summary.
    assert result.outlines[-1] == (
        "FAIL: autograd-cov: --autograd-cov-fail-unexercised: backward code never ran: NeverRan"
    )
    report = json.loads((ops_project.path / "report.json").read_text())
    by_name = {f["qualname"]: f for f in report["functions"]}
    assert by_name["Ran"]["path"] == "ops.py"
    assert by_name["Ran"]["counts"] == by_name["Ran"]["code_counts"] == {
        "forward": {"eager": {"main": 1}},
        "backward": {"eager": {"main": 1}},
    }
    assert by_name["NeverRan"]["backward_ran"] is False and by_name["NeverRan"]["counts"] == {}
    # Base's code ran three times, through its subclasses.
    assert by_name["Base"]["counts"] == {}
    assert by_name["Base"]["code_counts"]["backward"] == {"eager": {"main": 3}}
    assert by_name["Base"]["backward_ran"] is True
    assert by_name["SubA"]["backward_defined_in"] == "ops.py::Base"
    assert by_name["SubA"]["code_counts"] == {}

    failed = ops_project.runpytest_subprocess(*base, "--autograd-cov-fail-under=90")
    assert failed.ret == 1
    assert failed.outlines[-1] == (
        "FAIL: autograd-cov: backward code ran for 80.0% of Functions, under --autograd-cov-fail-under=90"
    )
    passed = ops_project.runpytest_subprocess(*base, "--autograd-cov-fail-under=80")
    assert passed.ret == 0


@pytest.mark.slow
@needs_torch
def test_report_from_one_tree_marks_only_never_run_code_in_a_copy(
    ops_project: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A report made in one checkout applies to another; inherited backward that ran is left alone."""
    result = ops_project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--autograd-cov", "--autograd-cov-no-compile", "--autograd-cov-json=report.json"
    )
    assert result.ret == 0, result.stdout.str()
    elsewhere = tmp_path_factory.mktemp("other-checkout") / "project"
    shutil.copytree(ops_project.path, elsewhere)
    report = str(elsewhere / "report.json")
    pragma = subprocess.run(
        [sys.executable, "-m", "autograd_lint", "pragma", "--only-unexercised", report, str(elsewhere)],
        capture_output=True, text=True, check=False,
    )
    assert pragma.returncode == 0, pragma.stderr
    assert pragma.stdout.splitlines()[0] == f"{report}: 5 of 5 entries match a Function here; 1 methods never ran"
    marked_lines = [line for line in (elsewhere / "ops.py").read_text().splitlines() if MARKER in line]
    assert marked_lines == [f"    def backward(ctx, grad):  {MARKER}"]
    assert (elsewhere / "ops.py").read_text().splitlines()[19].endswith(MARKER)  # NeverRan.backward, line 20
    assert (ops_project.path / "ops.py").read_text().rstrip() == OPS.rstrip()  # the original is untouched

    # The same report over a tree it was not made for says so.
    stranger = tmp_path_factory.mktemp("stranger")
    (stranger / "other.py").write_text(OPS.replace("class ", "class Other"))
    mismatch = subprocess.run(
        [sys.executable, "-m", "autograd_lint", "pragma", "--only-unexercised", report, str(stranger)],
        capture_output=True, text=True, check=False,
    )
    assert mismatch.returncode == 2
    assert "0 of 5 entries match" in mismatch.stdout
    assert "was the report made for another tree?" in mismatch.stderr


@pytest.mark.slow
@needs_torch
def test_ini_enables_the_plugin(ops_project: pytest.Pytester) -> None:
    ops_project.makeini(
        "[pytest]\nautograd_cov = true\nautograd_cov_compile = false\nautograd_cov_fail_under = 50\n"
    )
    # pytest's printed duration starts at the session start: torch's import
    # (a second or more) must come after it, as it does without the plugin.
    ops_project.makeconftest(
        "import sys\n\n\ndef pytest_sessionstart(session):\n"
        "    print('torch imported at session start:', 'torch' in sys.modules)\n"
    )
    result = ops_project.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["torch imported at session start: False", "ops.py:4::Ran *1 *1 *1 *0 *0 *main"])
    assert "torch.compile recording is off" not in result.stdout.str()


@pytest.mark.slow
@needs_torch
def test_reference_report_of_the_sample_project(lines_on: Run) -> None:
    """Depth 70: levels 0-60 run on the main thread, the 10 beyond on pool threads."""
    report = json.loads((lines_on.root / "report.json").read_text())
    by_name = {f["qualname"]: f for f in report["functions"]}
    assert by_name["RawSquare"]["counts"]["backward"] == {"eager": {"native": 1}}
    assert by_name["Deep"]["counts"]["backward"] == {"eager": {"main": 61, "native": 10}}
    assert by_name["Twice"]["counts"]["double_backward"] == {"eager": {"main": 1}}
    assert by_name["Twice"]["counts"]["jvp"] == {"eager": {"main": 1}}
    assert by_name["AotFwdBwd"]["counts"] == {
        "forward": {"compiled": {"main": 1}},
        "backward": {"compiled": {"main": 1}},
    }
    assert by_name["EagerFwdOnly"]["counts"] == {"forward": {"compiled": {"main": 1}}}
    assert not by_name["NeverBackward"]["backward_ran"]


@pytest.mark.slow
@needs_torch
def test_coverage_plugin_bridges_threads_without_pytest(tmp_path_factory: pytest.TempPathFactory) -> None:
    script = (
        "import _thread, threading, torch\n"
        "from threadlib import RawSquare\n"
        "done = threading.Event()\n"
        "def work():\n"
        "    RawSquare.apply(torch.ones(2, requires_grad=True)).sum().backward()\n"
        "    done.set()\n"
        "_thread.start_new_thread(work, ())\n"
        "assert done.wait(30)\n"
    )
    runs = {}
    for plugin in (False, True):
        root = tmp_path_factory.mktemp("script")
        (root / "threadlib.py").write_text((Path(__file__).parent / "samples" / "threadlib.py").read_text())
        (root / "script.py").write_text(script)
        config = "[run]\nsource = .\n" + ("plugins = autograd_lint.coverage\n" if plugin else "")
        (root / ".coveragerc").write_text(config)
        result = subprocess.run(
            [sys.executable, "-m", "coverage", "run", "script.py"],
            cwd=root, capture_output=True, text=True, env={**os.environ},
        )
        assert result.returncode == 0, result.stderr
        runs[plugin] = Run(root, result.stdout + result.stderr, 0).lines("threadlib.py")
    assert runs[True] - runs[False] == marked("threadlib.py", "raw-bwd")


@pytest.mark.slow
@needs_torch
def test_coverage_plugin_omits_generated_code(tmp_path_factory: pytest.TempPathFactory) -> None:
    """inductor's generated wrappers run as Python files; the coverage.py plugin omits them.

    Without ``source``, coverage measures the files under the current
    directory, so the inductor cache is put there to make the wrappers show.
    """
    compiled_test = (
        "import torch\n\n\ndef test_inductor():\n"
        "    assert torch.compile(lambda x: x * 2 + 1, backend='inductor')(torch.ones(2)).tolist() == [3.0, 3.0]\n"
    )
    measured = {}
    cold: Path | None = None
    for plugin in (False, True):
        root = tmp_path_factory.mktemp("omit")
        if cold is not None:
            # The second run starts from the first run's cache: it loads the same generated
            # wrapper from its own tree without compiling C++ again (a cold compile costs ~12 s of CPU).
            shutil.copytree(cold, root / "inductor-cache")
        cold = root / "inductor-cache"
        (root / "test_compiled.py").write_text(compiled_test)
        (root / ".coveragerc").write_text("[run]\n" + ("plugins = autograd_lint.coverage\n" if plugin else ""))
        result = subprocess.run(
            [sys.executable, "-m", "coverage", "run", "-m", "pytest", "-p", "no:cacheprovider", "--autograd-cov"],
            cwd=root, capture_output=True, text=True, check=False,
            env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor-cache")},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        files = Run(root, result.stdout, 0).data().measured_files()
        generated = [f for f in files if f.startswith(str(root / "inductor-cache"))]
        measured[plugin] = (generated, files, result.stdout)
    generated, files, output = measured[False]
    assert generated, files
    assert "files that are not your code (torch's generated code, this plugin)" in output
    generated, files, output = measured[True]
    assert generated == [] and any(f.endswith("test_compiled.py") for f in files), files
    assert "not your code" not in output
