"""Record, generate, run: the fixture project's 26 Functions, correct and with wrong backwards.

The correct Functions' harnesses must pass unedited; for every Function, the
variant with a wrong backward formula must get a harness with a failing test.
"""

from __future__ import annotations

import re

import pytest

from gentests_support import copy_project, gen_tests, origin_counts, outcomes_by_class

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

FUNCTION_COUNT = 26


def record_and_generate(pytester: pytest.Pytester, wrong: bool) -> dict[str, int]:
    replaced = copy_project(pytester.path, wrong=wrong)
    assert replaced == (FUNCTION_COUNT if wrong else 0)
    recorded = pytester.runpytest_subprocess("usage_tests", "--autograd-record", "-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=5)
    recorded.stdout.fnmatch_lines(["autograd-lint: recorded inputs of 6 Function(s) to *inputs.json"])
    generated = gen_tests(pytester.path, "agl_ops", "--out", "generated")
    assert generated.returncode == 0, generated.stderr
    return origin_counts(generated.stdout)


def test_correct_functions_get_passing_harnesses(pytester: pytest.Pytester) -> None:
    counts = record_and_generate(pytester, wrong=False)
    assert counts == {"total": FUNCTION_COUNT, "recorded": 6, "static": 8, "search": 12, "none": 0}

    result = pytester.runpytest_subprocess("generated", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = outcomes_by_class(pytester.path / "report.xml")
    assert len(outcomes) == FUNCTION_COUNT
    not_passed = {name: dict(c) for name, c in outcomes.items() if set(c) != {"passed"}}
    assert not not_passed, result.stdout.str()[-3000:]
    # Each check the issue asks for is exercised somewhere in the suite.
    test_names = {re.sub(r"\[.*", "", line.split("::")[-1]) for line in
                  pytester.runpytest_subprocess("generated", "--collect-only", "-q").stdout.lines if "::" in line}
    assert test_names == {
        "test_gradcheck", "test_gradgradcheck", "test_double_backward_raises", "test_forward_ad",
        "test_vmap", "test_undefined_grad", "test_non_tensor_grads_are_none",
    }


def test_every_wrong_backward_gets_a_failing_harness(pytester: pytest.Pytester) -> None:
    record_and_generate(pytester, wrong=True)
    pytester.runpytest_subprocess("generated", "-p", "no:cacheprovider", "--junitxml=report.xml")
    outcomes = outcomes_by_class(pytester.path / "report.xml")
    assert len(outcomes) == FUNCTION_COUNT
    undetected = sorted(name for name, counts in outcomes.items() if counts["failed"] == 0)
    assert not undetected
