"""The module-level model: calls on a module's Function classes (autograd_lint.model.usage)."""

from __future__ import annotations

import textwrap

import pytest

from autograd_lint.model.analysis import analyze
from autograd_lint.settings import Settings
from autograd_lint.model.source import SourceFile
from autograd_lint.model.usage import FunctionUse, UseKind, is_test_path

HEADER = """
import pytest
import torch

class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2
"""


def uses(body: str, header: str = HEADER) -> list[FunctionUse]:
    source = textwrap.dedent(header).lstrip("\n") + textwrap.dedent(body)
    analysis = analyze(SourceFile("example.py", source, "example"), {}, Settings())
    return analysis.function_uses


def test_kinds_and_positions() -> None:
    found = uses(
        """
        a = Fn()
        b = Fn()(torch.ones(1))
        c = Fn.forward(None, torch.ones(1))
        d = Fn.apply(torch.ones(1))
        """
    )
    assert [(u.kind, u.method, u.position.line) for u in found] == [
        (UseKind.INSTANTIATION, None, 13),
        (UseKind.INSTANCE_CALL, None, 14),
        (UseKind.METHOD_CALL, "forward", 15),
    ]
    assert found[1].text == "Fn()(torch.ones(1))"
    assert all(u.function.name == "Fn" and u.class_methods == {"forward", "backward"} for u in found)


def test_a_file_with_carriage_returns_has_every_statement_walked() -> None:
    # libcst may count lines with `\r` otherwise: no statement is passed over by its lines.
    source = (textwrap.dedent(HEADER).lstrip("\n") + "b = Fn()(torch.ones(1))\n").replace("\n", "\r\n")
    found = analyze(SourceFile("example.py", source, "example"), {}, Settings()).function_uses
    assert [(u.kind, u.position.line) for u in found] == [(UseKind.INSTANCE_CALL, 12)]


def test_uses_in_decorators_and_on_continuation_lines_are_found() -> None:
    # The walk enters only statements on a line that spells a Function's name: a
    # decorator's line counts for its def, and every line of a statement for it.
    found = uses(
        """
        def unrelated():
            return 1

        @Fn.forward(None, 1)
        def decorated():
            return 2

        value = dict(
            a=1,
            b=Fn(),
        )
        """
    )
    assert [(u.kind, u.position.line) for u in found] == [
        (UseKind.METHOD_CALL, 16),
        (UseKind.INSTANTIATION, 22),
    ]


def test_shadowed_and_rebound_names_are_not_the_class() -> None:
    found = uses(
        """
        def f(Fn):
            return Fn()

        def g():
            Fn = object
            return Fn()

        class Holder:
            Fn = 1
            def m(self):
                return Fn.forward(None, 1)
        """
    )
    # Only the method of Holder sees the module-level class (class scopes don't nest).
    assert [(u.kind, u.position.line) for u in found] == [(UseKind.METHOD_CALL, 23)]


def test_rebinding_at_module_level_makes_the_name_unknown() -> None:
    assert uses("Fn = torch.compile(Fn)\ny = Fn()\n") == []


@pytest.mark.parametrize(
    "body",
    [
        "if not torch.is_grad_enabled():\n    Fn.forward(None, 1)\n",
        "if torch.is_grad_enabled():\n    y = Fn.apply(1)\nelse:\n    y = Fn.forward(None, 1)\n",
        "def f(self):\n    if torch.is_grad_enabled():\n        return Fn.apply(1)\n    return Fn.forward(None, 1)\n",
        "def f(self):\n    return Fn.forward(None, 1) if not self.training else Fn.apply(1)\n",
        "with torch.no_grad():\n    Fn.forward(None, 1)\n",
        "@torch.inference_mode()\ndef f():\n    return Fn.forward(None, 1)\n",
        "if torch.onnx.is_in_onnx_export():\n    Fn.forward(None, 1)\n",
    ],
)
def test_guards(body: str) -> None:
    (use,) = uses(body)
    assert use.guard is not None and not use.expects_failure


