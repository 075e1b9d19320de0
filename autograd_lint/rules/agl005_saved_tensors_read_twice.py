"""AGL005: ``ctx.saved_tensors`` read more than once per backward call."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import flow
from autograd_lint.model.exprs import SAVED_ATTRIBUTES, dotted_name
from autograd_lint.rules._common import repeated_on_one_path
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import Kind, MethodSpec

ATTRIBUTE = "clear_saved_tensors_on_access"


def saved_tensor_reads(method: MethodSpec) -> list[cst.Attribute]:
    """The loads of ``<ctx>.saved_tensors``/``saved_variables`` in ``method``'s body (the
    semantic model's attribute loads), in the order the body runs them."""
    assert method.semantic is not None and method.ctx_name is not None
    return method.semantic.attribute_loads(method.ctx_name, SAVED_ATTRIBUTES)


class SavedTensorsReadTwice(Rule):
    """Checks that backward and vjp read ``ctx.saved_tensors`` (or the deprecated
    ``saved_variables``) at most once on any path through the method: two reads on
    one path, or one inside a loop or comprehension body, are reported (reads in
    exclusive ``if``/``else`` arms are fine; a call handing ctx to a function or
    static method of the same module counts as the reads that helper makes,
    :mod:`autograd_lint.model.helpers`; jvp is not checked: there a second read neither fails under
    checkpointing nor with the attribute below, bench/recreate/saved_tensors_jvp.py).
    The finding is certain when the class sets
    ``clear_saved_tensors_on_access = True``.  Also reports that attribute when its
    value is a literal other than ``True``/``False``."""

    code = "AGL005"
    title = "`ctx.saved_tensors` read more than once per backward call"
    severity = Severity.WARNING
    why = (
        "Under `torch.utils.checkpoint(..., use_reentrant=False)` the second read raises "
        "`torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Unpack is being "
        "triggered for a tensor that was already unpacked once. If you are calling "
        "ctx.saved_tensors in backward, make sure to do so only once. ...`. With "
        "`clear_saved_tensors_on_access = True` it always raises `RuntimeError: saved_tensors "
        "can only be accessed once when clear_saved_tensors_on_access=True is set on the "
        "autograd.Function. ...`. A non-bool value of that attribute raises `RuntimeError: "
        "clear_saved_tensors_on_access must be a bool, got int`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        value = function.class_attributes.get(ATTRIBUTE)
        if (
            value is not None
            and value.position is not None
            and value.kind in (Kind.NON_TENSOR, Kind.NONE)
            and value.text not in ("True", "False")
        ):
            yield Report(
                value.position,
                f"{function.name}.{ATTRIBUTE} is {value.text}, but PyTorch requires a bool",
                Severity.ERROR,  # raises at the first backward
            )
        clears = function.attribute_is_true(ATTRIBUTE)
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            # A classmethod's ctx is its second parameter (ctx_name follows cls).
            if method is None or method.node is None or method.ctx_name is None:
                continue
            semantic = method.semantic
            if ctx.unit(method) is None or semantic is None:
                continue
            # A load inside a comprehension's element runs once per item: it counts twice.
            # A call handing ctx to a same-module helper counts as the helper's reads.
            weights = {id(node): 2 if semantic.per_item(node) else 1 for node in saved_tensor_reads(method)}
            helpers = {id(call): (call, used) for call, used in ctx.analysis.helper_saved_reads(method)}
            weights.update({key: used.most for key, (_, used) in helpers.items()})
            nodes = sorted(
                [*saved_tensor_reads(method), *(call for call, _ in helpers.values())],
                key=lambda node: (ctx.position(method, node).line, ctx.position(method, node).column),
            )
            body = flow.method_body(method.node)
            found = repeated_on_one_path(body, nodes, lambda node: weights[id(node)])
            if found is None:
                continue
            second, where = found
            if id(second) in helpers:
                call, used = helpers[id(second)]
                attribute = "saved_tensors"
                # The call's weight is the helper's reads, not a loop: say where it repeats.
                looped = flow.most_on_one_path(body, lambda node: 1 if node is second else 0) > 1
                total = flow.most_on_one_path(body, lambda node: weights.get(id(node), 0))
                where = "inside a loop" if looped else f"{total} times on one path"
                where += f" (through `{dotted_name(call.func)}`, which reads it on line {used.line})"
            else:
                attribute = second.attr.value  # type: ignore[attr-defined]
            consequence = (
                "this always fails because the class sets clear_saved_tensors_on_access = True"
                if clears
                else "this fails under non-reentrant activation checkpointing"
            )
            yield Report(
                ctx.position(method, second),
                f"{function.name}.{name} reads ctx.{attribute} {where}; {consequence}: read it "
                "once into a local and reuse that",
                Severity.ERROR if clears else Severity.WARNING,  # raises always / only when checkpointed
            )

    VALID = [
        # jvp may read the forward-saved tensors twice: torch 2.13 runs it under
        # non-reentrant checkpointing (pykeops GenredAutograd.jvp; bench/recreate/saved_tensors_jvp.py).
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_forward(x, y)
                    return y

                @staticmethod
                def jvp(ctx, tangent):
                    args = ctx.saved_tensors[:-1]
                    y = ctx.saved_tensors[-1]
                    return tangent * y
            """
        ),
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """
        ),
        # Trap 14: read once into a local, then unpacked and reused, also in a loop.
        Valid(
            """
            import torch

            class Sum(torch.autograd.Function):
                clear_saved_tensors_on_access = True

                @staticmethod
                def forward(ctx, *xs):
                    ctx.save_for_backward(*xs)
                    return sum(xs)

                @staticmethod
                def backward(ctx, grad):
                    saved = ctx.saved_tensors
                    first, *rest = saved
                    grads = []
                    for t in saved:
                        grads.append(grad.expand_as(t))
                    return tuple(grads)
            """
        ),
        # Trap 14: reads in exclusive if/else arms, and after an early return.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    ctx.fast = True
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    if ctx.fast:
                        x, w = ctx.saved_tensors
                        return grad * w, None
                    elif grad is None:
                        return None, None
                    else:
                        x, w = ctx.saved_tensors
                    return grad * w, grad * x
            """
        ),
        # ctx handed to a helper that reads once, by a backward that does not read itself;
        # a helper defined twice (which one runs can't be told) is not followed.
        Valid(
            """
            import torch

            def _grads(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x

            def _outer(ctx, g):
                return _grads(ctx, g)

            def _twice(ctx, g):
                return g

            def _twice(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x

            class Once(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, g):
                    return _outer(ctx, g) * 2

            class Unknown(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    return _twice(ctx, g) + g * x
            """
        ),
    ]
    INVALID = [
        # A classmethod backward: ctx is its second parameter (torch 2.13 under
        # checkpoint(use_reentrant=False): `CheckpointError: ... already unpacked once`).
        Invalid(
            """
            import torch

            class Twice(torch.autograd.Function):
                @classmethod
                def forward(cls, ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @classmethod
                def backward(cls, ctx, grad):
                    (x,) = ctx.saved_tensors
                    (y,) = ctx.saved_tensors
                    return grad * x + grad * y
            """,
            line=12,
            message="Twice.backward reads ctx.saved_tensors 2 times on one path",
        ),
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a = ctx.saved_tensors[0]
                    b = ctx.saved_tensors[1]
                    return grad * b, grad * a
            """,
            line=12,
            message="Mul.backward reads ctx.saved_tensors 2 times on one path",
        ),
        Invalid(
            """
            import torch

            class Stack(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a + b

                @staticmethod
                def backward(ctx, grad):
                    grads = []
                    for i in range(2):
                        grads.append(grad * ctx.saved_tensors[i])
                    return tuple(grads)
            """,
            line=13,
            message="reads ctx.saved_tensors inside a loop",
        ),
        Invalid(
            """
            import torch

            class Once(torch.autograd.Function):
                clear_saved_tensors_on_access = True

                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.exp()

                @staticmethod
                def backward(ctx, grad):
                    if grad is None:
                        return None
                    n = len(ctx.saved_tensors)
                    (y,) = ctx.saved_tensors
                    return grad * y
            """,
            line=16,
            message="always fails because the class sets clear_saved_tensors_on_access = True",
        ),
        Invalid(
            """
            import torch

            class Tangent(torch.autograd.Function):
                clear_saved_tensors_on_access = 1

                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_forward(y)
                    return y

                @staticmethod
                def jvp(ctx, tangent):
                    return tangent * ctx.saved_tensors[0]
            """,
            line=4,
            message="Tangent.clear_saved_tensors_on_access is 1, but PyTorch requires a bool",
        ),
        # A comprehension body runs once per item.
        Invalid(
            """
            import torch

            class Many(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    ctx.save_for_backward(x, y)
                    return x * y

                @staticmethod
                def backward(ctx, grad):
                    return tuple(grad * ctx.saved_tensors[i] for i in range(2))
            """,
            line=11,
            message="inside a loop",
        ),
        # Was VALID (trap 14) while helpers receiving ctx were not followed: the helper's
        # read and then the comprehension's (its outermost iterable, evaluated once).
        Invalid(
            """
            import torch

            def _grads(ctx, grad):
                (w,) = ctx.saved_tensors
                return grad * w

            class Apply(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(w)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    gx = _grads(ctx, grad)
                    shapes = [t.shape for t in ctx.saved_tensors]
                    return gx, None
            """,
            line=16,
            message="Apply.backward reads ctx.saved_tensors 2 times on one path",
        ),
        # ctx handed to a static method of another class of the module that reads
        # saved_tensors twice (pykeops GenredAutograd; bench/recreate/saved_tensors_helper.py).
        Invalid(
            """
            import torch

            class Base:
                @staticmethod
                def _backward(ctx, g):
                    (x,) = ctx.saved_tensors[:-1]
                    result = ctx.saved_tensors[-1]
                    return g * 2 * x

            class Genred(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    result = x * x
                    ctx.save_for_backward(x, result)
                    return result

                @staticmethod
                def backward(ctx, g):
                    return Base._backward(ctx, g)
            """,
            line=19,
            message=(
                "Genred.backward reads ctx.saved_tensors 2 times on one path (through "
                "`Base._backward`, which reads it on line 6)"
            ),
        ),
        # A helper reached through another helper, after backward's own read.
        Invalid(
            """
            import torch

            def _grads(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x

            def _outer(ctx, g):
                return _grads(ctx, g)

            class Twice(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    return _outer(ctx, g) + g * x
            """,
            line=19,
            message="Twice.backward reads ctx.saved_tensors 2 times on one path (through `_outer`, which reads it on line 4)",
        ),
    ]
