"""AGL008: forward mutates an input in place without ``ctx.mark_dirty``."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.model.semantic import Binding, MethodModel, Sink
from autograd_lint.model.spec import FunctionSpec, Kind, MethodSpec
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

# Writes that mutate a tensor only when the name is one: on a list or dict
# `x[k] = v` is an item assignment.
_TENSOR_ONLY_WRITES = frozenset({"[...] =", "[...] op="})
# `x.set_(y)` swaps x's storage for y's: a deliberate re-pointing of a placeholder
# (dynamo's TracableCreateParameter, FSDP), never a forgotten mark_dirty; marking
# a leaf that requires grad would even raise.  `clear()` empties a container.
_NOT_DATA_WRITES = frozenset({"set_()", "clear()"})


def _passes_ctx(method: MethodSpec) -> bool:
    """Whether ``method`` hands its ctx to code out of sight (a call, a nested function, an
    alias...), which may call mark_dirty (:meth:`MethodModel.escapes`)."""
    model = method.semantic
    if model is None or method.ctx_name is None:
        return True
    return method.ctx_name not in model.params or model.escapes(method.ctx_name)


def _differentiated(function: FunctionSpec, index: int, model: MethodModel, param: Binding) -> bool:
    """Whether forward returns input ``param`` (or a view of it) or backward gives it a
    gradient: otherwise it is a buffer updated on purpose, and mark_dirty on it would
    itself raise (a dirty tensor must be returned)."""
    if any(f.sink is Sink.RETURN for f in model.flows_of(param)):
        return True
    backward = function.backward_method
    if backward is None:
        return False
    for ret in backward.returns:
        elements = ret.elements if ret.elements is not None else ((ret.value,) if ret.value is not None else ())
        if index < len(elements) and elements[index] is not None and elements[index].kind is not Kind.NONE:
            return True
    return False


class InputMutatedWithoutMarkDirty(Rule):
    """Reports the first in-place write (``x.add_(...)``, ``x[...] = ...``,
    ``x += ...``, ``out=x``, ``torch.<op>_(x)``, a collective such as
    ``dist.all_reduce(x)``, a call ``f(x, ..., inplace=flag)`` (unless the flag is a false
    literal), also through a view or ``.detach()`` of ``x`` (as written, or through a local
    bound to one: ``y = x.detach(); y.sign_()``; not through ``.data``, the deliberate way
    past autograd's version checks), or a call of a function of
    the same module whose body writes that parameter so, as ``_scale_(x, 2)``) to
    each forward input that has not been rebound (``x = x.clone()``) when no
    ``ctx.mark_dirty(...)`` names it.  Item assignment and augmented assignment
    count only on names known to be tensors; a storage swap (``x.set_(y)``) does
    not count.  The rule stays silent when it can't
    tell what is marked: mark_dirty called in setup_context (split style) or with
    something other than input names, or ctx handed to other code (a helper, a
    nested function, an alias)."""

    code = "AGL008"
    title = "forward mutates an input in place without ctx.mark_dirty"
    severity = Severity.WARNING
    why = (
        "Silently wrong gradients: when the caller keeps using the original tensor the "
        "custom backward is skipped for it (`a0.grad` 1.0, correct 2.0); a write that bumps "
        "no version (numpy, an extension) corrupts earlier consumers' gradients (8.0, correct "
        "6.0). With an earlier consumer and a torch op: `RuntimeError: one of the variables "
        "needed for gradient computation has been modified by an inplace operation`. Through "
        "`.detach()` or a view (`mask = x.detach().apply_(f)`, torch 2.13): the caller's `x` holds the "
        "mask afterwards ([-1, 2, -3] became [0, 1, 0]); with `x = w.exp()` (exp keeps its output for "
        "backward) `w.grad` is silently [1, 1, 1], correct exp(w). Through `y = x.detach(); y.sign_()` "
        "the same earlier consumer raises instead (shared version counter). A collective (`dist.all_reduce(x)`) writes its tensor in place too."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        forward = function.method("forward")
        split = function.is_split_style
        if forward is None or not ctx.own(forward) or forward.semantic is None or split is None:
            return
        model = forward.semantic
        inputs = [model.params[p.name] for p in forward.positional[0 if split else 1 :]]
        marked = self._marked(function.method("setup_context") if split else forward, inputs)
        if marked is None:
            return
        reported: set[Binding] = set()
        for write in [*model.inplace_writes, *ctx.analysis.helper_writes(forward)]:
            if len(write.origins) != 1 or write.how in _NOT_DATA_WRITES or write.self_copy:
                continue
            (param,) = write.origins
            if param not in inputs or param in marked or param in reported or param.kind is Kind.NON_TENSOR:
                continue
            if (write.how in _TENSOR_ONLY_WRITES or write.through == "[...]") and not param.kind.is_tensor:
                continue  # on a list or dict, an item of it is written
            if not _differentiated(function, inputs.index(param), model, param):
                continue
            reported.add(param)
            if write.helper is not None:
                yield Report(
                    ctx.position(forward, write.node),
                    f"{function.name}.forward writes its input `{param.name}` in place "
                    f"{write.helper.describe(write.how)} but never calls "
                    f"ctx.mark_dirty({param.name}): later uses of the caller's tensor skip the custom "
                    "backward (silently wrong gradients)",
                )
                continue
            if write.through is not None:
                yield Report(
                    ctx.position(forward, write.node),
                    f"{function.name}.forward writes into its input `{param.name}` through `{write.through}` "
                    f"({write.how}): the caller's tensor is overwritten (they share storage), so its later "
                    f"uses see the new values and a backward that saved it raises or silently uses them; "
                    f"write to a copy (`.clone()`), or ctx.mark_dirty({param.name}) and return it",
                )
                continue
            yield Report(
                ctx.position(forward, write.node),
                f"{function.name}.forward writes its input `{param.name}` in place ({write.how}) "
                f"but never calls ctx.mark_dirty({param.name}): later uses of the caller's tensor "
                "skip the custom backward (silently wrong gradients)",
            )

    @staticmethod
    def _marked(method: MethodSpec | None, inputs: list[Binding]) -> set[Binding] | None:
        """The inputs ``method`` passes to mark_dirty; ``None`` when that can't be told."""
        if method is None or method.semantic is None or _passes_ctx(method):
            return None
        if method.name == "setup_context" and method.calls("mark_dirty"):
            return None  # setup_context's names differ from forward's
        marked: set[Binding] = set()
        for call in method.calls("mark_dirty"):
            if call.has_starred:
                return None
        for flow in method.semantic.flows_to(Sink.CTX_API, "mark_dirty"):
            if not flow.origins or not flow.origins <= set(inputs):
                return None  # not mapped to an input
            marked |= flow.origins
        return marked

    VALID = [
        # A helper that copies its parameter before writing, and one imported from another
        # module (what it does can't be read here).
        Valid(
            """
            import torch
            from .ops import scale_

            def _scaled(t, k):
                t = t * 1
                t.mul_(k)
                return t

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    return _scaled(x, 2) + scale_(y, 2)

                @staticmethod
                def backward(ctx, g):
                    return g * 2, g * 2
            """
        ),
        # A Function defined in a function: the name it calls may be a local of the
        # enclosing function (here one that copies), not the module's helper.
        Valid(
            """
            import torch

            def _scale_(t, k):
                t.mul_(k)
                return t

            def make(k):
                def _scale_(t, k):
                    return t * k

                class Scale(torch.autograd.Function):
                    @staticmethod
                    def forward(ctx, x):
                        return _scale_(x, k)

                    @staticmethod
                    def backward(ctx, g):
                        return g * k

                return Scale
            """
        ),
        # `inplace=False` writes nothing; an `inplace=True` call on a clone writes the clone.
        Valid(
            """
            import torch
            import torch.nn.functional as F

            class Act(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = F.relu(x, inplace=False)
                    z = F.relu(x.clone(), inplace=True)
                    return y + z

                @staticmethod
                def backward(ctx, g):
                    return g
            """
        ),
        Valid(
            """
            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.mark_dirty(x)
                    x.add_(1)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """
        ),
        # Trap 12: rebinding to a clone, buffers made in forward, requires_grad_().
        Valid(
            """
            import torch

            class Relu(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    x = x.clone()
                    x.clamp_(min=0)
                    out = torch.empty_like(y)
                    out.copy_(y)
                    out[out < 0] = 0
                    y.detach().requires_grad_()
                    return x, out

                @staticmethod
                def backward(ctx, gx, gy):
                    return gx, gy
            """
        ),
        # `+=` and item assignment on inputs not known to be tensors (a count, a dict).
        Valid(
            """
            import torch

            class Counted(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, step, cache: dict):
                    step += 1
                    cache["x"] = x
                    return x * step

                @staticmethod
                def backward(ctx, grad):
                    return grad, None, None
            """
        ),
        # Trap 5: split style marks the input in setup_context, under another name.
        Valid(
            """
            import torch

            class Exp_(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    x.exp_()
                    return x

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.mark_dirty(x)
                    ctx.save_for_backward(output)

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y
            """
        ),
        # mark_dirty given an alias of the input: which input it is can't be told.
        Valid(
            """
            import torch

            class Scale_(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out = x.mul_(2)
                    ctx.mark_dirty(out)
                    return out

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """
        ),
        # A storage swap on a sacrificial placeholder (dynamo's TracableCreateParameter).
        Valid(
            """
            import torch

            class CreateParameter(torch.autograd.Function):
                @staticmethod
                def forward(ctx, tensor, placeholder):
                    return placeholder.set_(tensor.detach())

                @staticmethod
                def backward(ctx, grad):
                    return None, grad
            """
        ),
        # A self-copy changes nothing; a running-statistics buffer that is neither
        # returned nor given a gradient is updated on purpose (mark_dirty on it would raise).
        Valid(
            """
            import torch

            class Norm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, running_mean: torch.Tensor, momentum: float):
                    x.copy_(x)
                    mean = x.mean(0)
                    running_mean.mul_(1 - momentum).add_(mean * momentum)
                    return x - mean

                @staticmethod
                def backward(ctx, grad):
                    return grad, None, None
            """
        ),
    ]
    INVALID = [
        # A helper of the module writes its parameter in place (bench/recreate/helper_inplace.py:
        # the caller's residual `x + F(x)` is [4, 4, 4] where [3, 3, 3] is right, a.grad [3, 6, 9]).
        Invalid(
            """
            import torch

            def _scale_(t, k):
                t.mul_(k)
                return t

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return _scale_(x, 2)

                @staticmethod
                def backward(ctx, g):
                    return g * 2
            """,
            line=10,
            message="Double.forward writes its input `x` in place through `_scale_` (mul_() on line 4) but never "
            "calls ctx.mark_dirty(x)",
        ),
        # `f(x, ..., inplace=flag)` writes x when the flag holds (bench/recreate/inplace_keyword.py:
        # the caller's residual `x + F(x)` gets a.grad [3, 6, 9] where [4, 8, 12] is right).
        Invalid(
            """
            import torch
            from .kernels import apply_rotary

            class Rotary(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, cos, inplace=False):
                    out = apply_rotary(x, cos, inplace=inplace)
                    ctx.save_for_backward(cos)
                    return out if not inplace else x

                @staticmethod
                def backward(ctx, g):
                    (cos,) = ctx.saved_tensors
                    return g * cos, None, None
            """,
            line=7,
            message="Rotary.forward writes its input `x` in place (apply_rotary(..., inplace=inplace))",
        ),
        # Through `.detach()`: the mask is written into the caller's input.
        Invalid(
            """
            import torch

            class Mask(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    mask = x.detach().apply_(lambda v: v > 0)
                    ctx.save_for_backward(mask)
                    return x * mask

                @staticmethod
                def backward(ctx, grad):
                    (mask,) = ctx.saved_tensors
                    return grad * mask
            """,
            line=6,
            message="Mask.forward writes into its input `x` through `.detach()` (apply_()): the caller's tensor "
            "is overwritten",
        ),
        # Through a local bound to `.detach()`.
        Invalid(
            """
            import torch

            class Sign(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.detach()
                    y.sign_()
                    return y.clone()

                @staticmethod
                def backward(ctx, g):
                    return g
            """,
            line=7,
            message="Sign.forward writes into its input `x` through `.detach()` (sign_()): the caller's tensor "
            "is overwritten (they share storage), so its later uses see the new values and a backward that "
            "saved it raises or silently uses them",
        ),
        # A collective writes its tensor in place.
        Invalid(
            """
            import torch
            import torch.distributed as dist

            class Reduce(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    dist.all_reduce(x)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=7,
            message="Reduce.forward writes its input `x` in place (torch.distributed.all_reduce())",
        ),
        # `x += bias` on a tensor input.
        Invalid(
            """
            import torch

            class AddBias(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, bias: torch.Tensor):
                    x += bias
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad.sum(0)
            """,
            line=6,
            message="writes its input `x` in place (AddAssign) but never calls ctx.mark_dirty(x)",
        ),
        # An input annotated Optional: not known to be a tensor, and written as one all the same
        # (the unannotated `x.add_(1)` is in the next example).
        Invalid(
            """
            from typing import Optional

            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: Optional[torch.Tensor]):
                    x.add_(1)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=8,
            message="AddOne.forward writes its input `x` in place (add_()) but never calls ctx.mark_dirty(x)",
        ),
        # A write that is no data write (a list emptied) comes first: the writes after it are still read.
        Invalid(
            """
            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, seen: list):
                    seen.clear()
                    x.add_(1)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad, None
            """,
            line=7,
            message="AddOne.forward writes its input `x` in place (add_()) but never calls ctx.mark_dirty(x)",
        ),
        Invalid(
            """
            import torch

            class Update(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    ctx.mark_dirty(x)
                    x.add_(y)
                    flat = y.view(-1)
                    flat[0] = 0
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad
            """,
            line=9,
            message="input `y` in place ([...] =)",
        ),
        Invalid(
            """
            import torch

            class Accumulate(torch.autograd.Function):
                @staticmethod
                def forward(acc: torch.Tensor, x):
                    acc += x
                    return acc.clone()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad
            """,
            line=6,
            message="`acc` in place (AddAssign)",
        ),
        Invalid(
            """
            import torch

            class Sigmoid(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    torch.sigmoid(x, out=x)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=6,
            message="(out=)",
        ),
    ]
