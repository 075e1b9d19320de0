"""AGL003: a tensor stored as a ctx attribute instead of through ``save_for_backward``."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.semantic import Flow, How, MethodModel, Sink
from autograd_lint.model.spec import Kind, MethodSpec
from autograd_lint.rules._common import ctx_writers, inputs_without_gradient
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)

# ctx methods that receive ctx from the engine and may release or fill ctx attributes.
_READERS = ("backward", "vjp", "jvp")
# Kinds worth a report: a floating tensor, or one that is None on some paths.  Integer
# and bool tensors (masks, indices, ids) kept on ctx are deliberate and harmless.
_REPORTED = (Kind.TENSOR, Kind.OPTIONAL_TENSOR)


def _released_or_filled(method: MethodSpec) -> set[str] | None:
    """ctx attributes that ``method`` deletes, resets to ``None``, clears or writes in place.

    Such attributes are not leaks but buffers or caches managed by hand (catalogue
    §5 trap 11); a write through a local read from the attribute
    (``buf = ctx.buf; buf.copy_(g)``) counts too.  ``None`` when the method's code
    is not at hand.
    """
    model = method.semantic
    ctx_name = method.ctx_name
    if model is None or ctx_name is None:
        return None
    found = {attr for owner, attr, _ in model.deleted_attributes if owner == ctx_name}
    for flow in model.flows_to(Sink.CTX_ATTRIBUTE):
        if flow.owner == ctx_name and flow.index is None and model.kind(flow.expr) is Kind.NONE:
            found.add(flow.detail or "")
    for write in model.inplace_writes:
        target = write.target.value if isinstance(write.target, cst.Subscript) else write.target
        held = model.attribute_of(target)
        if held is not None and held[0] == ctx_name:
            found.add(held[1])
    return found


def _stored_tensors(model: MethodModel, ctx_name: str) -> Iterator[tuple[Flow, Flow]]:
    """(the store, the tensor it holds) for each ``ctx.<attr> = ...`` whose value, or an
    element of whose list/tuple/dict literal, is certainly a floating tensor (or None)."""
    stores = [f for f in model.flows_to(Sink.CTX_ATTRIBUTE) if f.owner == ctx_name]
    for store in stores:
        if store.index is not None:
            continue
        if model.kind(store.expr) in _REPORTED:
            yield store, store
            continue
        element = next(
            (
                f
                for f in stores
                if f.node is store.node and f.detail == store.detail and f.index is not None
                and model.kind(f.expr) in _REPORTED
            ),
            None,
        )
        if element is not None:
            yield store, element


class CtxTensorAttribute(Rule):
    """Reports a ``ctx.<attr> = value`` assignment in forward (combined style) or
    setup_context whose value is certainly a tensor, or a list or tuple literal
    holding one.  Attributes that backward/vjp/jvp deletes, resets to ``None``,
    clears or writes in place are buffers or caches managed by hand and are left
    alone, as are the names in ``allowed_ctx_tensor_attributes``.

    Not reported, by contract: integer and bool tensors (ids, masks, ``cu_seqlens``,
    also when optional: ``Optional[torch.LongTensor]``), which never carry a gradient;
    and a forward input (or a view of it) that backward gives no gradient — ``None`` at
    its position in every ``return`` — such as index metadata annotated ``Tensor``, a
    frozen weight or a loss weight.  Such an input is a constant to this Function: the
    caller holds it anyway (no leak, no reference cycle) and no gradient or double
    backward depends on its history.  The one hazard left, an in-place change to that
    constant between forward and backward, goes unreported: on real code it is the
    deliberate pattern far more often than a bug."""

    code = "AGL003"
    title = "tensor stored as a ctx attribute instead of save_for_backward"
    severity = Severity.WARNING
    why = (
        "Nothing fails, but: an input kept on ctx and modified in place after forward gives a "
        "silently wrong gradient (save_for_backward would raise `one of the variables needed "
        "for gradient computation has been modified by an inplace operation`); an output on "
        "ctx makes a reference cycle that keeps it alive until `gc.collect()` (and for ever once "
        "ctx holds two outputs: `gc.collect()` does not free them); the tensor "
        "outlives backward; `saved_tensors_hooks` (checkpointing, offloading) never see it; "
        "double backward is silently wrong."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        allowed = ctx.settings.allowed_ctx_tensor_attributes
        exempt: set[str] | None = None
        inputs = function.forward_inputs or ()
        constant_inputs = {inputs[i].name for i in inputs_without_gradient(function) if i < len(inputs)}
        for method in ctx_writers(function):
            if not ctx.own(method) or method.semantic is None or method.ctx_name is None:
                continue
            model = method.semantic
            unit = ctx.unit(method)
            if unit is None:
                continue
            for store, tensor in _stored_tensors(model, method.ctx_name):
                attribute = store.detail or ""
                if attribute in allowed:
                    continue
                if method.name == "forward" and _is_constant_input(model, tensor.expr, constant_inputs):
                    continue
                if exempt is None:
                    exempt = self._managed_attributes(ctx)
                    if exempt is None:
                        return
                if attribute in exempt:
                    continue
                text = unit.code(tensor.expr)
                held = f"tensor `{text}`"
                if model.kind(tensor.expr) is Kind.OPTIONAL_TENSOR:
                    held = f"`{text}` (a tensor or None)"
                if tensor is not store:
                    held = f"a container holding {held}"
                target = _target_of(store, attribute)
                yield Report(
                    ctx.position(method, target),
                    f"{function.name}.{method.name} stores {held} as ctx.{attribute}; "
                    f"{_consequence(method, model, tensor)}: pass it to ctx.save_for_backward "
                    "and read it from ctx.saved_tensors",
                )

    @staticmethod
    def _managed_attributes(ctx: FunctionContext) -> set[str] | None:
        """Attributes the readers release or fill; ``None`` when some reader can't be read."""
        managed: set[str] = set()
        for name in _READERS:
            reader = ctx.function.method(name)
            if reader is None:
                continue
            found = _released_or_filled(reader)
            if found is None:
                return None
            managed |= found
        return managed

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b: float):
                    ctx.save_for_backward(a)
                    ctx.b = b
                    ctx.shape = a.shape
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    (a,) = ctx.saved_tensors
                    return grad * ctx.b, None
            """
        ),
        # Trap 11: RNG state, callables and dtypes on ctx are not saved tensors.
        Valid(
            """
            import torch

            class Checkpoint(torch.autograd.Function):
                @staticmethod
                def forward(ctx, run_function, x):
                    ctx.run_function = run_function
                    ctx.fwd_cpu_state = torch.get_rng_state()
                    ctx.dtype = x.dtype
                    ctx.save_for_backward(x)
                    return run_function(x)

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return None, grad
            """
        ),
        # Trap 11: a list of tensors cleared in backward, and a buffer backward writes into.
        Valid(
            """
            import torch

            class Cached(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.exp(x)
                    ctx.cache = [y, torch.sigmoid(x)]
                    ctx.grad_buf = torch.empty_like(x)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    y, s = ctx.cache
                    del ctx.cache
                    buf = ctx.grad_buf
                    buf.copy_(grad * y * s)
                    return buf
            """
        ),
        # Trap 11: a handle object and a comparison result (maybe a bool) are not
        # certainly tensors.
        Valid(
            """
            import torch

            class Handle(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, handle):
                    ctx.handle = handle
                    ctx.mask = x > 0
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.mask, None
            """
        ),
        # Split style: forward takes no ctx, so `x.cache = ...` there is not a ctx write.
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    x.tag = torch.zeros(1)
                    return x + y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(*inputs)

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad
            """
        ),
        # The int branch of a union of int and Tensor stores an int; a process group has
        # `.size()` but is no tensor; integer masks and indices are deliberate.
        Valid(
            """
            from typing import Union

            import torch
            import torch.distributed as dist

            class Shift(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, offset: Union[int, torch.Tensor], group):
                    if isinstance(offset, int):
                        ctx.offset = offset
                    else:
                        ctx.save_for_backward(offset)
                    ctx.group = group
                    ctx.world = group.size()
                    ctx.mask = x > 0
                    ctx.index = torch.argmax(x, dim=-1)
                    return x + offset

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.mask, None, None
            """
        ),
        # Index metadata (annotated `torch.LongTensor | None`, or plain `Tensor` but given no
        # gradient), ids cleaned with masked_fill, and a frozen weight backward only reads:
        # constants to this Function.
        Valid(
            """
            import torch

            class VarlenScale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, frozen_w: torch.Tensor, ids: torch.LongTensor,
                            cu_seqlens: torch.LongTensor | None = None,
                            chunk_offsets: torch.Tensor | None = None, class_w=None):
                    ctx.save_for_backward(x)
                    ctx.w = frozen_w.contiguous()
                    ctx.ids = ids.masked_fill(ids < 0, 0)
                    ctx.cu_seqlens = cu_seqlens
                    ctx.chunk_offsets = chunk_offsets
                    ctx.class_w = class_w.detach() if class_w is not None else None
                    return x @ frozen_w

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad @ ctx.w.t(), *[None] * 5
            """
        ),
        # Process-group plumbing: backward's `(None, None) + (g,)` gives no gradient to
        # `op` or `group`, however it is spelled.
        Valid(
            """
            import torch
            from torch.autograd import Function

            class AllReduce(Function):
                @staticmethod
                def forward(ctx, op, group, tensor):
                    ctx.group = group
                    ctx.op = op
                    return tensor.clone()

                @staticmethod
                def backward(ctx, grad_output):
                    return (None, None) + (AllReduce.apply(ctx.op, ctx.group, grad_output),)
            """
        ),
        # A loop rebinds `state` to a plain number before it is stored.
        Valid(
            """
            import torch

            class Steps(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, n: int):
                    state = x.sum()
                    for step in range(n):
                        state = step * 2
                    ctx.state = state
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2, None
            """
        ),
    ]
    INVALID = [
        # An optional float state whose gradient backward computes is no constant.
        Invalid(
            """
            import torch

            class Scan(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, cu_seqlens: torch.LongTensor | None = None,
                            h0: torch.Tensor | None = None):
                    ctx.cu_seqlens = cu_seqlens
                    ctx.h0 = h0
                    ctx.save_for_backward(x)
                    return x.cumsum(0) if h0 is None else x.cumsum(0) + h0

                @staticmethod
                def backward(ctx, grad):
                    dh0 = None if ctx.h0 is None else grad.sum(0)
                    return grad.flip(0).cumsum(0).flip(0), None, dh0
            """,
            line=8,
            message="stores `h0` (a tensor or None) as ctx.h0",
        ),
        # An unannotated input (named `input`), with a once_differentiable backward: backward's
        # gradient for it shows it is a tensor.
        Invalid(
            """
            import torch
            from torch.autograd.function import once_differentiable

            class Clamp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, input, low, high):
                    ctx.input = input
                    ctx.low, ctx.high = low, high
                    return input.clamp(low, high)

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    mask = (ctx.input >= ctx.low) & (ctx.input <= ctx.high)
                    return grad * mask, None, None
            """,
            line=7,
            message="stores tensor `input` as ctx.input; an in-place change to that input",
        ),
        # A tuple target storing a computed tensor.
        Invalid(
            """
            import torch

            class RMSNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, eps: float):
                    v = x.pow(2).mean(-1, keepdim=True)
                    ctx.inv, ctx.eps = torch.rsqrt(v + eps), eps
                    return x * ctx.inv

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.inv, None
            """,
            line=7,
            message="stores tensor `torch.rsqrt(v + eps)` as ctx.inv",
        ),
        # A dict literal of input tensors.
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a: torch.Tensor, b: torch.Tensor):
                    ctx.inputs = {"a": a, "b": b}
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.inputs["b"], grad * ctx.inputs["a"]
            """,
            line=6,
            message="stores a container holding tensor `a` as ctx.inputs",
        ),
        # The forward output kept on ctx in setup_context: a reference cycle.
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x: torch.Tensor):
                    return x.exp()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.out = output

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.out
            """,
            line=10,
            message="a forward output kept on ctx makes a reference cycle",
        ),
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.exp(x)
                    ctx.y = y
                    return y

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.y
            """,
            line=7,
            message="Exp.forward stores tensor `y` as ctx.y",
        ),
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a: torch.Tensor, b: torch.Tensor):
                    ctx.a, ctx.b = a, b
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.b, grad * ctx.a
            """,
            line=6,
            message="Mul.forward stores tensor `a` as ctx.a",
        ),
        Invalid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x * y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, y = inputs
                    ctx.saved = [x.detach(), y.detach()]

                @staticmethod
                def backward(ctx, grad):
                    x, y = ctx.saved
                    return grad * y, grad * x
            """,
            line=11,
            message="Pair.setup_context stores a container holding tensor `x.detach()` as ctx.saved",
        ),
    ]


def _is_constant_input(model: MethodModel, expr: cst.BaseExpression, constant_inputs: set[str]) -> bool:
    """Whether the stored value is a forward input that backward gives no gradient (or a
    view or ``.detach()`` of it), on every path that reaches the store; an arm of a
    conditional expression may be ``None`` instead."""
    if isinstance(expr, cst.IfExp):
        arms = [arm for arm in (expr.body, expr.orelse) if model.kind(arm) is not Kind.NONE]
        return bool(arms) and all(_is_constant_input(model, arm, constant_inputs) for arm in arms)
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "detach":
        expr = expr.func.value
    origins = model.origins(expr)
    return bool(origins) and all(b.how is How.PARAMETER and b.name in constant_inputs for b in origins)


def _target_of(store: Flow, attribute: str) -> cst.CSTNode:
    """The ``ctx.<attribute>`` target of the assignment ``store`` (where the report points)."""
    node = store.node
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, cst.AnnAssign):
        targets = [node.target]
    for target in targets:
        for candidate in [target, *(e.value for e in getattr(target, "elements", ()))]:
            if isinstance(candidate, cst.Attribute) and candidate.attr.value == attribute:
                return candidate
    return node


def _consequence(method: MethodSpec, model: MethodModel, tensor: Flow) -> str:
    """What really follows from keeping this tensor on ctx (checked on torch 2.13)."""
    origins = tensor.origins
    output_param = method.positional[2].name if method.name == "setup_context" and len(method.positional) > 2 else None
    is_output = any(
        (method.name == "forward" and any(f.sink is Sink.RETURN for f in model.flows_of(b)))
        or (b.how is How.PARAMETER and b.name == output_param)
        for b in origins
    )
    if is_output:
        return (
            "a forward output kept on ctx makes a reference cycle: it is freed only by gc.collect(), "
            "and never once ctx holds two outputs"
        )
    if method.name == "forward" and any(b.how is How.PARAMETER for b in origins):
        return "an in-place change to that input before backward gives a silently wrong gradient"
    return "saved-tensor hooks (checkpointing, offloading) never see it"
