"""Which ``Fn.apply(...)`` arguments a module shows to be trainable (model/trainable.py)."""

from __future__ import annotations

import textwrap

import pytest

from autograd_lint.model.imports import ImportMap
from autograd_lint.model.trainable import trainable_arguments


def _found(code: str) -> dict[str, list[tuple[int, str]]]:
    text = textwrap.dedent(code)
    found = trainable_arguments(text, ImportMap.from_text(text, "m"))
    return {name: [(a.position, a.code) for a in arguments] for name, arguments in found.items()}


def test_parameter_attributes_of_the_calling_class() -> None:
    assert _found(
        """
        import torch.nn as nn

        class Dense(nn.Module):
            def __init__(self):
                self.weight = nn.Parameter(nn.init.zeros_(torch.empty(2)))
                self.register_parameter("bias", nn.Parameter(torch.zeros(2)))
                self.scale = torch.ones(2)

            def forward(me, x):
                return Fn.apply(x, me.weight, me.bias, me.scale)
        """
    ) == {"Fn": [(1, "me.weight"), (2, "me.bias")]}


def test_attribute_of_another_class_is_not_evidence() -> None:
    assert _found(
        """
        import torch

        class A(torch.nn.Module):
            def __init__(self):
                self.bias = torch.nn.Parameter(torch.zeros(2))

        class B(torch.nn.Module):
            def __init__(self):
                self.register_buffer("bias", torch.zeros(2))

            def forward(self, x):
                return Fn.apply(x, self.bias)
        """
    ) == {}


@pytest.mark.parametrize(
    ("binding", "expected"),
    [
        ("b = torch.zeros(2, requires_grad=True)", {"Fn": [(1, "b")]}),
        ("b = nn.Parameter(torch.zeros(2))", {"Fn": [(1, "b")]}),
        ("b = nn.Parameter(torch.zeros(2), requires_grad=False)", {}),
        ("b = torch.zeros(2, requires_grad=False)", {}),
        ("b = torch.zeros(2)", {}),
        ("with torch.no_grad():\n        b = x.mean()", {}),
        # A with statement is read for what it binds (`as b`), not for being there.
        ("b = nn.Parameter(x)\n    with torch.no_grad():\n        x.zero_()", {"Fn": [(1, "b")]}),
        ("b = nn.Parameter(x)\n    with open('w') as b:\n        pass", {}),
    ],
)
def test_local_names(binding: str, expected: dict) -> None:
    code = f"import torch\nfrom torch import nn\n\ndef f(x):\n    {binding}\n    return Fn.apply(x, b)\n"
    assert _found(code) == expected


def test_rebound_or_parameter_name_is_not_evidence() -> None:
    assert _found(
        """
        import torch

        def f(x, b):
            b = torch.nn.Parameter(b)
            c = torch.nn.Parameter(x)
            c = c.detach()
            return Fn.apply(x, b, c)
        """
    ) == {}


def test_positions_stop_at_a_star_argument() -> None:
    assert _found(
        """
        import torch

        Fn.apply(torch.nn.Parameter(x), *rest, torch.nn.Parameter(y))
        """
    ) == {"Fn": [(0, "torch.nn.Parameter(x)")]}


def test_unparsable_text() -> None:
    assert _found("def f(:\n") == {}


def test_a_nested_function_binds_its_own_names() -> None:
    assert _found(
        """
        import torch

        def f(x):
            def init():
                b = torch.nn.Parameter(torch.zeros(2))
                return b
            return Fn.apply(x, b)
        """
    ) == {}
