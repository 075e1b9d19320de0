"""The per-Function report counts custom ops' registered backward (and setup_context) too.

Real coverage.py (``coverage run -m pytest``) over ``custom_ops/``: three ops with
``register_autograd`` (one registered from another file, by the op's name), one of
whose backward never runs, and an autograd.Function beside them.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from autograd_lint.coverage import report
from autograd_lint.coverage.discovery_worker import DiscoveredOp, OpCode, custom_op_backwards, discover
from conftest import CUSTOM_OPS, Run, marked, run_in_copy

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


def _marked(filename: str, tag: str) -> list[int]:
    return sorted(marked(filename, tag, CUSTOM_OPS))


def test_discovery_links_each_registered_backward_to_its_op() -> None:
    found = {d.op: d for d in discover([str(CUSTOM_OPS)]) if isinstance(d, DiscoveredOp)}
    assert sorted(found) == ["covlib::cube", "covlib::never", "covlib::scale"]
    cube = found["covlib::cube"]
    assert cube.path == str(CUSTOM_OPS / "opslib.py")
    # registered in grads.py by the op's name: the functions are grads.py's
    assert cube.backward == OpCode(str(CUSTOM_OPS / "grads.py"), "cube_backward", 13, 15)
    assert cube.setup_context == OpCode(str(CUSTOM_OPS / "grads.py"), "cube_setup", 8, 10)
    assert found["covlib::never"].setup_context is None
    # the child process's JSON gives the same
    assert DiscoveredOp.from_json(json.loads(json.dumps(cube.to_json()))) == cube


def test_ops_without_register_autograd_or_with_a_lambda_have_no_row() -> None:
    assert custom_op_backwards([]) == []
    rows = report.build(report.Runs({}, {}), [], [])
    assert rows == []


def test_fill_lines_marks_unknown_without_coverage_and_splits_the_body() -> None:
    code = report.CodeLines("/p/m.py", "bw", 10, 14)
    row = report.Row("/p/m.py", "bw", 10, True, kind="custom_op", op="ns::op", code_lines={"backward": code})
    report.fill_lines([row], lambda path: None, lambda path: {11})
    assert code.executed is None and code.missing is None
    assert [re.split(r"  +", line) for line in report.format_lines([row], "/p")] == [
        ["custom-op code", "lines run", "missing"],
        ["m.py:10::bw (backward of ns::op)", "not measured", "-"],
    ]
    # the def line (10) and statements after the last line (15) are not the function's
    report.fill_lines([row], lambda path: {10, 11, 12, 13, 14, 15}, lambda path: {10, 11, 13})
    assert (code.executed, code.missing) == ([11, 13], [12, 14])
    assert report.format_lines([row], "/p")[1].split()[-3:] == ["2/4", "12,", "14"]
    assert row.backward_ran  # a line ran (under torch.compile, counts can be 0)
    # backward in a file coverage did not measure, setup_context in one it did: only the first is unknown
    setup = report.CodeLines("/p/s.py", "setup", 20, 22)
    both = report.Row("/p/m.py", "bw", 10, True, kind="custom_op", op="ns::op",
                      code_lines={"backward": report.CodeLines("/p/m.py", "bw", 10, 14), "setup_context": setup})
    report.fill_lines([both], {"/p/s.py": {20, 21, 22}}.get, {"/p/s.py": {21}}.get)
    assert both.code_lines["backward"].executed is None and (setup.executed, setup.missing) == ([21], [22])


@pytest.fixture(scope="module")
def custom_op_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run = run_in_copy(
        tmp_path_factory,
        ["coverage", "run", "-m", "pytest", "--autograd-cov", "--autograd-cov-no-compile",
         "--autograd-cov-json=report.json", "--autograd-cov-fail-unexercised"],
        project=CUSTOM_OPS,
    )
    return run


@pytest.mark.slow
@needs_torch
@pytest.mark.xdist_group("custom_op_run")  # its module fixture runs once, on one worker
def test_report_lists_each_op_backward_with_its_lines(custom_op_run: Run) -> None:
    run = custom_op_run
    # never's backward never ran: the run fails, naming it
    assert run.returncode == 1, run.output
    lines = run.output.splitlines()
    # The verdict comes after pytest's own summary (stderr, printed after it here, may hold warnings).
    verdict = "FAIL: autograd-cov: --autograd-cov-fail-unexercised: backward code never ran: never_backward"
    assert verdict in lines, run.output
    summary = next(i for i, line in enumerate(lines) if " passed" in line and line.startswith("="))
    assert lines.index(verdict) == summary + 1, run.output
    table = [line.split() for line in lines]
    expected_rows = [
        # name, forward, backward, backward code
        ["grads.py:13::cube_backward", "(backward", "of", "covlib::cube)", "2", "2", "2", "0", "0", "main"],
        ["opslib.py:16::scale_backward", "(backward", "of", "covlib::scale)", "1", "1", "1", "0", "0", "main"],
        ["opslib.py:35::never_backward", "(backward", "of", "covlib::never)", "0", "0", "0", "0", "0", "-"],
        ["opslib.py:42::Twice", "1", "1", "1", "0", "0", "main"],
    ]
    for row in expected_rows:
        assert row in table, run.output
    assert ["grads.py:13::cube_backward", "(backward", "of", "covlib::cube)", "2/2", "-"] in table
    assert ["grads.py:8::cube_setup", "(setup_context", "of", "covlib::cube)", "2/2", "-"] in table
    assert ["opslib.py:16::scale_backward", "(backward", "of", "covlib::scale)", "2/3",
            str(_marked("opslib.py", "scale_backward_missing")[0])] in table
    assert ["opslib.py:11::scale_setup", "(setup_context", "of", "covlib::scale)", "2/2", "-"] in table
    assert ["opslib.py:35::never_backward", "(backward", "of", "covlib::never)", "0/1",
            str(_marked("opslib.py", "never_backward_missing")[0])] in table
    assert "backward code never ran: 1 of 4 Functions and custom-op backwards (75.0% exercised)" in lines

    data = json.loads((run.root / "report.json").read_text())
    by_name = {f["qualname"]: f for f in data["functions"]}
    assert by_name["Twice"]["kind"] == "autograd.Function" and "op" not in by_name["Twice"]
    # A Function's entry carries the lines of the backward it uses, as a custom op's does.
    assert by_name["Twice"]["lines"] == {"backward": {
        "path": "opslib.py", "qualname": "Twice.backward", "line": 48, "executed": [49], "missing": []}}
    scale = by_name["scale_backward"]
    assert scale["kind"] == "custom_op" and scale["op"] == "covlib::scale"
    assert scale["counts"] == {"forward": {"eager": {"main": 1}}, "backward": {"eager": {"main": 1}}}
    assert scale["lines"]["backward"]["executed"] == _marked("opslib.py", "scale_backward")
    assert scale["lines"]["backward"]["missing"] == _marked("opslib.py", "scale_backward_missing")
    assert scale["lines"]["setup_context"] == {
        "path": "opslib.py", "qualname": "scale_setup", "line": 11,
        "executed": _marked("opslib.py", "scale_setup"), "missing": [],
    }
    cube = by_name["cube_backward"]
    assert cube["path"] == "grads.py" and cube["backward_ran"] is True
    assert cube["lines"]["backward"]["executed"] == _marked("grads.py", "cube_backward")
    assert cube["lines"]["setup_context"]["executed"] == _marked("grads.py", "cube_setup")
    never = by_name["never_backward"]
    # never ran forward differentiably either (its input did not require grad)
    assert never["backward_ran"] is False and never["counts"] == {}
    assert never["lines"] == {"backward": {
        "path": "opslib.py", "qualname": "never_backward", "line": 35,
        "executed": [], "missing": _marked("opslib.py", "never_backward_missing"),
    }}
    # coverage's own data agrees with the report's lines
    measured = run.lines("opslib.py")
    assert set(scale["lines"]["backward"]["executed"]) <= measured
    assert not set(never["lines"]["backward"]["missing"]) & measured


@pytest.mark.slow
@needs_torch
@pytest.mark.xdist_group("custom_op_run")  # its module fixture runs once, on one worker
def test_pragma_reads_only_function_rows(custom_op_run: Run) -> None:
    entries = report.read_code_runs(str(custom_op_run.root / "report.json"))
    assert [e.qualname for e in entries] == ["Twice"]


@pytest.mark.slow
@needs_torch
def test_lines_under_xdist_and_pytest_cov_come_from_the_workers(tmp_path_factory: pytest.TempPathFactory) -> None:
    """pytest-cov with two xdist workers: the controller measures no test, the workers send their lines."""
    run = run_in_copy(
        tmp_path_factory,
        ["pytest", "-n", "2", "--cov=.", "--autograd-cov", "--autograd-cov-no-compile",
         "--autograd-cov-json=report.json"],
        project=CUSTOM_OPS,
    )
    assert run.returncode == 0, run.output
    data = json.loads((run.root / "report.json").read_text())
    by_name = {f["qualname"]: f for f in data["functions"]}
    scale = by_name["scale_backward"]["lines"]["backward"]
    assert scale["executed"] == _marked("opslib.py", "scale_backward")
    assert scale["missing"] == _marked("opslib.py", "scale_backward_missing")
    assert by_name["cube_backward"]["lines"]["setup_context"]["executed"] == _marked("grads.py", "cube_setup")
    assert by_name["cube_backward"]["counts"]["backward"] == {"eager": {"main": 2}}
    assert by_name["never_backward"]["lines"]["backward"]["executed"] == []