def test_no_guard_when_the_condition_is_unrelated() -> None:
    (use,) = uses("def f(flag):\n    if flag:\n        return Fn.forward(None, 1)\n")
    assert use.guard is None


def test_expects_failure_and_inside() -> None:
    found = uses(
        """
        def test_it():
            with pytest.raises(RuntimeError):
                Fn()(1)

        class Sub(Fn):
            @staticmethod
            def forward(ctx, x):
                return Fn.forward(ctx, x)
        """
    )
    assert [(u.kind, u.expects_failure, u.inside) for u in found] == [
        (UseKind.INSTANCE_CALL, True, None),
        (UseKind.METHOD_CALL, False, "Sub"),
    ]


def test_nested_class_and_unknown_base() -> None:
    header = """
    import torch
    from elsewhere import Mixin

    class Outer:
        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

    class Mixed(Mixin, torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x
    """
    found = uses("Outer.Fn()\nMixed()\n", header)
    assert [(u.function.name, u.class_methods) for u in found] == [
        ("Fn", frozenset({"forward"})),
        ("Mixed", None),
    ]


def test_nothing_without_a_use() -> None:
    assert uses("y = Fn.apply(torch.ones(1))\n") == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_ops.py", True),
        ("pkg/ops_test.py", True),
        ("pkg/testing/_internal/db.py", True),
        ("conftest.py", True),
        ("pkg/ops.py", False),
        ("pkg/attest.py", False),
    ],
)
def test_is_test_path(path: str, expected: bool) -> None:
    assert is_test_path(path) is expected


def test_passes_ctx_only_for_a_ctx_parameter() -> None:
    found = uses(
        """
        def helper(ctx, x):
            return Fn.forward(ctx, x)

        def script(x):
            ctx = object()
            return Fn.forward(ctx, x)

        class Model:
            def __call__(self, x):
                return Fn.forward(self, x)
        """
    )
    assert [u.passes_ctx for u in found] == [True, False, False]


def test_duplicate_name_gate_is_a_scan_of_top_level_arguments() -> None:
    """The text gate that makes AGL155 see a whole module: one bare name twice among a call's arguments."""
    from autograd_lint.model.analysis import _duplicate_name_argument

    assert _duplicate_name_argument("x, x)", 0)
    assert _duplicate_name_argument(" x ,\n  y, x\n)", 0)
    assert _duplicate_name_argument('x, "x", x)', 0)
    assert not _duplicate_name_argument("x, y)", 0)
    assert not _duplicate_name_argument("f(x, x), y)", 0)  # inside a nested call
    assert not _duplicate_name_argument("a[x, x], b)", 0)
    assert not _duplicate_name_argument("x, x.clone())", 0)
    assert not _duplicate_name_argument("x, None, None, False, False)", 0)  # keywords


def test_container_gate_is_a_scan_of_top_level_arguments() -> None:
    """The text gate that makes a whole-module parse: an argument opening with a bracket, or a
    list longer than the scan reads; a closed list of plain arguments does not."""
    from autograd_lint.model.analysis import _ARGUMENTS_SCAN_LIMIT, _container_argument

    assert _container_argument("x, (y, z))", 0)
    assert _container_argument(" [x] )", 0)
    assert not _container_argument("x, y.clone(), f(z))", 0)
    assert not _container_argument("x, y)" + " " * _ARGUMENTS_SCAN_LIMIT, 0)
    assert _container_argument("x, " * _ARGUMENTS_SCAN_LIMIT + "y)", 0)  # cut: not seen to end


def test_apply_calls_skip_starred_and_keyword_calls_and_go_on() -> None:
    # Only a call's count of positional arguments is known; a later plain call is still read.
    from autograd_lint.model.usage import ApplyCall, apply_calls

    text = "F.apply(*xs)\nG.apply(a, k=1)\nH.apply(a, b)\nF.apply(a)\n"
    assert apply_calls(text) == {"H": (ApplyCall(3, 2),), "F": (ApplyCall(4, 1),)}
