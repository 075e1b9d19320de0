"""Every rule's own VALID and INVALID examples, in one parametrised test (as Fixit does)."""

from __future__ import annotations

import sys

import pytest

from autograd_lint.model.analysis import analyze
from autograd_lint.model.custom_ops import RunCustomOps
from autograd_lint.lint.engine import check_analysis
from autograd_lint.lint.fix import fix_source, verify
from autograd_lint.rules import all_rules
from autograd_lint.rules.base import Example, FixSafety, Invalid, Rule, Valid
from autograd_lint.settings import Settings
from autograd_lint.model.source import SourceFile


def needs_its_python(example: Example) -> list[pytest.MarkDecorator]:
    """Skip an example written in syntax newer than the running Python: it runs on the interpreters that have it."""
    if example.parses_here:
        return []
    wanted = ".".join(map(str, example.min_python or ()))
    return [pytest.mark.skip(reason=f"Python {wanted} syntax; running {sys.version_info.major}.{sys.version_info.minor}")]


CASES = [
    pytest.param(rule, example, id=f"{rule.code}-{kind}-{index}", marks=needs_its_python(example))
    for rule in all_rules()
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for index, example in enumerate(examples)
]


def findings(rule: type[Rule], source: str) -> list:
    settings = Settings(select=(rule.code,))
    # An example is a whole run of one file (so that AGL110 can say a fake is missing).
    analysis = analyze(SourceFile("example.py", source, "example"), {}, settings, run_ops=RunCustomOps())
    return [d for d in check_analysis(analysis, settings, honour_noqa=False) if d.code == rule.code]


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_example(rule: type[Rule], example: Valid | Invalid) -> None:
    compile(example.source, "example.py", "exec")  # examples must be valid Python
    found = findings(rule, example.source)
    if isinstance(example, Valid):
        assert found == [], f"{rule.code} reported on a VALID example: {found}"
        return
    # An example that names no line would pass with a finding on the wrong line.
    assert example.line is not None and example.message, "an INVALID example names its line and message"
    assert found, f"{rule.code} reported nothing on an INVALID example"
    assert any(d.line == example.line and example.message in d.message for d in found), (
        f"no {rule.code} finding on line {example.line} containing {example.message!r}: {found}"
    )


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_carries_enough_examples(rule: type[Rule]) -> None:
    assert len(rule.VALID) >= 3 and len(rule.INVALID) >= 3
    assert rule.title and rule.why and rule.what_it_does()


FIX_CASES = [
    pytest.param(rule, example, id=f"{rule.code}-invalid-{index}", marks=needs_its_python(example))
    for rule in all_rules()
    if rule.fixer is not None
    for index, example in enumerate(rule.INVALID)
]


def fixed(rule: type[Rule], source: str) -> str:
    """``source`` after every fix of ``rule``, unsafe ones included."""
    settings = Settings(select=(rule.code,))
    return fix_source(SourceFile("example.py", source, "example"), {}, settings, unsafe=True).text


@pytest.mark.parametrize(("rule", "example"), FIX_CASES)
def test_fix(rule: type[Rule], example: Invalid) -> None:
    """The fix gives the expected source (or leaves it alone), parses, and is idempotent."""
    once = fixed(rule, example.source)
    assert once == (example.fixed_source if example.fixed is not None else example.source)
    assert verify(once, "example.py") is None
    assert fixed(rule, once) == once, "a second fix changed the source again"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_fix_declared_and_shown(rule: type[Rule]) -> None:
    """A rule has a fixer exactly when it declares a fix, and one example shows it at work."""
    assert (rule.fixer is None) == (rule.fix is FixSafety.NONE)
    if rule.fixer is not None:
        assert any(example.fixed is not None for example in rule.INVALID)
