"""gen-tests on a package of nine custom ops: the tests pass on the correct ops and fail on each broken twin.

``fixtures/custom_ops/correct/opspkg`` holds functional and mutating ops, with and
without a fake kernel (one registered by name from another module), with and
without ``register_autograd``; ``fixtures/custom_ops/broken/opspkg`` has one bug per
op, named in a comment.  The generated suites run for real, on the CPU.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from gentests_support import gen_tests, outcomes_by_class, reported_test_names
from pytest_process import run_pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures" / "custom_ops"
OP_COUNT = 9


def generate_and_run(pytester: pytest.Pytester, variant: str, *options: str) -> Path:
    project = pytester.mkdir(variant)
    shutil.copytree(FIXTURES / variant, project, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    generated = gen_tests(project, ".", "--out", "generated", *options)
    assert generated.returncode == 0, generated.stderr
    assert f"wrote {Path('generated') / 'test_opcheck_opspkg_ops.py'} ({OP_COUNT} custom op(s))" in generated.stdout
    run_pytest(pytester, str(project / "generated"), "-p", "no:cacheprovider",
                                  f"--junitxml={project / 'report.xml'}")
    return project / "report.xml"


def test_correct_ops_pass_and_each_broken_twin_fails(pytester: pytest.Pytester) -> None:
    correct = generate_and_run(pytester, "correct", "--compile-parity")
    outcomes = outcomes_by_class(correct)
    assert len(outcomes) == OP_COUNT
    assert {name: dict(c) for name, c in outcomes.items() if set(c) != {"passed"}} == {}
    assert reported_test_names(correct) == {"test_opcheck", "test_gradcheck", "test_compile_parity"}

    broken = generate_and_run(pytester, "broken", "--compile-parity")
    outcomes = outcomes_by_class(broken)
    assert len(outcomes) == OP_COUNT
    assert sorted(name for name, counts in outcomes.items() if counts["failed"] == 0) == []
    # Without --compile-parity, opcheck and gradcheck alone still catch every broken op.
    caught = {case.get("classname", "").rsplit(".", 1)[-1]
              for case in ElementTree.parse(broken).iter("testcase")
              if not case.get("name", "").startswith("test_compile_parity") and case.find("failure") is not None}
    assert len(caught) == OP_COUNT
