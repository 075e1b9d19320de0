"""What functions of the same module do with their arguments (model/helpers.py): which
parameters a helper writes in place or reads ``saved_tensors`` of, through helpers it calls
too, and which of a method's values its calls hand to those parameters."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst

from autograd_lint.model import semantic
from autograd_lint.model.helpers import MAX_DEPTH, ModuleHelpers, helper_saved_reads, helper_writes
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.scopes import module_bindings


def _text(source: str) -> str:
    return textwrap.dedent(source).lstrip("\n")


def written(source: str, name: str) -> dict[str, tuple[str, int]] | None:
    """The parameters helper ``name`` of ``source`` writes: parameter -> (how, line)."""
    text = _text(source)
    helper = ModuleHelpers("m.py", text, ImportMap.from_text(text, None)).helper(name)
    return None if helper is None else {p: (w.how, w.line) for p, w in helper.writes.items()}


def saved_reads(source: str, name: str) -> dict[str, tuple[int, int]] | None:
    """How helper ``name`` of ``source`` reads ``saved_tensors``: parameter -> (most on one path, line)."""
    text = _text(source)
    helper = ModuleHelpers("m.py", text, ImportMap.from_text(text, None)).helper(name)
    return None if helper is None else {p: (r.most, r.line) for p, r in helper.saved_reads.items()}


def handed(source: str, method: str = "backward") -> list[tuple[str, int]]:
    """The calls of ``method`` handing its ``ctx`` to helpers that read saved_tensors: (callee, most)."""
    text = _text(source)
    imports = ImportMap.from_text(text, None)
    module = cst.parse_module(text)
    function = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == method)
    model = semantic.build(function, imports)
    found = helper_saved_reads(model, ModuleHelpers("m.py", text, imports), "ctx")
    return [(cst.Module([]).code_for_node(call.func), used.most) for call, used in found]


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


KEOPS = """
import torch


class Base:
    @staticmethod
    def _backward(ctx, G, _):
        args = ctx.saved_tensors[:-1]
        result = ctx.saved_tensors[-1].detach()
        return [g for g in args]

    def not_static(ctx):
        return ctx.saved_tensors


def backward(ctx, G):
    return Base._backward(ctx, G, None)
"""


def test_a_static_method_of_a_module_class_reading_saved_tensors_twice() -> None:
    assert saved_reads(KEOPS, "Base._backward") == {"ctx": (2, 7)}
    assert handed(KEOPS) == [("Base._backward", 2)]
    # Only ``@staticmethod``s are helpers (a plain method's first parameter is the instance).
    assert saved_reads(KEOPS, "Base.not_static") is None


def test_helpers_calling_helpers_are_followed_and_reads_add_up() -> None:
    source = """
    def _inner(c, g):
        (x,) = c.saved_tensors
        return g * x

    def _outer(ctx, g):
        if ctx.needs_input_grad[0]:
            return _inner(ctx, g)
        return None

    def _both(ctx, g):
        x = ctx.saved_variables
        return _outer(ctx, g), [ctx.saved_tensors for _ in range(2)]

    def _loop(ctx, gs):
        return [_inner(ctx, g) for g in gs]

    def backward(ctx, g):
        ctx = ctx
        return _outer(ctx, g)
    """
    assert saved_reads(source, "_inner") == {"c": (1, 2)}
    assert saved_reads(source, "_outer") == {"ctx": (1, 2)}
    # Its own read, the helper's, and a read in a comprehension's element (once per item).
    assert saved_reads(source, "_both") == {"ctx": (4, 2)}
    # A call in a comprehension's element counts once (the model marks per-item loads,
    # not calls): fewer reads, the silent side.
    assert saved_reads(source, "_loop") == {"ctx": (1, 2)}
    # A rebound ctx is not the parameter any more: not followed.
    assert handed(source) == []


def test_cycles_and_depth_are_not_followed() -> None:
    source = """
    def _ping(ctx, g):
        (x,) = ctx.saved_tensors
        return _pong(ctx, g)

    def _pong(ctx, g):
        return _ping(ctx, g)
    """
    # Read from _ping, the call back to _ping closes a cycle: that call is not followed.
    assert saved_reads(source, "_ping") == {"ctx": (1, 2)}
    assert saved_reads(source, "_pong") == {"ctx": (1, 2)}
    chain = ["def _h0(ctx):\n    (x,) = ctx.saved_tensors\n"]
    chain += [f"def _h{i}(ctx):\n    return _h{i - 1}(ctx)\n" for i in range(1, MAX_DEPTH + 1)]
    text = "\n".join(chain)
    assert saved_reads(text, f"_h{MAX_DEPTH - 1}") == {"ctx": (1, 2)}
    assert saved_reads(text, f"_h{MAX_DEPTH}") == {}


def test_a_helper_writing_through_another_helper_writes_its_parameter() -> None:
    source = """
    import torch.distributed as dist

    def _all_reduce(tensor):
        dist.all_reduce(tensor)
        return tensor

    def _reduce_grad(grad, copy):
        copy = copy.clone()
        _all_reduce(copy)
        return _all_reduce(grad)

    def backward(ctx, g, h):
        return _reduce_grad(g, h), None
    """
    assert written(source, "_reduce_grad") == {"grad": ("torch.distributed.all_reduce()", 4)}
    assert through(source) == [("g", "torch.distributed.all_reduce()", "_reduce_grad", 4)]


def test_a_module_binds_what_its_nested_scopes_run_in_it_and_not_their_bodies() -> None:
    # Decorators, defaults and bases run in the module; bodies (and lambda parameters) do not.
    tree = ast.parse(
        "import functools\n"
        "scale = lambda y=(low := 0): y\n"
        "@(cache := functools.cache)\n"
        "def g(x=(high := 9)):\n"
        "    inner = 1\n"
        "class C(base := object):\n"
        "    field = 2\n"
    )
    assert module_bindings(tree) == {
        "functools": 1, "scale": 1, "low": 1, "cache": 1, "g": 1, "high": 1, "C": 1, "base": 1
    }


def test_how_many_values_a_helper_returns() -> None:
    text = _text(
        """
        def pair(g, w):
            grads = (g * w, None)
            return grads

        def two_lengths(g, full):
            if FULL:
                return g, g, g
            return g, g

        def falls_through(g):
            if FULL:
                return (g,)

        def one(g):
            return g * 2
        """
    )
    helpers = ModuleHelpers("m.py", text, ImportMap.from_text(text, None))
    found = {name: getattr(helpers.helper(name), "returned", None) for name in ("pair", "two_lengths", "falls_through", "one")}
    assert found == {"pair": 2, "two_lengths": None, "falls_through": None, "one": None}
    assert all(helpers.helper(name) is not None for name in found)  # each read, two with no count
