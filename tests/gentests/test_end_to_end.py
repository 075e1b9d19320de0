"""Record, generate, run: the fixture project's 26 Functions, correct and with wrong backwards.

The correct Functions' harnesses must pass unedited; for every Function, the
variant with a wrong backward formula must get a harness with a failing test.
Both variants use the one recording: the project's own tests only check forward
values, which the wrong variants share.
"""

from __future__ import annotations

import re

import pytest

from gentests_support import copy_project, gen_tests, origin_counts, outcomes_by_class, reported_test_names
from pytest_process import run_pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

FUNCTION_COUNT = 26
ALL_CHECKS = {
    "test_gradcheck", "test_gradcheck_non_contiguous", "test_gradgradcheck", "test_double_backward_raises",
    "test_forward_ad", "test_vmap", "test_undefined_grad", "test_non_tensor_grads_are_none",
}


def test_record_generate_run_correct_and_wrong_backwards(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    correct, wrong = pytester.mkdir("correct"), pytester.mkdir("wrong")
    assert copy_project(correct) == 0
    assert copy_project(wrong, wrong=True) == FUNCTION_COUNT

    # The project's tests run from its root, as its developers run them.
    monkeypatch.chdir(correct)
    recorded = run_pytest(pytester, "usage_tests", "--autograd-record", "-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=5)
    recorded.stdout.fnmatch_lines(["autograd-lint: recorded inputs of 6 Function(s) to *inputs.json"])
    recording = str(correct / ".autograd-lint" / "inputs.json")
    # The generated suites run from elsewhere: they find the project through the
    # import root written in them, not through the working directory.
    monkeypatch.chdir(pytester.path)

    for project in (correct, wrong):
        generated = gen_tests(project, "agl_ops", "--out", "generated", "--inputs", recording)
        assert generated.returncode == 0, generated.stderr
        counts = origin_counts(generated.stdout)
        assert counts == {"total": FUNCTION_COUNT, "recorded": 6, "static": 8, "search": 12, "none": 0}
        run_pytest(pytester, str(project / "generated"), "-p", "no:cacheprovider",
                                      f"--junitxml={project / 'report.xml'}")

    outcomes = outcomes_by_class(correct / "report.xml")
    assert len(outcomes) == FUNCTION_COUNT
    not_passed = {name: dict(c) for name, c in outcomes.items() if set(c) != {"passed"}}
    assert not not_passed, "correct Functions whose harness did not pass"
    assert reported_test_names(correct / "report.xml") == ALL_CHECKS

    outcomes = outcomes_by_class(wrong / "report.xml")
    assert len(outcomes) == FUNCTION_COUNT
    undetected = sorted(name for name, counts in outcomes.items() if counts["failed"] == 0)
    assert not undetected, "wrong backwards whose harness passed"


def test_generated_node_ids_name_the_function_and_the_case(pytester: pytest.Pytester) -> None:
    copy_project(pytester.path)
    assert gen_tests(pytester.path, "agl_ops", "--out", "generated").returncode == 0
    text = (pytester.path / "generated" / "test_gradcheck_agl_ops_linalg.py").read_text()
    assert re.search(r'class TestQuadraticForm:\n    """QuadraticForm \(line \d+\): inputs from literal', text)
    assert 'pytest.param(Case((tensor((3,)), tensor((3, 3)))), id="static-3-3x3"),' in text
    assert 'pytest.param(Case((any_tensor(), any_tensor())), id="search-?-?"),' in text
