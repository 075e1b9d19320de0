"""The custom-op finder reads only the statements that can matter (``custom_op_source``):
the model built from them is the model built from the whole module."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from autograd_lint.model.custom_ops import custom_op_source, extract_custom_ops, mentions_custom_op
from autograd_lint.model.extract import ParsedUnit
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.locate import Statements, top_level_statements
from autograd_lint.model.source import SourceFile, split_lines
from autograd_lint.rules import all_rules

ROOT = Path(__file__).resolve().parents[2]


def _starts(statements: list[ast.stmt]) -> list[int]:
    return sorted({min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])]) - 1 for s in statements})


def _check_statements(text: str) -> None:
    """Every block's statements, as the scan finds them, are those ``ast`` finds."""
    lines = split_lines(text)
    scan = Statements(text, lines)

    def check(body: list[ast.stmt], first: int, end: int, indent: str) -> None:
        found = scan.statements(first, end, indent)
        assert found is not None
        assert [start for start, _ in found] == _starts(body)
        first_at: dict[int, ast.stmt] = {}
        for node in body:
            first_at.setdefault(_starts([node])[0], node)  # `a = 1; b = 2`: one line, one range
        for start, stop in found:
            node = first_at[start]
            header = scan.header(start, stop, indent)
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                assert header is None
                continue
            inner = node.body[0]
            line = lines[inner.lineno - 1]
            if len(line) - len(line.lstrip(" \t")) != inner.col_offset:
                assert header is None  # the body shares a line with the header
                continue
            assert header is not None and header[1] == node.name and header[3] == _starts([inner])[0]
            check(node.body, header[3], stop, header[4])

    check(ast.parse(text).body, 0, len(lines), "")


TRICKY = [
    # decorators, clauses, a one-line body, brackets and strings at column 0
    '''
    import torch

    @decorator(
        1,
    )
    @other
    def f(a,
    b):
        """doc
    def not_a_def():
    """
        x = [
    1,
    ]
        return x

    if a:
        pass
    elif b:
        pass
    else:
        pass
    try:
        pass
    except E:
        pass
    finally:
        pass
    class C: pass
    def g(): return 1
    y = 1; z = 2
    s = "a \\
    b"
    t = 1 + \\
    2
    # a comment \\
    u = {
    "k": (1,
    2)}
    class D(
        Base,
    ):
        def m(self) -> (
            int
        ): ...
        def n(self): return 1

        @property
        def p(self):
            # comment at the start
            return 2
    ''',
    "def f():\n\tif x:\n\t\treturn 1\n\treturn 2\nz = f'{1}' # c\n",
    "x = 1\r\ny = 2\r\ndef f():\r\n    return 3\r\n",
]


@pytest.mark.parametrize("text", TRICKY)
def test_statements_are_those_of_ast(text: str) -> None:
    _check_statements(textwrap.dedent(text).lstrip("\n"))


def test_statements_of_this_repository_are_those_of_ast() -> None:
    for path in sorted([*ROOT.glob("autograd_lint/**/*.py"), *ROOT.glob("tests/**/*.py")]):
        _check_statements(path.read_text(encoding="utf-8"))


def test_unbalanced_brackets_give_up() -> None:
    text = "x = 1)\ny = 2\n"
    assert top_level_statements(text, split_lines(text)) is None


def _sources() -> list[str]:
    """Every custom-op source of the rules' examples and of the gen-tests fixtures."""
    sources = []
    for rule in all_rules():
        for example in [*rule.VALID, *rule.INVALID]:
            if example.parses_here and mentions_custom_op(example.source):
                sources.append(example.source)
    for path in sorted((ROOT / "tests/gentests/fixtures/custom_ops").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if mentions_custom_op(text):
            sources.append(text)
    return sources


def _model(unit: ParsedUnit, imports: ImportMap) -> tuple[object, ...]:
    found = extract_custom_ops(unit, imports, "m")
    return (found.ops, found.foreign, found.defined_names, found.has_unresolved_registration)


@pytest.mark.parametrize("text", _sources())
def test_picked_statements_give_the_whole_module_model(text: str) -> None:
    imports = ImportMap.from_text(text, "m")
    whole = _model(ParsedUnit.parse("m.py", text), imports)
    picked = custom_op_source(text, imports)
    if picked is None:
        assert whole == ([], [], set(), False)
        return
    source, line_map = picked
    assert line_map is not None
    assert _model(ParsedUnit.parse("m.py", source, line_map=line_map), imports) == whole


def test_only_what_can_matter_is_kept() -> None:
    text = textwrap.dedent(
        '''
        import torch
        from torch.library import register_fake as fake


        def helper(x):
            """Mentions torch.library.register_fake in text only."""
            return x  # op.register_fake(x) in a comment


        class Big:
            def unrelated(self):
                return 1

            def registers(self):
                @torch.library.custom_op("ns::inner", mutates_args=())
                def inner(x: torch.Tensor) -> torch.Tensor:
                    return x.clone()

                inner.register_autograd(backward)


        def backward(ctx, grad):
            return grad


        @fake("ns::other")
        def _(x):
            return x


        def custom_op(name):  # its own name is no use of the word
            return name
        '''
    )
    picked = custom_op_source(text, ImportMap.from_text(text, "m"))
    assert picked is not None
    source, line_map = picked
    kept = {split_lines(text)[line - 1].strip() for line in line_map}
    assert "def helper(x):" not in kept and "def unrelated(self):" not in kept
    assert "def custom_op(name):  # its own name is no use of the word" not in kept
    assert {"class Big:", "def registers(self):", "inner.register_autograd(backward)"} <= kept
    assert "def backward(ctx, grad):" in kept  # handed to register_autograd
    assert '@fake("ns::other")' in kept  # an imported alias


def test_nothing_to_read_gives_none() -> None:
    text = "import torch\n# torch.library.custom_op is mentioned in a comment\nx = 'register_fake'\n"
    assert custom_op_source(text, ImportMap.from_text(text, "m")) is None


def test_positions_are_the_files() -> None:
    from autograd_lint.model.analysis import analyze
    from autograd_lint.settings import Settings

    text = textwrap.dedent(
        '''
        import torch

        def unrelated():
            return 1

        @torch.library.custom_op("ns::f", mutates_args=())
        def f(x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        def unrelated_too():
            return 2

        @f.register_fake
        def _(x):
            return torch.empty_like(x)
        '''
    ).lstrip("\n")
    found = analyze(SourceFile("m.py", text, "m"), {}, Settings()).custom_ops
    assert found is not None and found.unit is not None and found.unit.line_map is not None
    (op,) = found.ops
    assert op.position.line == 7 and op.body is not None and op.body.last_line == 8
    (registration,) = op.registrations
    assert registration.position.line == 13 and registration.function is not None
    assert registration.function.position.line == 14


def test_a_file_with_ops_that_python_does_not_compile_is_an_error() -> None:
    from autograd_lint.model.analysis import analyze
    from autograd_lint.model.source import SourceError
    from autograd_lint.settings import Settings

    text = (
        "import torch\n\n@torch.library.custom_op('ns::f', mutates_args=())\n"
        "def f(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()\n\ndef broken(:\n    pass\n"
    )
    with pytest.raises(SourceError) as error:
        analyze(SourceFile("m.py", text, "m"), {}, Settings())
    assert error.value.line == 7
