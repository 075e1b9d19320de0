"""Inputs read from source: literals, call sites, annotations, defaults, and their order."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from autograd_lint.model.discovery import discover_functions
from autograd_lint.gentests.callsites import find_call_sites, match_call_sites
from autograd_lint.gentests.inputs import (
    InputCase,
    Origin,
    ScalarInput,
    TensorInput,
    ValueInput,
    choose_inputs,
    shaped_tensor,
)
from autograd_lint.gentests.literals import default_sources, input_of
from autograd_lint.model.source import read_source

TORCH = frozenset({"torch", "th"})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("torch.randn(3, 4)", TensorInput((3, 4), "float32", "cpu", False)),
        ("th.rand((2, 5), dtype=th.double)", TensorInput((2, 5), "float64", "cpu", False)),
        ("torch.zeros(size=(3,))", TensorInput((3,), "float32", "cpu", False)),
        ("torch.randn(3, requires_grad=True)", TensorInput((3,), "float32", "cpu", True)),
        ("torch.randn(3, requires_grad=False)", TensorInput((3,), "float32", "cpu", False)),
        ("torch.tensor([True, False])", TensorInput((2,), "bool", "cpu", False)),
        ("torch.randn(2, 2, device='cuda')", TensorInput((2, 2), "float32", "cuda", False)),
        ("torch.randn(4).double().requires_grad_()", TensorInput((4,), "float64", "cpu", True)),
        ("torch.ones(2, 3).to(torch.float16).cuda()", TensorInput((2, 3), "float16", "cuda", False)),
        ("torch.ones(2).to('cuda')", TensorInput((2,), "float32", "cuda", False)),
        ("torch.tensor([[1.0, 2.0], [3.0, 4.0]])", TensorInput((2, 2), "float32", "cpu", False)),
        ("torch.tensor([1, 2, 3])", TensorInput((3,), "int64", "cpu", False)),
        ("torch.randint(0, 5, (6,))", TensorInput((6,), "int64", "cpu", False)),
        ("torch.eye(3)", TensorInput((3, 3), "float32", "cpu", False)),
        ("torch.arange(5)", TensorInput((5,), "int64", "cpu", False)),
        ("torch.arange(0)", TensorInput((0,), "int64", "cpu", False)),  # empty, not a negative size
        ("torch.linspace(0, 1, 5)", TensorInput((5,), "float32", "cpu", False)),
        ("2", ValueInput("2")),
        ("-0.5", ValueInput("-0.5")),
        ("'mean'", ValueInput("'mean'")),
        ("(1, -2)", ValueInput("(1, -2)")),
        ("[True, None]", ValueInput("[True, None]")),
        ("th.float32", ValueInput("torch.float32")),
        ("(3,)", ValueInput("(3,)")),
    ],
)
def test_literal_arguments(source: str, expected: object) -> None:
    assert input_of(cst.parse_expression(source), TORCH) == expected


@pytest.mark.parametrize(
    "source",
    ["x", "torch.randn(n, 4)", "torch.randn(3) * 2", "f'{x}'", "torch.randn(3).sum()", "make_tensor(3)",
     "torch.randn(3, dtype=dtype)", "-x",
     # a name among the elements is no literal, whatever it holds
     "torch.tensor([n, 1])", "torch.tensor([1.5, -x])", "torch.tensor([torch.pi])"],
)
def test_non_literal_arguments(source: str) -> None:
    assert input_of(cst.parse_expression(source), TORCH) is None


FUNCTIONS = '''\
from __future__ import annotations

import torch as th
from torch.autograd import Function

EPS = 1e-6


class Scale(Function):
    @staticmethod
    def forward(ctx, x, factor: float, mode: str = "sum", eps=EPS):
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None, None


class Shaped(Function):
    @staticmethod
    def forward(ctx, a: Float[Tensor, "batch n"], b: Float[Tensor, "n *rest"], idx: Int[Tensor, "batch"],
                k: int, flag: bool = True):
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad, None, None, None


class Unknown(Function):
    @staticmethod
    def forward(ctx, x, reduction: str):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Variadic(Function):
    @staticmethod
    def forward(ctx, *tensors):
        return tensors[0]

    @staticmethod
    def backward(ctx, grad):
        return grad


scale = Scale.apply


def demo(x):
    Scale.apply(th.randn(2, 3), 2.0)
    scale(th.randn(4), 0.5, "max")
    Scale.apply(x, 2.0)
    Scale.apply(th.randn(2, 3), factor=2.0)
    Unknown.apply(th.ones(3), "none")
'''


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "ops.py"
    path.write_text(FUNCTIONS)
    return path


def test_call_sites_with_only_literal_positional_arguments(module: Path) -> None:
    sites = find_call_sites(read_source(str(module)))
    lines = FUNCTIONS.splitlines()
    calls = ('    Scale.apply(th.randn(2, 3), 2.0)', '    scale(th.randn(4), 0.5, "max")',
             '    Unknown.apply(th.ones(3), "none")')
    expected_lines = [lines.index(call) + 1 for call in calls]
    assert [(s.class_name, s.line) for s in sites] == list(zip(["Scale", "Scale", "Unknown"], expected_lines))
    assert sites[1].case == InputCase((TensorInput((4,)), ValueInput("0.5"), ValueInput('"max"')))


def test_call_sites_are_matched_by_class_name(module: Path) -> None:
    specs = {spec.name: spec for spec in discover_functions([module])}
    sites = find_call_sites(read_source(str(module)))
    scale_cases = match_call_sites(specs["Scale"], sites, list(specs.values()))
    assert [c.args[0] for c in scale_cases] == [TensorInput((2, 3)), TensorInput((4,))]
    assert match_call_sites(specs["Shaped"], sites, list(specs.values())) == []


def test_jaxtyping_dimensions_share_sizes_across_parameters() -> None:
    sizes: dict[str, int] = {}
    assert shaped_tensor('Float[Tensor, "batch n"]', sizes) == TensorInput((3, 4))
    assert shaped_tensor('jaxtyping.Float32[torch.Tensor, "n 5 ... *rest"]', sizes) == TensorInput((4, 5, 2))
    assert shaped_tensor("Optional[Bool[Tensor, '#batch']]", sizes) == TensorInput((3,), "bool")
    assert shaped_tensor('Float[Tensor, "n+1"]', sizes) is None
    assert shaped_tensor("Tensor", sizes) is None
    # Ten named dimensions get ten distinct sizes: a transposed gradient never fits by accident.
    (shape,) = {shaped_tensor('Float[Tensor, "a b c d e f g h i j"]', {}).shape}  # type: ignore[union-attr]
    assert len(set(shape)) == 10


def test_default_sources_keep_literals_only(module: Path) -> None:
    specs = {spec.name: spec for spec in discover_functions([module])}
    assert default_sources(specs["Scale"]) == {"mode": '"sum"', "eps": None}


def test_inputs_come_from_the_most_preferred_source(module: Path) -> None:
    specs = {spec.name: spec for spec in discover_functions([module])}
    recorded = [InputCase((TensorInput((5,)), ValueInput("3.0")))]
    call_site = [InputCase((TensorInput((2,)), ValueInput("1.0")))]
    scale = specs["Scale"]
    defaults = default_sources(scale)

    assert choose_inputs(scale, recorded, call_site, defaults).origin is Origin.RECORDED
    assert choose_inputs(scale, [], call_site, defaults).cases == tuple(call_site)
    # No shape annotation: the tensor is searched for; the non-literal default is left out.
    searched = choose_inputs(scale, [], [], defaults)
    assert searched.origin is Origin.SEARCH
    assert searched.cases == (InputCase((TensorInput(None), ValueInput("0.5"), ValueInput('"sum"'))),)

    shaped = choose_inputs(specs["Shaped"], [], [], default_sources(specs["Shaped"]))
    assert shaped.origin is Origin.STATIC
    assert shaped.cases == (InputCase((
        TensorInput((3, 4)), TensorInput((4, 2)), TensorInput((3,), "int64", requires_grad=False),
        ValueInput("1"), ValueInput("True"),
    )),)

    unknown = choose_inputs(specs["Unknown"], [], [], {})
    assert unknown.origin is Origin.NONE and "'reduction': str" in str(unknown.reason)
    variadic = choose_inputs(specs["Variadic"], [], [], {})
    assert variadic.origin is Origin.NONE and "*args" in str(variadic.reason)


def test_searched_inputs_respect_kinds_and_classmethod_forwards(tmp_path: Path) -> None:
    module = tmp_path / "kinds.py"
    module.write_text('''\
import torch


class Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha, factor):
        ctx.save_for_backward(alpha)
        ctx.factor = factor
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        (alpha,) = ctx.saved_tensors
        return -grad * alpha * ctx.factor, None, None


class Sparse(torch.autograd.Function):
    @classmethod
    def forward(cls, ctx, X, dim=0, k=None):
        return X.clone()

    @classmethod
    def backward(cls, ctx, dY):
        return dY, None, None
''')
    specs = {spec.name: spec for spec in discover_functions([module])}
    reverse = choose_inputs(specs["Reverse"], [], [], default_sources(specs["Reverse"]))
    # alpha is saved for backward: a tensor without a gradient, not a searched number.
    assert reverse.cases == (InputCase((TensorInput(None), TensorInput(None, requires_grad=False), ScalarInput())),)
    sparse = choose_inputs(specs["Sparse"], [], [], default_sources(specs["Sparse"]))
    assert sparse.cases == (InputCase((TensorInput(None), ValueInput("0"), ValueInput("None"))),)
