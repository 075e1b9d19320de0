"""AGL037: a ``Fn.apply(...)`` call of the module passes fewer arguments than forward
requires, or more than it takes."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.model.spec import Position
from autograd_lint.model.usage import apply_calls
from autograd_lint.rules._common import plural
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)

# Decorators that keep forward's own signature as what apply binds against.
_TRANSPARENT = frozenset(
    {
        "builtins.staticmethod",
        "builtins.classmethod",
        "torch.cuda.amp.custom_fwd",
        "torch.amp.custom_fwd",
        "torch.cuda.amp.autocast_mode.custom_fwd",
        "torch.amp.autocast_mode.custom_fwd",
    }
)


class ApplyArgumentCount(Rule):
    """Reports a ``Name.apply(...)`` call in the Function's own module, with positional
    arguments only (no ``*``/``**``), that passes fewer arguments than forward has
    inputs without a default, or more than forward has inputs: the call raises
    ``TypeError`` before forward runs.  Silent where the class name means more than one
    Function of the module or is bound anywhere else in it (an import, an
    assignment, a parameter of that name), forward takes ``*args`` or keyword-only parameters without
    a default, forward is not written in this class, or a decorator other than
    ``staticmethod``/``classmethod``/``custom_fwd`` may change its signature."""

    code = "AGL037"
    title = "`apply` passes a number of arguments forward does not accept"
    severity = Severity.ERROR
    why = (
        "`apply` binds its arguments to forward's inputs. Combined style, one too few: "
        "`TypeError: Ring.forward() missing 1 required positional argument: 'attn_processor'`; "
        "one too many: `TypeError: Ring.forward() takes 4 positional arguments but 5 were given`; "
        "setup_context style, one too few: `TypeError: missing a required argument: 'b'` "
        "(torch 2.13, bench/recreate/apply_argument_count.py). Seen in long-context-attention, "
        "whose two wrappers call `RingFlashInferAttnFunc.apply` with 13 arguments for 14 inputs. "
        "On by default: 4 findings on the 56 trees of docs/accuracy.md (issue 23, fifth session), all true."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        forward = function.methods.get("forward")
        inputs = function.forward_inputs
        if forward is None or inputs is None or not ctx.own(forward) or forward.node is None:
            return
        if any(d.qualified_name not in _TRANSPARENT for d in forward.decorators):
            return
        if any(p.kind.name == "KEYWORD_ONLY" and p.default is None for p in forward.params):
            return
        if sum(1 for f in ctx.analysis.functions if f.name == function.name) != 1:
            return
        calls = apply_calls(ctx.analysis.source.text).get(function.name, ())
        if not calls:
            return  # first: the bindings below take a walk of the whole module
        # Bound once anywhere in the module (its class statement): every `name.apply` means this class.
        bindings = ctx.analysis.bindings_anywhere
        if bindings is None or bindings.get(function.name, 0) != 1:
            return
        required = [p.name for p in inputs if p.default is None]
        for call in calls:
            where = Position(call.line, call.column)
            passed = f"{function.name}.apply on line {call.line} passes {plural(call.arguments, 'argument')}"
            if call.arguments < len(required):
                missing = required[call.arguments :]
                yield Report(
                    where,
                    f"{passed}, but forward requires {plural(len(required), 'input')} (`{missing[0]}` is not "
                    f"passed): the call raises `TypeError` (missing required argument `{missing[0]}`)",
                )
            elif call.arguments > len(inputs):
                yield Report(
                    where,
                    f"{passed}, but forward takes {plural(len(inputs), 'input')}: the call raises "
                    "`TypeError` (too many positional arguments)",
                )

    VALID = [
        # Calls of another module are not read here (AGL001 counts them across files);
        # a keyword argument may fill any input.
        Valid(
            """
            import torch
            from .ops import Ring as Other

            class Ring(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, group):
                    return q * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2, None

            def ring(q, group):
                return Other.apply(q), Ring.apply(q, group=group)
            """
        ),
        # A parameter of the same name may hold another Function: the call is not read.
        Valid(
            """
            import torch

            class Ring(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, group):
                    return q * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2, None

            def run(Ring, q):
                return Ring.apply(q)
            """
        ),
        # A defaulted input may be left out; every input passed.
        Valid(
            """
            import torch

            class Ring(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, group, attn_processor=None):
                    return q * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2, None, None

            def ring(q, group):
                return Ring.apply(q, group), Ring.apply(q, group, None)
            """
        ),
        # `*args` in the call or in forward: the count can't be told; a decorator that may
        # wrap forward's signature; a name that means two Functions of the module.
        Valid(
            """
            import torch

            class Packed(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *tensors):
                    return tensors[0] * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2

            class Wrapped(torch.autograd.Function):
                @staticmethod
                @some_wrapper
                def forward(ctx, q, k):
                    return q * k

                @staticmethod
                def backward(ctx, g):
                    return g, g

            def call(args, q):
                return Packed.apply(q, q, q), Wrapped.apply(*args), Wrapped.apply(q)
            """
        ),
    ]

    INVALID = [
        # long-context-attention RingFlashInferAttnFunc's qkvpacked wrapper (14 inputs, 13 passed).
        Invalid(
            """
            import torch

            class Ring(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, group, attn_processor):
                    return q * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2, None, None

            def ring_qkvpacked(qkv, group):
                return Ring.apply(qkv[:, 0], group)
            """,
            line=13,
            message=(
                "Ring.apply on line 13 passes 2 arguments, but forward requires 3 inputs (`attn_processor` "
                "is not passed): the call raises `TypeError` (missing required argument `attn_processor`)"
            ),
        ),
        # setup_context style: forward has no ctx; one argument too many.
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(a, b):
                    return a * b

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(*inputs)

                @staticmethod
                def backward(ctx, g):
                    a, b = ctx.saved_tensors
                    return g * b, g * a

            def mul(a, b):
                return Mul.apply(a, b, 1.0)
            """,
            line=18,
            message=(
                "Mul.apply on line 18 passes 3 arguments, but forward takes 2 inputs: the call raises "
                "`TypeError` (too many positional arguments)"
            ),
        ),
        # A classmethod forward: cls first, then ctx; two inputs required, one passed.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @classmethod
                def forward(cls, ctx, x, factor):
                    return x * factor

                @staticmethod
                def backward(ctx, g):
                    return g, None

            def scale(x):
                return Scale.apply(x)
            """,
            line=13,
            message="Scale.apply on line 13 passes 1 argument, but forward requires 2 inputs (`factor` is not passed)",
        ),
    ]
