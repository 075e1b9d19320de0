"""AGL025: the jvp (forward-mode AD) contract."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.flow import bound_names, escapes, inplace_writes, method_body, passed_to_call, return_statements
from autograd_lint.rules._common import argument_range, plural
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import FunctionSpec, Kind, MethodSpec


class JvpContract(Rule):
    """Checks the contract of a Function's ``jvp``: (a) it takes ctx and one tangent
    per forward input; (b) it reads ``ctx.saved_tensors`` only when forward (or
    setup_context) calls ``ctx.save_for_forward``; (c) a returned tuple literal has
    one tangent per forward output; (d) for an input that forward marks dirty,
    jvp modifies the matching tangent in place.  Arity is checked only without
    ``*args``; (b) and (d) stay silent when ctx or the tangent is handed to other
    code, which could do the work; (c) needs every forward ``return`` to be a tuple
    literal of one length, or a single arithmetic expression."""

    code = "AGL025"
    title = "jvp (forward-mode AD) contract"
    severity = Severity.ERROR
    why = (
        "(a) `TypeError: F.jvp() takes 2 positional arguments but 3 were given`. (b) jvp sees "
        "only what `save_for_forward` saved: `ValueError: not enough values to unpack (expected "
        "1, got 0)`. (c) `RuntimeError: Function's jvp returned an invalid number of forward "
        "gradients (expected 1 but got 2)`. (d) `RuntimeError: An inplace custom Function is not "
        "modifying the forward mode gradients inplace. If the forward is modifying an input "
        "inplace, then the jvp function must modify the corresponding gradient inplace.`"
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        jvp = function.method("jvp")
        if jvp is None:
            return
        if ctx.own(jvp):
            yield from self._arity(function, jvp)
            yield from self._saved_tensors(ctx, jvp)
            yield from self._return_count(function, jvp)
        yield from self._dirty_tangents(ctx, jvp)

    # (a)
    def _arity(self, function: FunctionSpec, jvp: MethodSpec) -> Iterator[Report]:
        passed = argument_range(function)
        if passed is None or jvp.has_var_positional or not jvp.positional:
            return
        tangents = jvp.positional[1:]
        required = sum(1 for p in tangents if p.default is None)
        fewest, most = passed
        if required > most or len(tangents) < fewest:
            expected = plural(most, "input") if fewest == most else f"{fewest} to {most} inputs"
            yield Report(
                jvp.position,
                f"{function.name}.jvp takes {plural(len(tangents), 'tangent')} after ctx, but "
                f"forward is called with {expected} (jvp gets one tangent per input)",
            )

    # (b)
    def _saved_tensors(self, ctx: FunctionContext, jvp: MethodSpec) -> Iterator[Report]:
        function = ctx.function
        reads = jvp.reads("saved_tensors") + jvp.reads("saved_variables")
        split = function.is_split_style
        if not reads or split is None:
            return
        saver = function.method("setup_context" if split else "forward")
        if saver is None or saver.calls("save_for_forward"):
            return
        unit = ctx.unit(saver)
        ctx_name = saver.ctx_name
        if unit is None or saver.node is None or ctx_name is None or escapes(saver.node, ctx_name):
            return  # a helper may call save_for_forward on ctx
        first = min(reads, key=lambda r: (r.position.line, r.position.column))
        yield Report(
            first.position,
            f"{function.name}.jvp reads ctx.{first.attribute}, but {saver.name} never calls "
            "ctx.save_for_forward, so it is empty in jvp (save_for_backward does not reach jvp)",
        )

    # (c)
    def _return_count(self, function: FunctionSpec, jvp: MethodSpec) -> Iterator[Report]:
        n_outputs = _certain_outputs(function)
        if n_outputs is None:
            return
        for ret in jvp.returns:
            if ret.shape == "tuple" and ret.elements is not None and len(ret.elements) != n_outputs:
                yield Report(
                    ret.position,
                    f"{function.name}.jvp returns {plural(len(ret.elements), 'tangent')}, but "
                    f"forward returns {plural(n_outputs, 'output')}",
                )

    # (d)
    def _dirty_tangents(self, ctx: FunctionContext, jvp: MethodSpec) -> Iterator[Report]:
        function = ctx.function
        forward = function.method("forward")
        inputs = function.forward_inputs
        if function.is_split_style is not False or forward is None or inputs is None:
            return  # split style marks through `inputs`, which is not mapped back here
        marks = forward.calls("mark_dirty")
        if not marks or not (ctx.own(jvp) or ctx.own(forward)) or forward.node is None:
            return
        jvp_unit = ctx.unit(jvp)
        if jvp_unit is None or jvp.node is None or jvp.has_var_positional:
            return
        rebound = bound_names(forward.node)
        index_of = {p.name: i for i, p in enumerate(inputs)}
        tangents = jvp.positional[1:]
        for call in marks:
            for arg in call.args:
                if arg.name is None or arg.name not in index_of or arg.name in rebound:
                    continue
                index = index_of[arg.name]
                if index >= len(tangents):
                    continue  # an arity problem, reported by (a)
                tangent = tangents[index].name
                if passed_to_call(jvp.node, tangent, as_out=False):
                    continue  # a helper may modify it in place
                writes = inplace_writes(method_body(jvp.node), {tangent}, ctx.analysis.imports, lambda n: True)
                if writes:
                    continue
                yield Report(
                    jvp.position if ctx.own(jvp) else call.position,
                    f"{function.name}.forward marks input `{arg.name}` dirty, but jvp does not "
                    f"modify its tangent `{tangent}` in place",
                )

    VALID = [
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    ctx.save_for_forward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y

                @staticmethod
                def jvp(ctx, gx):
                    (y,) = ctx.saved_tensors
                    return gx * y
            """
        ),
        # Trap 3: *grad_inputs takes any number of tangents.
        Valid(
            """
            import torch

            class Add(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    return x + y

                @staticmethod
                def jvp(ctx, *tangents):
                    return tangents[0] + tangents[1]
            """
        ),
        # Trap 8/14: a helper receives ctx and may call save_for_forward there.
        Valid(
            """
            import torch

            def _save(ctx, x):
                ctx.save_for_forward(x)

            class Sin(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    _save(ctx, x)
                    return x.sin()

                @staticmethod
                def jvp(ctx, gx):
                    (x,) = ctx.saved_tensors
                    return gx * x.cos()
            """
        ),
        # Trap 4 / 16: a combined-style input with a default may be left out by the caller.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, factor=None):
                    ctx.factor = 2.0 if factor is None else factor
                    return x * ctx.factor

                @staticmethod
                def jvp(ctx, gx):
                    return gx * ctx.factor
            """
        ),
        # Trap 12: the tangent of a dirty input is modified in place (through a view).
        Valid(
            """
            import torch

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    x.mul_(2)
                    ctx.mark_dirty(x)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2

                @staticmethod
                def jvp(ctx, gx):
                    gx.view(-1).mul_(2)
                    return gx
            """
        ),
        # Trap 2: forward's output count is unknown, so jvp's return is not checked.
        Valid(
            """
            import torch

            class Halves(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return torch.chunk(x, 2)

                @staticmethod
                def jvp(ctx, gx):
                    return gx[:1], gx[1:]
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    ctx.save_for_forward(x, y)
                    return x * y

                @staticmethod
                def jvp(ctx, gx):
                    x, y = ctx.saved_tensors
                    return gx * y
            """,
            line=10,
            message="Mul.jvp takes 1 tangent after ctx, but forward is called with 2 inputs",
        ),
        Invalid(
            """
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return 2 * x * grad

                @staticmethod
                def jvp(ctx, gx):
                    (x,) = ctx.saved_tensors
                    return 2 * x * gx
            """,
            line=16,
            message="Square.jvp reads ctx.saved_tensors, but forward never calls ctx.save_for_forward",
        ),
        Invalid(
            """
            import torch

            class Twice(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x / 2

                @staticmethod
                def jvp(ctx, gx):
                    return gx / 2, None
            """,
            line=10,
            message="Twice.jvp returns 2 tangents, but forward returns 1 output",
        ),
        Invalid(
            """
            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    x.add_(1)
                    ctx.mark_dirty(x)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad

                @staticmethod
                def jvp(ctx, gx):
                    return gx
            """,
            line=15,
            message="AddOne.forward marks input `x` dirty, but jvp does not modify its tangent `gx` in place",
        ),
        # Split style: apply binds forward's defaults, so jvp gets every tangent.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(x, factor=2.0):
                    return x * factor

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.factor = inputs[1]

                @staticmethod
                def jvp(ctx, gx):
                    return gx * ctx.factor
            """,
            line=13,
            message="takes 1 tangent after ctx, but forward is called with 2 inputs",
        ),
    ]


