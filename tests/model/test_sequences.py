"""Returned tuples that no literal spells (model/sequences.py): literals joined by ``+`` and
repeated by ``*``, and ``tuple(results)`` of a list built by ``append``/``extend``."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_lint.model import semantic
from autograd_lint.model.exprs import node_code
from autograd_lint.model.imports import ImportMap


def returned(source: str) -> list[tuple[str, ...] | None]:
    """For each ``return`` of the first ``def`` of ``source``, the code of its elements."""
    text = textwrap.dedent(source).lstrip("\n")
    module = cst.parse_module(text)
    function = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    model = semantic.build(function, ImportMap.from_text(text, None))
    return [None if r.elements is None else tuple(node_code(e) for e in r.elements) for r in model.returns]


def test_a_list_built_by_appends_and_extends_in_branches_of_equal_length() -> None:
    # The shape of torch 2.13's expanded-weights backwards (nn/utils/_expanded_weights).
    assert returned(
        """
        def backward(ctx, grad_output):
            input, weight = ctx.args
            results: list = []
            results.append(None)
            results.append(None)
            if input.requires_grad:
                results.append(grad_output @ weight)
            else:
                results.append(None)
            results.extend([None] * 2)
            return tuple(results)
        """
    ) == [("None", "None", "grad_output @ weight", "None", "None")]


def test_a_branch_that_leaves_the_block_does_not_count() -> None:
    assert returned(
        """
        def backward(ctx, g):
            results = [g]
            if ctx.skip:
                return None, None
            elif ctx.double:
                results.append(g * 2)
            else:
                raise ValueError("no")
            return tuple(results)
        """
    ) == [("None", "None"), ("g", "g * 2")]


def test_literals_joined_and_repeated() -> None:
    assert returned(
        """
        def backward(ctx, g):
            if ctx.a:
                return (None,) * 2 + (g,)
            return tuple([g, *[None] * 2])
        """
    ) == [("None", "None", "g"), ("g", "None", "None")]


def test_a_tuple_bound_to_a_name_among_joined_tuples() -> None:
    assert returned(
        """
        def backward(ctx, g):
            grads = (g * 2, g * 3)
            if ctx.a:
                return (None,) * 2 + grads
            return (None, *grads)
        """
    ) == [("None", "None", "g * 2", "g * 3"), ("None", "g * 2", "g * 3")]


@pytest.mark.parametrize(
    "body",
    [
        "results = []\nfor g in grads:\n    results.append(g)\nreturn tuple(results)",  # a loop
        "results = []\nif g is not None:\n    results.append(g)\nreturn tuple(results)",  # one branch appends
        "results = []\nresults.extend(grads)\nreturn tuple(results)",  # extend by a name
        "results = []\nhelper(results)\nreturn tuple(results)",  # handed to other code
        "results = []\nresults.append(g)\nresults.insert(0, None)\nreturn tuple(results)",  # another method
        "results = [g]\nalias = results\nalias.append(g)\nreturn tuple(results)",  # an alias
        "results = [g]\nresults += [None]\nreturn tuple(results)",  # rebound by +=
        "results = [g]\nf = lambda: results.append(g)\nreturn tuple(results)",  # read in a nested scope
        "results = [g]\nreturn results",  # a list is one value to autograd
        "tuple = list\nresults = [g]\nreturn tuple(results)",  # not the builtin
        "results = [g]\nif g is None:\n    results = [None, None]\nreturn tuple(results)",  # two bindings reach
        "return (None,) * n + (g,)",  # a repetition of unknown count
        "return [None] + [g]",  # a list: one value
        "grads = (g,)\nif g is None:\n    grads = ()\nreturn (None,) + grads",  # two bindings reach
        "grads = ()\nfor x in grads:\n    grads = grads + (x,)\nreturn (None,) + grads",  # grown in a loop
        "grads = [g]\nreturn (None, *grads)",  # a list name: not followed
    ],
)
def test_undecided_shapes_give_no_elements(body: str) -> None:
    source = "def backward(ctx, g, grads=()):\n" + textwrap.indent(body, "    ") + "\n"
    assert returned(source)[-1] is None
