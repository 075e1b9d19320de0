"""In-place writes through functions of the same module (model/helpers.py): which parameters
a helper writes, and which of a method's values its calls hand to those parameters."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_lint.model import semantic
from autograd_lint.model.helpers import ModuleHelpers, helper_writes
from autograd_lint.model.imports import ImportMap


def _text(source: str) -> str:
    return textwrap.dedent(source).lstrip("\n")


def written(source: str, name: str) -> dict[str, tuple[str, int]] | None:
    """The parameters helper ``name`` of ``source`` writes: parameter -> (how, line)."""
    text = _text(source)
    helper = ModuleHelpers("m.py", text, ImportMap.from_text(text, None)).helper(name)
    return None if helper is None else {p: (w.how, w.line) for p, w in helper.writes.items()}


def through(source: str, method: str = "backward") -> list[tuple[str, str, str, int]]:
    """The writes ``method`` (a top-level ``def`` of ``source``) makes through helpers:
    (the names written, a rebound one primed; how; helper; line of the write in it)."""
    text = _text(source)
    imports = ImportMap.from_text(text, None)
    module = cst.parse_module(text)
    function = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == method)
    model = semantic.build(function, imports)
    found = []
    for write in helper_writes(model, ModuleHelpers("m.py", text, imports)):
        assert write.helper is not None
        names = sorted(f"{b.name}" + ("" if b.how is semantic.How.PARAMETER else "'") for b in write.origins)
        found.append((",".join(names), write.how, write.helper.name, write.helper.line))
    return found


COLOSSAL = """
import torch.distributed as dist
from torch.distributed import ReduceOp


def _all_reduce(tensor, comm_spec, async_op=False):
    process_group = comm_spec.process_group
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    dist.all_reduce(tensor, op=ReduceOp.SUM, group=process_group, async_op=async_op)
    return tensor


def backward(ctx, grad_output):
    return _all_reduce(grad_output, ctx.comm_spec), None
"""


def test_a_collective_on_a_parameter_on_one_path_writes_it() -> None:
    # ColossalAI colossalai/tensor/comm_spec.py: the recall miss of the fourth session.
    assert written(COLOSSAL, "_all_reduce") == {"tensor": ("torch.distributed.all_reduce()", 9)}
    assert through(COLOSSAL) == [("grad_output", "torch.distributed.all_reduce()", "_all_reduce", 9)]


def test_in_place_methods_views_and_keywords() -> None:
    source = """
    import torch

    def _fill(a, b, *, out):
        a[:, 0].zero_()
        b += 1
        torch.add(a, 1, out=out)

    def backward(ctx, g, h, k):
        _fill(g.view(-1), torch.zeros(3), out=k)
    """
    assert written(source, "_fill") == {"a": ("zero_()", 4), "out": ("out=", 6)}
    assert through(source) == [("g", "zero_()", "_fill", 4), ("k", "out=", "_fill", 6)]


def test_a_rebinding_first_is_a_new_value() -> None:
    source = """
    def _scaled(t, k):
        t = t.clone()
        t.mul_(k)
        return t

    def _shape(t):
        t.unsqueeze_(0)
        t.copy_(t)
        return t
    """
    assert written(source, "_scaled") == {}
    assert written(source, "_shape") == {}  # shape-only changes and self-copies write no data


def test_undecidable_helpers_are_not_read() -> None:
    source = """
    import torch
    from .ops import imported_

    def _flag(t, inplace=False):
        if inplace:
            t.add_(1)
        return t

    def _optional(t, out=None):
        out = t if out is None else out
        out.add_(1)

    def _twice(t):
        t.add_(1)

    _twice = torch.compile(_twice)

    def _recursive(t, n):
        t.add_(1)
        return t if n == 0 else _recursive(t, n - 1)

    @torch.no_grad()
    def _decorated(t):
        t.add_(1)

    def _flag_keyword(t, inplace):
        return torch.relu(t, inplace=inplace)

    def _global(t):
        t.add_(1)

    def _rebinds():
        global _global
        _global = None
    """
    for name in ("_flag", "_optional", "_twice", "_recursive", "_decorated", "imported_", "missing", "_global"):
        assert written(source, name) is None, name
    assert written(source, "_flag_keyword") == {}  # `inplace=<parameter>`: the caller decides


def test_a_star_import_may_bind_any_name() -> None:
    source = """
    from .ops import *

    def _scale(t):
        t.mul_(2)
    """
    assert written(source, "_scale") is None


def test_calls_that_are_not_followed() -> None:
    source = """
    def _scale(t, k=2):
        t.mul_(k)

    def backward(ctx, g, h, *args):
        _scale(*args)
        _scale(**{"t": g})
        _scale(k=3, t=h)
        g = g.clone()
        _scale(g)
        local = _scale
        local(h)
    """
    # Star arguments are not followed, `local` is a name the body binds; after
    # `g = g.clone()` the helper writes the copy, not the parameter.
    assert through(source) == [("h", "mul_()", "_scale", 2), ("g'", "mul_()", "_scale", 2)]


def test_a_name_the_method_binds_is_not_the_helper() -> None:
    source = """
    def _scale(t):
        t.mul_(2)

    def backward(ctx, g):
        _scale = print
        _scale(g)
    """
    assert through(source) == []
