"""Syntax newer than Python 3.10 around Functions: found and read on the interpreters that have it.

The text scan that finds class headers runs on any interpreter (it does not parse);
the rest needs the syntax, so each test names the first Python that has it.  The
rules' own examples (tests/rules/test_rule_examples.py) cover what the rules say
about the same syntax.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograd_lint.model.analysis import analyze
from autograd_lint.model.locate import class_headers
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings
from cli_process import run_cli

needs_312 = pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 syntax: Python 3.12+")
needs_311 = pytest.mark.skipif(sys.version_info < (3, 11), reason="except*: Python 3.11+")

GENERIC_MUL = """\
import torch

class Mul[T: torch.Tensor](torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: T, b: T) -> T:
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b
"""


def functions(source: str) -> list[str]:
    text = textwrap.dedent(source).lstrip()
    return [f.qualname for f in analyze(SourceFile("mod.py", text, "mod"), {}, Settings()).functions]


def test_type_parameters_before_the_base_list_are_read_by_the_text_scan() -> None:
    text = textwrap.dedent(
        """
        class Plain(torch.autograd.Function): pass
        class One[T](torch.autograd.Function): pass
        class Spaced[T] (Base): pass
        class Every[T: (int, str), *Ts, **P, U = list[int]](ag.Function, metaclass=M): pass
        class Lines[
            T: torch.Tensor,
        ](
            F,
        ): pass
        class NoBases[T]: pass
        class Broken[T(Base): pass
        """
    )
    found = {h.name: (h.line, sorted(h.base_names)) for h in class_headers(text)}
    assert found == {
        "Plain": (2, ["torch.autograd.Function"]),
        "One": (3, ["torch.autograd.Function"]),
        "Spaced": (4, ["Base"]),
        "Every": (5, ["M", "ag.Function", "metaclass"]),
        "Lines": (6, ["F"]),
    }


@needs_312
def test_generic_functions_are_found_at_every_depth() -> None:
    found = functions(
        """
        import torch

        type Pair[T] = tuple[T, T]

        class Outer[T](torch.autograd.Function):
            pass

        class Child[T](Outer):
            class Inner[U: torch.Tensor](torch.autograd.Function):
                pass

        def factory[T]():
            class Made[U](Outer):
                pass
            return Made
        """
    )
    assert sorted(found) == ["Child", "Child.Inner", "Outer", "factory.<locals>.Made"]


@needs_311
def test_functions_defined_under_except_star_and_match_are_found() -> None:
    found = functions(
        """
        import torch

        try:
            class InTry(torch.autograd.Function):
                pass
        except* ImportError:
            class InHandler(torch.autograd.Function):
                pass

        match torch.__version__.split("."):
            case ["2", *_]:
                class InCase(torch.autograd.Function):
                    pass
        """
    )
    assert sorted(found) == ["InCase", "InHandler", "InTry"]


def test_a_class_under_if_or_match_is_not_nested_in_the_class_above() -> None:
    found = functions(
        """
        import torch

        if torch.__version__ > "2":
            class First(torch.autograd.Function):
                pass
        elif True:  # a comment after the colon
            class Second(torch.autograd.Function):
                pass
        else:
            if torch.cuda.is_available():
                class Third(torch.autograd.Function):
                    pass

        def factory():
            class Local(torch.autograd.Function):
                pass
            for _ in range(2):
                class InLoop(torch.autograd.Function):
                    pass
            return Local, InLoop

        match torch.__version__:
            case "2":
                class InCase(torch.autograd.Function):
                    pass
        """
    )
    assert sorted(found) == [
        "First", "InCase", "Second", "Third", "factory.<locals>.InLoop", "factory.<locals>.Local"
    ]


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", path.name], cwd=path.parent, timeout=120)


@needs_312
def test_a_generic_function_with_a_wrong_gradient_count_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "generic.py"
    path.write_text(GENERIC_MUL)
    result = check(path)
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith(
        "generic.py:12:9: AGL001 Mul.backward returns 1 gradient, but forward takes 2 inputs"
    ), result.stdout


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python reads PEP 695 syntax")
def test_older_pythons_name_the_syntax_they_cannot_read(tmp_path: Path) -> None:
    """The analyser reads what the running Python compiles: newer syntax is one line and exit 2, not silence."""
    path = tmp_path / "generic.py"
    path.write_text(GENERIC_MUL)
    result = check(path)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert result.returncode == 2
    assert f"generic.py:3: syntax error: invalid syntax (checked with Python {version}" in result.stderr
