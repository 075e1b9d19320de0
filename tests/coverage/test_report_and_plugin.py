"""The per-Function report, the fail options, the coverage.py plugin and the inert default."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_lint.coverage import compile_recorder
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
'''

TEST_OPS = '''\
import torch
from ops import Ran


def test_ran():
    Ran.apply(torch.ones(2, requires_grad=True)).sum().backward()
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
            "Function *forward*backward*double-bwd*jvp*backward threads",
            "ops.py:4::Ran *1 *1 *0 *0 *main",
            "ops.py:14::NeverRan *0 *0 *0 *0 *-",
            "backward never ran: 1 of 2 Functions (50.0% exercised)",
            "FAIL: --autograd-cov-fail-unexercised",
        ]
    )
    report = json.loads((ops_project.path / "report.json").read_text())
    by_name = {f["qualname"]: f for f in report["functions"]}
    assert by_name["Ran"]["counts"] == {
        "forward": {"eager": {"main": 1}},
        "backward": {"eager": {"main": 1}},
    }
    assert by_name["NeverRan"]["backward_ran"] is False and by_name["NeverRan"]["counts"] == {}

    failed = ops_project.runpytest_subprocess(*base, "--autograd-cov-fail-under=60")
    assert failed.ret == 1
    failed.stdout.fnmatch_lines(["FAIL: backward exercised for 50.0% of Functions, under *=60"])


@pytest.mark.slow
@needs_torch
def test_ini_enables_the_plugin(ops_project: pytest.Pytester) -> None:
    ops_project.makeini(
        "[pytest]\nautograd_cov = true\nautograd_cov_compile = false\nautograd_cov_fail_under = 50\n"
    )
    result = ops_project.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ops.py:4::Ran *1 *1 *0 *0 *main"])
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
