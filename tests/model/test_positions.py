"""model.positions gives every node the range libcst's PositionProvider gives it."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from generated_programs import PROGRAMS
from hypothesis import HealthCheck, given, settings
from libcst.metadata import MetadataWrapper, PositionProvider

from autograd_lint.model.positions import Positions, positions

ROOT = Path(__file__).resolve().parents[2]


def assert_same_ranges(text: str) -> None:
    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = positions(module)
    assert set(found) == set(expected)
    assert {node: found[node] for node in expected} == dict(expected)


@pytest.mark.parametrize(
    "path",
    sorted([*ROOT.joinpath("examples").rglob("*.py"), *ROOT.joinpath("autograd_lint", "model").glob("*.py")]),
    ids=lambda p: p.name,
)
def test_the_examples_and_the_model_itself(path: Path) -> None:
    assert_same_ranges(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x = 1",  # no final newline: the module drops its last token after placing the statements
        "\n\n# only comments\n",
        "@dec\n\n# between\n@other(1)\nasync def f(a, /, b=2, *c, d: 'int' = (3), **e) -> None:\n    ...\n",
        "class A(B, metaclass=M):\n    x: int = 1; y = 2\n\n    def f(self):\n        return (\n            self\n        )[0]\n",
        "if a:\n    pass\nelif b:\n    pass\nelse:\n    pass\ntry:\n    x\nexcept* E as e:\n    y\nfinally:\n    z\n",
        "match p:\n    case [1, *rest] | {'k': v} if v:\n        pass\n    case Point(x=0):\n        pass\n",
        "s = f'{a!r:>{w}} {b=}' 'c' \"\"\"d\n\"\"\"\nt = lambda *a, k=1: (yield)\n",
        "x = 'ü' + 'ß'  # non-ASCII columns count characters\ny = x\n",
        "def f():\n\tif x:\n\t\treturn [i\n\t\t\tfor i in y if i]\n",
    ],
)
def test_tricky_shapes(text: str) -> None:
    assert_same_ranges(text)


def test_carriage_returns_fall_back_to_libcst_itself() -> None:
    text = "def f(a):\r\n    return a\r\n\r\nx = f(1)\r\n"
    assert_same_ranges(text)
    assert not isinstance(positions(cst.parse_module(text)), Positions)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=PROGRAMS)
def test_generated_programs(text: str) -> None:
    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError:
        return
    assert_same_ranges(text)




class _TooDeep(cst.Pass):
    """A statement whose code generation fails as libcst's does past the interpreter's recursion limit."""

    def _codegen_impl(self, state: object, default_semicolon: bool = False) -> None:  # type: ignore[override]
        raise RecursionError("maximum recursion depth exceeded")


def test_an_error_in_the_code_generation_is_not_hidden_by_a_key_error() -> None:
    # Found on 3.10 (a fuzzed 10,000-deep chain) and 3.12 (whose fixed C recursion limit
    # stops libcst's code generation about 740 levels deep): the syntactic scopes closed
    # on the way out (a statement line's ends at its last statement) looked up spans the
    # failure had left unrecorded, and the file was reported as
    # "internal error ... KeyError: <IndentedBlock>".
    module = cst.parse_module("def f(x):\n    pass\n")
    line = module.body[0].body.body[0]
    module = module.deep_replace(line, line.with_changes(body=[_TooDeep()]))
    with pytest.raises(RecursionError):
        positions(module)
