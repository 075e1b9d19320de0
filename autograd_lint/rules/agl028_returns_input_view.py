"""AGL028: forward returns an input unchanged, or a view of an input."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.exprs import TENSOR_ONLY_METHODS
from autograd_lint.model.semantic import Binding
from autograd_lint.model.spec import Kind, MethodSpec
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

# Methods that return a view of their receiver.  `detach` is left out: its result
# is not treated as a view of the input (an in-place change of it raised nothing
# in torch 2.13).  `reshape`/`flatten` give a view whenever the input's strides allow.
VIEW_METHODS = frozenset(
    """
    view view_as reshape t transpose permute expand expand_as narrow squeeze unsqueeze select
    flatten unflatten as_strided split chunk unbind movedim swapaxes diagonal unfold
    """.split()
)
# View methods that numpy arrays, lists or strings do not have, so the receiver is a tensor.
_TENSOR_ONLY_VIEWS = TENSOR_ONLY_METHODS | frozenset(
    "t permute unflatten as_strided unbind chunk movedim unfold".split()
)
VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH"})


def _is_basic_index(node: cst.Subscript) -> bool:
    """``x[...]`` with slices, integer literals, ``None`` and ``...`` only: a view, not a copy."""
    for element in node.slice:
        piece = element.slice
        if isinstance(piece, cst.Slice):
            continue
        value = piece.value
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
            value = value.expression
        if isinstance(value, cst.Integer) or isinstance(value, cst.Ellipsis):
            continue
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        return False
    return True


def _view_of(node: cst.BaseExpression) -> tuple[cst.Name, str, bool] | None:
    """(the name, how, receiver certainly a tensor) when ``node`` is a view chain on a name."""
    how: str | None = None
    certain = False
    while True:
        if isinstance(node, cst.Name):
            return node, how or "unchanged", certain
        if isinstance(node, cst.Subscript) and _is_basic_index(node):
            how = how or "slice"
            node = node.value
        elif isinstance(node, cst.Attribute) and node.attr.value in VIEW_ATTRIBUTES:
            how = how or f".{node.attr.value}"
            node = node.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in VIEW_METHODS
        ):
            method = node.func.attr.value
            how = how or f".{method}()"
            certain = certain or method in _TENSOR_ONLY_VIEWS
            node = node.func.value
        else:
            return None


def _is_tensor(param: Binding, certain_receiver: bool) -> bool:
    """The input is a tensor: never when declared otherwise, else on some evidence."""
    return param.kind.is_tensor or (certain_receiver and param.kind is Kind.UNKNOWN)


def _is_identity(forward: MethodSpec) -> bool:
    """Whether forward only records things on ctx and returns: an identity by design,
    whose backward does the work (Megatron's copy-to-region, gradient hooks and scaling)."""
    node = forward.node
    if node is None or not isinstance(node.body, cst.IndentedBlock):
        return False
    ctx_name = forward.ctx_name
    for statement in node.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if isinstance(small, (cst.Return, cst.Pass)):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                continue
            if isinstance(small, cst.Assign) and all(
                isinstance(t.target, cst.Attribute) and _is_name(t.target.value, ctx_name) for t in small.targets
            ):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                if isinstance(func, cst.Attribute) and _is_name(func.value, ctx_name):
                    continue
            return False
    return True


def _is_name(node: cst.BaseExpression, name: str | None) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _is_conditional(forward: MethodSpec, ret: cst.Return) -> bool:
    """Whether ``ret`` sits in a branch (``if x.shape == shape: return x``): a fast path
    that hands the input back when there is nothing to do."""
    node = forward.node
    if node is None or not isinstance(node.body, cst.IndentedBlock):
        return True
    for statement in node.body.body:
        if isinstance(statement, cst.SimpleStatementLine) and any(small is ret for small in statement.body):
            return False
    return True


class ReturnsInputView(Rule):
    """Checks that forward does not return one of its inputs unchanged, or a view of
    one (a basic slice, ``.view``, ``.reshape``, ``.t``, ``.T``, ``.transpose``,
    ``.expand``, ``.narrow``, ``.squeeze``, ``.split`` ...).  Autograd treats such an
    output as a view created inside the Function, so changing it in place later
    raises.  Inputs passed to ``ctx.mark_dirty`` are skipped (returning them is
    required), and so are names that forward rebinds and inputs that may not be
    tensors (a non-tensor annotation or default, or a slice of an input that is
    not known to be a tensor).  An input returned unchanged is left alone when
    that is the design: an identity forward that only records things on ctx
    (its backward does the work), a return inside a branch (a fast path when
    there is nothing to do), or an input forward writes in place (AGL008's
    business: it wants mark_dirty, not a clone).

    Off by default: the failure it predicts is loud (the error names the fix) and
    happens only if a caller writes the output in place; on 23 real trees all 10 of
    its findings were pass-through designs (collective regions, zero-copy views,
    in-place kernels returning their buffer) that no caller writes
    (docs/accuracy.md).  Select it where outputs are written in place."""

    code = "AGL028"
    title = "forward returns an input unchanged, or a view of an input"
    severity = Severity.WARNING
    enabled_by_default = False
    why = (
        "Works until someone modifies the output in place, then: `RuntimeError: Output 0 of F is "
        "a view and is being modified inplace. This view was created inside a custom Function (or "
        "because an input was returned as-is) and the autograd logic to handle view+inplace would "
        "override the custom backward associated with the custom Function, leading to incorrect "
        "gradients. This behavior is forbidden. You can fix this by cloning the output of the "
        "custom Function.` With several outputs the error names the output's index (torch 2.13, "
        "the second output a view of the input: `RuntimeError: Output 1 of PassSecond is a view and is "
        "being modified inplace. This view is the output of a function that returns multiple views.`)."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        forward = function.method("forward")
        inputs = function.forward_inputs
        if forward is None or inputs is None or not ctx.own(forward) or forward.semantic is None:
            return
        unit = ctx.unit(forward)
        model = forward.semantic
        kept = self._kept_as_is(ctx)
        if unit is None or kept is None:
            return
        candidates = {model.params[p.name] for p in inputs} - {model.params.get(n) for n in kept}
        # An input written in place and returned wants mark_dirty (AGL008), not a clone.
        candidates -= {origin for write in model.inplace_writes for origin in write.origins}
        identity = _is_identity(forward)
        for ret in model.returns:
            if ret.value is None:
                continue
            values = list(ret.elements) if isinstance(ret.value, cst.Tuple) and ret.elements else [ret.value]
            for index, value in enumerate(values):
                found = _view_of(value)
                if found is None:
                    continue
                name, how, certain = found
                reaching = model.reaching(name)
                if len(reaching) != 1:
                    continue
                (param,) = reaching
                if param not in candidates or not _is_tensor(param, certain):
                    continue
                if how == "unchanged" and (identity or _is_conditional(forward, ret.node)):
                    continue  # an identity by design, or a fast path with nothing to do
                what = (
                    f"input `{param.name}` unchanged"
                    if how == "unchanged"
                    else f"`{unit.code(value)}`, a view of input `{param.name}`"
                )
                where = f" as output {index}" if len(values) > 1 else ""
                yield Report(
                    ctx.position(forward, ret.node),
                    f"{function.name}.forward returns {what}{where}: changing that output in place "
                    f"raises `Output {index} of {function.name} is a view and is being modified inplace` "
                    "(return a clone, or mark_dirty an input forward modifies)",
                )

    @staticmethod
    def _kept_as_is(ctx: FunctionContext) -> set[str] | None:
        """Inputs forward may return as they are: passed to mark_dirty (required) or to
        mark_non_differentiable (no gradient, so no view+inplace check).  None when such
        a call can't be mapped back to forward's names."""
        forward = ctx.function.method("forward")
        setup = ctx.function.method("setup_context")
        names: set[str] = set()
        for method in (forward, setup):
            if method is None:
                continue
            for api in ("mark_dirty", "mark_non_differentiable"):
                for call in method.calls(api):
                    if call.has_starred:
                        return None
                    if method is setup and call.args:
                        return None  # marks inputs through `inputs`, which we don't map back
                    names.update(a.name for a in call.args if a.name is not None)
        return names

    VALID = [
        # An identity by design (backward all-reduces), and a fast path in a branch.
        Valid(
            """
            import torch
            import torch.distributed as dist

            class CopyToRegion(torch.autograd.Function):
                @staticmethod
                def forward(ctx, input_, group):
                    ctx.group = group
                    return input_

                @staticmethod
                def backward(ctx, grad):
                    dist.all_reduce(grad, group=ctx.group)
                    return grad, None

            class ToDense(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor):
                    if x.layout == torch.strided:
                        return x
                    return x.to_dense()

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """
        ),
        # An input passed to mark_non_differentiable gets no gradient: returning it is fine.
        Valid(
            """
            import torch

            class Sort(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, index: torch.Tensor):
                    ctx.mark_non_differentiable(index)
                    return x.gather(0, index), index

                @staticmethod
                def backward(ctx, grad, grad_index):
                    return grad, None
            """
        ),
        # A name rebound on every path is no longer the input.
        Valid(
            """
            import torch

            class Pad(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, n: int):
                    for _ in range(n):
                        x = torch.cat([x, x[-1:]])
                    x = x.contiguous().clone()
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad, None
            """
        ),
        Valid(
            """
            import torch

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """
        ),
        # Trap 12: an input modified in place and marked dirty must be returned.
        Valid(
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
            """
        ),
        # Trap 12: a rebound name is a fresh tensor, not the input.
        Valid(
            """
            import torch

            class Flat(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.shape = x.shape
                    x = x.clone()
                    return x.view(-1)

                @staticmethod
                def backward(ctx, grad):
                    return grad.view(ctx.shape)
            """
        ),
        # Indexing with a tensor or a name copies; a non-tensor input returned as-is is not a view.
        Valid(
            """
            import torch

            class Pick(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, index, scale: float):
                    ctx.save_for_backward(index)
                    return x[index], scale

                @staticmethod
                def backward(ctx, grad, _):
                    return None, None, None
            """
        ),
        # Trap 5: forward defined in a base class is reported there, once.
        Valid(
            """
            from mylib import IdentityBase

            class Identity(IdentityBase):
                @staticmethod
                def backward(ctx, grad):
                    return grad
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class GradReverse(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, alpha):
                    ctx.alpha = alpha
                    return x.view_as(x)

                @staticmethod
                def backward(ctx, grad):
                    return -ctx.alpha * grad, None
            """,
            line=7,
            message="GradReverse.forward returns `x.view_as(x)`, a view of input `x`",
        ),
        Invalid(
            """
            import torch

            class Straight(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    mask = x > 0
                    ctx.save_for_backward(mask)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    (mask,) = ctx.saved_tensors
                    return grad * mask
            """,
            line=8,
            message="Straight.forward returns input `x` unchanged",
        ),
        # A call on another object than ctx is work, not bookkeeping: no identity by design.
        Invalid(
            """
            import logging

            import torch

            log = logging.getLogger(__name__)

            class Traced(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    log.debug("forward of %s", x.shape)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """,
            line=11,
            message="Traced.forward returns input `x` unchanged",
        ),
        Invalid(
            """
            import torch

            class Head(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x[:2], x.sum()

                @staticmethod
                def backward(ctx, grad_head, grad_sum):
                    (x,) = ctx.saved_tensors
                    return torch.zeros_like(x)
            """,
            line=7,
            message="a view of input `x` as output 0",
        ),
        # The view is the second output (after a local that is no input): the error names output 1.
        Invalid(
            """
            import torch

            class PassSecond(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    doubled = x * 2
                    return doubled, x.view_as(x)

                @staticmethod
                def backward(ctx, g0, g1):
                    return g0 * 2 + g1
            """,
            line=7,
            message="as output 1: changing that output in place raises `Output 1 of PassSecond is a view",
        ),
        # Split style: forward's parameters are all inputs.
        Invalid(
            """
            import torch

            class Transpose(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.t()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad):
                    return grad.t()
            """,
            line=6,
            message="Transpose.forward returns `x.t()`",
        ),
    ]
