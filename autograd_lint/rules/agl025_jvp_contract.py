"""AGL025: the jvp (forward-mode AD) contract."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.semantic import Sink
from autograd_lint.rules._common import argument_range, plural
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import FunctionSpec, MethodSpec


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
        if _hands_out(saver, saver.ctx_name):
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
        if not forward.calls("mark_dirty") or not (ctx.own(jvp) or ctx.own(forward)):
            return
        model, jvp_model = forward.semantic, jvp.semantic
        if model is None or jvp_model is None or jvp.has_var_positional:
            return
        index_of = {model.params[p.name]: i for i, p in enumerate(inputs)}
        tangents = jvp.positional[1:]
        for mark in model.flows_to(Sink.CTX_API, "mark_dirty"):
            if len(mark.origins) != 1:
                continue
            (param,) = mark.origins
            if param not in index_of or not isinstance(mark.expr, cst.Name) or mark.expr.value != param.name:
                continue  # marked through a rebinding or a view: not mapped back to an input
            index = index_of[param]
            if index >= len(tangents):
                continue  # an arity problem, reported by (a)
            tangent = jvp_model.params[tangents[index].name]
            handed = [f for f in jvp_model.flows_of(tangent) if f.sink is Sink.ARGUMENT]
            if handed or jvp_model.writes_to(tangent):
                continue  # written in place, or handed to a helper that may write it
            yield Report(
                jvp.position if ctx.own(jvp) else forward.calls("mark_dirty")[0].position,
                f"{function.name}.forward marks input `{param.name}` dirty, but jvp does not "
                f"modify its tangent `{tangent.name}` in place",
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
        # More tangents than forward has outputs (forward returns one tensor through a name).
        Invalid(
            """
            import torch

            class Sin(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    y = torch.sin(x)
                    return y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.save_for_forward(x)

                @staticmethod
                def jvp(ctx, tangent):
                    (x,) = ctx.saved_tensors
                    return tangent * torch.cos(x), tangent
            """,
            line=17,
            message="Sin.jvp returns 2 tangents, but forward returns 1 output",
        ),
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
        # More tangents than inputs: torch passes one per input, so the second is missing.
        Invalid(
            """
            import torch

            class Neg(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return -x

                @staticmethod
                def jvp(ctx, gx, gy):
                    return -gx
            """,
            line=9,
            message="Neg.jvp takes 2 tangents after ctx, but forward is called with 1 input",
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


def _hands_out(method: MethodSpec, name: str | None) -> bool:
    """Whether ``method`` passes parameter ``name`` to a call or uses it in a nested scope
    (so that code out of sight may act on it); True when that can't be told."""
    model = method.semantic
    if model is None or name is None or name not in model.params:
        return True
    return bool(model.nested_uses.get(name)) or any(
        f.sink is Sink.ARGUMENT for f in model.flows_of(model.params[name])
    )


def _certain_outputs(function: FunctionSpec) -> int | None:
    """N_out when syntax is sure: every forward ``return`` is a tuple literal of one
    length, or every one is single arithmetic (which can't build a tuple)."""
    forward = function.method("forward")
    if forward is None or not forward.returns:
        return None
    if all(r.shape == "tuple" and r.elements is not None for r in forward.returns):
        counts = {len(r.elements) for r in forward.returns if r.elements is not None}
        return counts.pop() if len(counts) == 1 else None
    if all(r.shape != "tuple" and r.value is not None and r.value.kind.is_tensor for r in forward.returns):
        return 1
    return None