def _certain_outputs(function: FunctionSpec) -> int | None:
    """N_out when syntax is sure: every forward ``return`` is a tuple literal of one
    length, or every one is single arithmetic (which can't build a tuple)."""
    forward = function.method("forward")
    if forward is None or not forward.returns:
        return None
    if all(r.shape == "tuple" and r.elements is not None for r in forward.returns):
        counts = {len(r.elements) for r in forward.returns if r.elements is not None}
        return counts.pop() if len(counts) == 1 else None
    if forward.node is None:
        return None
    nodes = [ret.value for ret in return_statements(forward.node)]
    if len(nodes) != len(forward.returns):
        return None
    for node, ret in zip(nodes, forward.returns):
        is_tensor = ret.value is not None and ret.value.kind is Kind.TENSOR
        if not _is_single(node, is_tensor):
            return None
    return 1


def _is_single(node: cst.BaseExpression | None, is_tensor: bool) -> bool:
    """Arithmetic that gives one value.  ``+``, ``*`` and ``%`` also build tuples and
    strings, so they count only with an operand known to be a tensor."""
    if isinstance(node, cst.UnaryOperation):
        return not isinstance(node.operator, cst.Not)
    if not isinstance(node, cst.BinaryOperation):
        return False
    return is_tensor or not isinstance(node.operator, (cst.Add, cst.Multiply, cst.Modulo))
