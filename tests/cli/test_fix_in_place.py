"""A quick fix computed on the statement holding the finding equals the whole-module fix, byte for byte.

``fix_diagnostic`` (what an editor's quick fix runs) fixes in place
(:mod:`autograd_lint.lint.fix_in_place`) and falls back to the whole-module fix only
where that can't be shown to give the same text.  Each test computes both: the
in-place result, and the whole-module one with the in-place step turned off.
"""

from __future__ import annotations

import textwrap

import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

import autograd_lint.lint.fix as fix
from autograd_lint.lint.engine import check_source
from autograd_lint.lint.fix_in_place import UNDECIDED, fix_in_place
from autograd_lint.lint.head_imports import add_imports
from autograd_lint.model.cst_parse import parse_module
from autograd_lint.model.source import SourceFile
from autograd_lint.rules import all_rules, rule_by_code
from autograd_lint.rules.base import ImportRef
from autograd_lint.settings import Settings

SETTINGS = Settings(select=("ALL",))


def _both(text: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object, str | None, str | None]]:
    """For each fixable finding of ``text``: (code, the in-place answer, the quick fix, the whole-module fix)."""
    source = SourceFile("example.py", text, "example")
    checked = check_source(source, SETTINGS)
    assert checked.analysis is not None
    found = []
    for diagnostic in checked.diagnostics:
        rule = rule_by_code(diagnostic.code)
        if rule is None or rule.fixer is None:
            continue
        local = fix_in_place(rule, checked.analysis, source, diagnostic, SETTINGS)
        quick = fix.fix_diagnostic(source, SETTINGS, diagnostic, checked.analysis)
        with monkeypatch.context() as patch:
            patch.setattr(fix, "fix_in_place", lambda *arguments: UNDECIDED)
            whole = fix.fix_diagnostic(source, SETTINGS, diagnostic, checked.analysis)
        found.append((diagnostic.code, local, quick, whole))
    return found


EXAMPLES = [
    pytest.param(example.source, id=f"{rule.code}-{index}")
    for rule in all_rules()
    if rule.fixer is not None
    for index, example in enumerate(rule.INVALID)
    if example.parses_here
]


@pytest.mark.parametrize("text", EXAMPLES)
def test_every_rule_example_is_fixed_as_the_whole_module_fix_does(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for code, _, quick, whole in _both(text, monkeypatch):
        assert quick == whole, code


NESTED = textwrap.dedent(
    '''\
    """Tests."""
    from __future__ import annotations

    import unittest
    from torch.autograd.function import Function  # the base

    import torch


    # a comment above the first class
    class TestOps(unittest.TestCase):
        def test_sin(self):
            class XSinX(Function):
                @staticmethod
                def forward(ctx, a):
                    s = torch.sin(a)
                    ctx.save_for_backward(a, s)
                    return a * s

                @staticmethod
                def backward(ctx, grad):
                    a, s = ctx.saved_tensors
                    return grad * (s + a * torch.cos(a))

            return XSinX.apply(torch.ones(1))
    '''
)


def test_a_function_nested_in_a_test_method_is_fixed_in_place_with_its_import(monkeypatch: pytest.MonkeyPatch) -> None:
    (code, local, quick, whole), = [found for found in _both(NESTED, monkeypatch) if found[0] == "AGL009"]
    assert local is not UNDECIDED
    assert quick == whole
    assert quick is not None
    assert "from torch.autograd.function import once_differentiable, Function  # the base\n" in quick
    assert "            @once_differentiable\n            def backward" in quick


def test_a_crlf_text_is_left_to_the_whole_module_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _both(NESTED.replace("\n", "\r\n"), monkeypatch)
    assert found and all(local is UNDECIDED and quick == whole for _, local, quick, whole in found)


# Heads as libcst's import adder sees them, each followed by a statement it stops at.
HEADS = [
    "",
    '"""Docstring."""\n',
    '"""Docstring."""\nimport torch\n',
    "__strict__ = True\nimport os\n",
    "import os, sys\nimport torch\n",
    "from torch.autograd.function import Function\n",
    "from torch.autograd.function import (\n    Function,\n    InplaceFunction,\n)\n",
    "from torch.autograd.function import *\n",
    "from torch.autograd.function import once_differentiable as od\n",
    "from torch.autograd.function import once_differentiable\n",
    "import torch as t\n",
    "import torch.autograd\n",
    "from __future__ import annotations\n\nimport torch  # noqa: F401\n# a comment\n",
    "import os; import sys\nimport torch\n",
    "from . import sibling\nfrom .pkg import once_differentiable\n",
    "x = 1\nimport torch\n",
    "# header comment\n\nimport os\n\n\n# before the code\n",
    "import os\n\n\n",
]
REFS = [
    (ImportRef("torch.autograd.function", "once_differentiable"),),
    (ImportRef("torch"),),
    (ImportRef("torch", None, "t"),),
    (ImportRef("torch.autograd.function", "once_differentiable", "od"),),
    (ImportRef("torch"), ImportRef("torch.autograd.function", "once_differentiable"), ImportRef("__future__", "annotations")),
]


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("refs", REFS, ids=lambda refs: "+".join(f"{r.module}:{r.obj}:{r.asname}" for r in refs))
@pytest.mark.parametrize("after", ["class F:\n    pass\n", "\nclass F:\n    pass\n", "# c\nx = 1\n", ""])
def test_head_imports_equal_libcst_import_adder(head: str, refs: tuple[ImportRef, ...], after: str) -> None:
    module = parse_module(head + after)
    context = CodemodContext(filename="example.py", full_module_name="example")
    for ref in refs:
        AddImportsVisitor.add_needed_import(context, ref.module, ref.obj, ref.asname)
    expected = fix.transform_once(AddImportsVisitor(context), module).code
    assert add_imports(module, refs, None).code == expected


@pytest.mark.parametrize("whole", [True, False], ids=["analysis-parse", "statement-parse"])
def test_both_ways_to_the_statement_give_the_whole_module_fix(whole: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The analysis's own whole-module parse, and a parse of the top-level statement alone."""
    from autograd_lint.model.extract import ParsedUnit

    text = NESTED + "\n\nx = XSinX.forward(None, 1)\n"  # a direct call: the analysis parses the module whole
    source = SourceFile("example.py", text, "example")
    checked = check_source(source, SETTINGS)
    assert checked.analysis is not None and checked.analysis.whole_module is not None
    if not whole:
        monkeypatch.setattr(ParsedUnit, "has_positions", property(lambda self: False))
    (diagnostic,) = [d for d in checked.diagnostics if d.code == "AGL009"]
    rule = rule_by_code("AGL009")
    assert rule is not None
    local = fix_in_place(rule, checked.analysis, source, diagnostic, SETTINGS)
    monkeypatch.setattr(fix, "fix_in_place", lambda *arguments: UNDECIDED)
    assert local is not UNDECIDED and local == fix.fix_diagnostic(source, SETTINGS, diagnostic, checked.analysis)


def test_a_quick_fix_without_the_kept_analysis_makes_it_again() -> None:
    for (text,) in (example.values for example in EXAMPLES):
        source = SourceFile("example.py", text, "example")
        checked = check_source(source, SETTINGS)
        for diagnostic in checked.diagnostics:
            if getattr(rule_by_code(diagnostic.code), "fixer", None) is None:
                continue
            kept = fix.fix_diagnostic(source, SETTINGS, diagnostic, checked.analysis)
            if kept is not None:  # the first example with a fix is enough
                assert fix.fix_diagnostic(source, SETTINGS, diagnostic) == kept
                return
    pytest.fail("no rule example has a quick fix")
