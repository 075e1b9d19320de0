"""Each custom-op repro of the design note: the lint flags the bad case and is silent on the good one,
and the tests ``gen-tests`` writes fail on the bad case and pass on the good one (run for real, CPU)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from autograd_lint.lint.engine import check_analysis
from autograd_lint.model.analysis import analyze
from autograd_lint.model.custom_ops import RunCustomOps
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings
from gentests_support import gen_tests
from pytest_process import run_pytest
from repro_cases import REPROS, Repro

SETTINGS = Settings(select=("AGL",), extend_select=("AGL117",))


def codes(source: str) -> set[str]:
    analysis = analyze(SourceFile("repro.py", source, "repro"), {}, SETTINGS, run_ops=RunCustomOps())
    return {d.code for d in check_analysis(analysis, SETTINGS, honour_noqa=False)}


@pytest.mark.parametrize("repro", REPROS, ids=lambda r: r.name)
def test_lint_flags_the_bad_case_only(repro: Repro) -> None:
    assert repro.code in codes(repro.bad)
    assert {c for c in codes(repro.good) if 101 <= int(c[3:]) <= 117} == set()


def failures_by_module(report: Path) -> dict[str, int]:
    """Generated test module (``test_..._<name>``) -> failed or errored test cases (collection errors included)."""
    counts: dict[str, int] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")[1] if "." in case.get("classname", "") else case.get("name", "")
        failed = case.find("failure") is not None or case.find("error") is not None
        counts[module] = counts.get(module, 0) + failed
    return counts


@pytest.mark.slow
@pytest.mark.requires_torch
def test_generated_tests_fail_on_the_bad_case_only(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    package = pytester.mkdir("repros")
    for repro in REPROS:
        (package / f"{repro.name}_bad.py").write_text(repro.bad)
        (package / f"{repro.name}_good.py").write_text(repro.good)
    generated = gen_tests(pytester.path, "repros", "--out", "generated", "--compile-parity")
    assert generated.returncode == 0, generated.stderr
    report = pytester.path / "report.xml"
    run_pytest(pytester, "generated", "-p", "no:cacheprovider", "--continue-on-collection-errors",
                                  f"--junitxml={report}")
    failures = failures_by_module(report)
    for repro in REPROS:
        good = [m for m in failures if m.endswith(f"{repro.name}_good")]
        bad = [m for m in failures if m.endswith(f"{repro.name}_bad")]
        assert good and all(failures[m] == 0 for m in good), (repro.name, failures)
        if repro.generated_fails:
            assert bad and sum(failures[m] for m in bad) > 0, (repro.name, failures)
