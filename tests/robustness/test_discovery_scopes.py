"""Discovery bugs found on real code (issue 8, item 5), and the one-line internal error."""

from __future__ import annotations

import sys
import textwrap

import libcst as cst
import pytest
from fuzz_support import ANALYSED_DEPTH

from autograd_lint.lint.engine import check_analysis
from autograd_lint.model.analysis import analyze
from autograd_lint.model.guard import describe, run_guarded, stage
from autograd_lint.model.source import SourceError, SourceFile
from autograd_lint.settings import Settings

SETTINGS = Settings(select=("ALL",))

# Two classes of one name in one test function; the second one's backward is wrong.
TWICE = textwrap.dedent(
    """\
    import torch


    def test_both():
        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x, y)
                return x * y

            @staticmethod
            def backward(ctx, g):
                x, y = ctx.saved_tensors
                return g * y
    """
)


def analysed(text: str) -> tuple[list[str], list[str]]:
    analysis = analyze(SourceFile("mod.py", text, "mod"), {}, SETTINGS)
    found = [f"{f.qualname}:{f.position.line}" for f in analysis.functions]
    return found, [f"{d.line}:{d.code}" for d in check_analysis(analysis, SETTINGS)]


@pytest.mark.parametrize("whole_module", [False, True], ids=["blocks", "whole module"])
def test_two_classes_of_one_name_in_one_function_are_two_functions(whole_module: bool) -> None:
    # A use of Fn outside the class makes the analysis parse the whole module.
    text = TWICE + ("\n\nFn = None\nFn(1)\n" if whole_module else "")
    functions, findings = analysed(text)
    assert functions == ["test_both.<locals>.Fn:5", "test_both.<locals>.Fn:14"]
    assert "23:AGL001" in findings  # the second Fn's backward, reported at its own line


def test_a_class_defined_inside_a_function_does_not_name_bases_elsewhere() -> None:
    functions, _ = analysed(
        textwrap.dedent(
            """\
            import torch


            def helper():
                class Base(torch.autograd.Function):
                    @staticmethod
                    def forward(ctx, x):
                        return x

                class Local(Base):
                    pass

                return Local


            class Base:
                pass


            class User(Base):
                def forward(self, x):
                    return x


            class Outer:
                class Inner(torch.autograd.Function):
                    pass

                class Sibling(Inner):
                    pass
            """
        )
    )
    assert functions == [
        "helper.<locals>.Base:5",
        "helper.<locals>.Local:10",
        "Outer.Inner:26",
        "Outer.Sibling:29",
    ]


def test_the_last_definition_before_a_class_is_its_base() -> None:
    functions, _ = analysed(
        textwrap.dedent(
            """\
            import torch

            class Base(torch.autograd.Function):
                pass

            class Base:
                pass

            class User(Base):
                pass
            """
        )
    )
    assert functions == ["Base:3"]


def test_an_internal_error_is_one_line_whatever_the_exception_holds() -> None:
    node = cst.parse_module("x = [" + ", ".join(["1"] * 50) + "]\n")
    with pytest.raises(SourceError) as raised:
        with stage("mod.py", "running AGL000"):
            raise KeyError(node)
    assert str(raised.value) == "mod.py: internal error while running AGL000, please report it: KeyError: <Module>"
    assert describe(RecursionError(), "parsing") == "too deeply nested to analyse (recursion limit reached while parsing)"
    assert describe(MemoryError(), "parsing") == "ran out of memory while parsing"
    assert "\n" not in describe(ValueError("one\ntwo"), "x")


def test_the_guard_names_the_outer_stage_and_passes_file_errors_through() -> None:
    def broken() -> None:
        raise IndexError("list index out of range")

    with pytest.raises(SourceError) as raised:
        run_guarded("f.py", "reading the file", broken)
    assert raised.value.problem == (
        "internal error while reading the file, please report it: IndexError: list index out of range"
    )
    error = SourceError("f.py", "syntax error: x", 3)
    with pytest.raises(SourceError) as passed:
        run_guarded("f.py", "parsing", lambda: (_ for _ in ()).throw(error))
    assert passed.value is error


def test_code_as_deep_as_cpython_compiles_is_analysed() -> None:
    # 2,500 chained additions: CPython 3.10 to 3.12 compile up to about 2,990 at the default limit.
    text = TWICE.replace("return x * y", "return " + " + ".join(["x"] * 2_500))
    compile(text, "deep.py", "exec")
    if ANALYSED_DEPTH is not None:  # Python 3.12: one line, and code less deep is analysed
        with pytest.raises(SourceError) as raised:
            run_guarded("deep.py", "testing", lambda: analysed(text))
        assert raised.value.problem == "too deeply nested to analyse (recursion limit reached while building the model)"
        text = TWICE.replace("return x * y", "return " + " + ".join(["x"] * (ANALYSED_DEPTH - 10)))
    functions, findings = run_guarded("deep.py", "testing", lambda: analysed(text))
    assert len(functions) == 2 and "23:AGL001" in findings


@pytest.mark.parametrize(
    "expression",
    ["-" * 7_000 + "x", "x" + ".t" * 12_000, " + ".join(["x"] * 12_000)],
    ids=["unary", "attributes", "sum"],
)
def test_code_deeper_than_cpython_compiles_is_one_error_line(expression: str) -> None:
    # Python 3.10's parser builds the tree of a 12,000-deep chain (its compiler refuses
    # it): such a file got past the syntax check, and libcst was asked to parse it.
    text = TWICE.replace("return x * y", "return " + expression)
    with pytest.raises(SourceError) as raised:
        run_guarded("deep.py", "testing", lambda: analysed(text))
    assert raised.value.problem == f"too deeply nested: Python {sys.version_info.major}.{sys.version_info.minor} does not compile it either" or (
        raised.value.problem.startswith("syntax error")
    )
