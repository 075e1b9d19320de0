"""model.traverse walks a tree as libcst's own visit does."""

from __future__ import annotations

import libcst as cst

from autograd_lint.model import traverse


def test_the_fast_walk_calls_the_hooks_libcst_calls_in_the_same_order() -> None:
    """traverse.visit leaves out whitespace subtrees only for a visitor with no hook there."""
    class Recorder(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def visit_Name(self, node: cst.Name) -> None:
            self.calls.append(f"visit {node.value}")

        def leave_Call(self, node: cst.Call) -> None:
            self.calls.append(f"leave call of {cst.Module([]).code_for_node(node.func)}")

    class WithComments(Recorder):
        def visit_Comment(self, node: cst.Comment) -> None:
            self.calls.append(node.value)

    module = cst.parse_module("f(a, # one\n  g(b))  # two\nx = (  # three\n  y)\n")
    for kind in (Recorder, WithComments):
        ours, theirs = kind(), kind()
        traverse.visit(module, ours)
        module.visit(theirs)
        assert ours.calls == theirs.calls
    assert "# two" in theirs.calls


def test_walk_enters_nested_scopes_unless_told_not_to() -> None:
    expression = cst.parse_expression("f(lambda: inner)")
    names = [n.value for n in traverse.walk(expression) if isinstance(n, cst.Name)]
    assert names == ["f", "inner"]
    assert [n.value for n in traverse.walk(expression, scopes=False) if isinstance(n, cst.Name)] == ["f"]
