"""A large module parsed a statement at a time (model/incremental.py) is the module libcst
parses whole: the same nodes, the same ranges, and the same findings, version after
version of an edited buffer whose unchanged statements are reused."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from autograd_lint.lint.engine import check_source
from autograd_lint.model import incremental, statements
from autograd_lint.model.cst_parse import parse_module
from autograd_lint.model.guard import compile_like_cpython
from autograd_lint.model.positions import positions
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings

_HEAD = '''\
#!/usr/bin/env python
# A module header comment.

"""Docstring."""
import torch
from torch.autograd import Function


class Scale(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * 2

x = 1; y = [2]
x = 1; y = [2]

class Trailing:
    a = 1
    # an indented comment after the body: the class's footer, no cut below it

# a comment at column 0
z = 0  # in Trailing's chunk

'''

_METHOD = '''
    # a comment leading method {i}
    @staticmethod
    def method_{i}(self, value):
        """Method {i}."""
        if value:
            return [value] * {i}

        # inside the method, after a blank line
        return value + {i}
'''

_SAME = '''
    def setUp(self):
        self.scaled = Scale()(torch.ones(1))  # AGL002, in both classes
'''


@pytest.fixture(autouse=True)
def _small_cuts(monkeypatch: pytest.MonkeyPatch) -> None:
    # A small text, cut as a large one is (a test's CPU: every interpreter of CI runs it).
    monkeypatch.setattr(incremental, "MIN_CHARS", 1_000)
    monkeypatch.setattr(incremental, "_MIN_CLASS_LINES", 20)


def _module_text(methods: int = 8) -> str:
    first = "".join(_METHOD.format(i=i) for i in range(methods))
    second = "".join(_METHOD.format(i=i) for i in range(methods // 2))
    return (
        _HEAD
        + "@decorated\nclass Big:\n"
        + _SAME
        + first
        + "\n\nclass Other:  # the same methods again: parsed again, never shared\n"
        + _SAME
        + second
        + "\n\nif __name__ == '__main__':\n    pass\n# the module's footer\n"
    )


def _assembled(text: str) -> cst.Module:
    compile_like_cpython(text, "big.py")  # the guard, which leaves the statement lines
    module = parse_module(text)
    assert incremental.table(module) is not None, "the text was not parsed by parts"
    return module


def _ranges(module: cst.Module) -> list[tuple[str, int, int, int, int]]:
    kept = incremental.table(module)  # the parts' ranges, moved, for an assembled module
    table = kept if kept is not None else positions(module)
    found = []
    stack: list[cst.CSTNode] = [module]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        assert id(node) not in seen, f"one {type(node).__name__} stands at two places"
        seen.add(id(node))
        r = table[node]
        found.append((type(node).__name__, r.start.line, r.start.column, r.end.line, r.end.column))
        stack.extend(reversed(node.children))
    return found


def _same_as_whole(text: str) -> None:
    module = _assembled(text)
    whole = cst.parse_module(text)
    assert module.code == text
    assert module.deep_equals(whole)
    assert module.default_indent == whole.default_indent
    assert incremental.table(module) is not None and incremental.table(whole) is None
    assert _ranges(module) == _ranges(whole)


def test_parts_make_the_module_libcst_parses_whole_edit_after_edit() -> None:
    text = _module_text()
    assert len(text) >= incremental.MIN_CHARS
    _same_as_whole(text)
    classes_cut = [chunk for chunk, _ in incremental._assembled[parse_module(text)] if len(chunk.parts) > 1]
    assert len(classes_cut) == 2  # Big and Other, a piece per method
    lines = text.split("\n")
    middle = lines.index("    def method_5(self, value):")
    edits = [
        lines[:middle] + ["    # typed inside the big class"] + lines[middle:],  # a new piece's leading line
        lines[:2] + ["import os"] + lines[2:],  # every line below moves down
        [line.replace("+ 5", "+ 6") for line in lines],  # one method's code
        lines + ["z = 3"],  # after the footer comment
    ]
    for edited in edits:
        _same_as_whole("\n".join(edited))


def test_findings_are_those_of_a_whole_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings()
    text = _module_text()
    lines = text.split("\n")
    middle = lines.index("    def method_3(self, value):")
    versions = [text, "\n".join(lines[:middle] + ["    # edit"] + lines[middle:]), "\n" + text]
    by_parts = [check_source(SourceFile("big.py", v, "big"), settings).diagnostics for v in versions]
    assert any(by_parts)  # the module has findings to compare
    monkeypatch.setattr(incremental, "MIN_CHARS", 10**9)
    whole = [check_source(SourceFile("big.py", v, "big"), settings).diagnostics for v in versions]
    assert by_parts == whole


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.replace("\n", "\r\n"),  # carriage returns: libcst counts lines its own way
        lambda t: t.replace("    a = 1\n", "  a = 1\n"),  # two indentation widths
    ],
)
def test_texts_that_cannot_be_cut_are_parsed_whole(change) -> None:
    text = change(_module_text())
    compile_like_cpython(text, "big.py")
    module = parse_module(text)
    assert incremental.table(module) is None
    assert module.deep_equals(cst.parse_module(text))


def test_the_statement_lines_of_the_latest_texts_are_kept_and_the_oldest_dropped() -> None:
    texts = [f"x = {i}\n" for i in range(statements._MOST_TEXTS + 1)]
    for text in texts:
        statements.remember(text, ast.parse(text))
    assert statements.spans_of(texts[-1]) is not None and statements.spans_of(texts[1]) is not None
    assert statements.spans_of(texts[0]) is None


def test_the_guards_cpython_tree_is_the_one_ast_gives_for_that_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import ast

    from autograd_lint.model import source

    text = _HEAD + "\n\nx = Scale.apply(1)\n"
    expected = ast.dump(ast.parse(text), include_attributes=True)
    compile_like_cpython(text, "m.py")
    monkeypatch.setattr(source.ast, "parse", lambda *args, **kwargs: pytest.fail("parsed a second time"))
    kept = source.python_tree(text)
    assert kept is not None and ast.dump(kept, include_attributes=True) == expected


def test_the_collector_s_thresholds_come_back_after_overlapping_analyses() -> None:
    # Two documents checked at once in two threads: the first body ends before the second.
    import gc

    from autograd_lint.model.guard import fewer_collections

    before = gc.get_threshold()
    first, second = fewer_collections(), fewer_collections()
    first.__enter__()
    raised = gc.get_threshold()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == raised  # the second body still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before
