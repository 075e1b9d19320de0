"""AGL003: a tensor stored as a ctx attribute instead of through ``save_for_backward``."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import ctx_attribute, dotted_name
from autograd_lint.model.flow import ScopeVisitor
from autograd_lint.model.imports import ImportMap
from autograd_lint.rules._common import ctx_writers
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import CtxWrite, Expr, Kind, MethodSpec

# ctx methods that receive ctx from the engine and may release or fill ctx attributes.
_READERS = ("backward", "vjp", "jvp")


def _released_or_filled(method: MethodSpec, imports: ImportMap) -> set[str] | None:
    """ctx attributes that ``method`` deletes, resets to ``None``, clears or writes in place.

    Such attributes are not leaks but buffers or caches managed by hand (catalogue
    §5 trap 11).  A write through a local name read from the attribute
    (``buf = ctx.buf; buf.copy_(g)``) counts wherever it is, since a wider
    exemption can only make findings fewer.  ``None`` when the method's code is
    not at hand.
    """
    ctx_name = method.ctx_name
    if method.node is None or ctx_name is None:
        return None
    found: set[str] = set()
    bound: dict[str, str] = {}  # local name -> the ctx attribute it was read from
    written: set[str] = set()  # local names written in place

    def mark(node: cst.BaseExpression) -> None:
        attr = ctx_attribute(node, ctx_name)
        if attr:
            found.add(attr)
        elif isinstance(node, cst.Name):
            written.add(node.value)

    class _Visitor(ScopeVisitor):
        root = method.node

        def visit_Del(self, node: cst.Del) -> None:
            targets = node.target.elements if isinstance(node.target, cst.Tuple) else ()
            for target in [node.target, *(e.value for e in targets)]:
                attr = ctx_attribute(target, ctx_name)
                if attr:
                    found.add(attr)

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                attr = ctx_attribute(target.target, ctx_name)
                if attr and isinstance(node.value, cst.Name) and node.value.value == "None":
                    found.add(attr)
                if isinstance(target.target, cst.Subscript):
                    mark(target.target.value)
                source = ctx_attribute(node.value, ctx_name)
                if source and isinstance(target.target, cst.Name):
                    bound[target.target.value] = source

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            mark(node.target.value if isinstance(node.target, cst.Subscript) else node.target)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute):
                name = dotted_name(func)
                qualified = imports.resolve(name) if name else None
                if qualified and qualified.startswith("torch."):
                    if qualified.endswith("_") and node.args:
                        mark(node.args[0].value)
                elif func.attr.value == "clear" or func.attr.value.endswith("_"):
                    mark(func.value)  # ctx.cache.clear(), buf.copy_(...)
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "out":
                    mark(arg.value)

    traverse.visit(method.node, _Visitor())
    found.update(attr for name, attr in bound.items() if name in written)
    return found


def _tensor_held(write: CtxWrite) -> Expr | None:
    """The tensor the assigned value is or holds (in a list or tuple literal), if certain."""
    if write.value.kind is Kind.TENSOR:
        return write.value
    return next((e for e in write.elements or () if e.kind is Kind.TENSOR), None)


class CtxTensorAttribute(Rule):
    """Reports a ``ctx.<attr> = value`` assignment in forward (combined style) or
    setup_context whose value is certainly a tensor, or a list or tuple literal
    holding one.  Attributes that backward/vjp/jvp deletes, resets to ``None``,
    clears or writes in place are buffers or caches managed by hand and are left
    alone, as are the names in ``allowed_ctx_tensor_attributes``."""

    code = "AGL003"
    title = "tensor stored as a ctx attribute instead of save_for_backward"
    severity = Severity.ERROR
    why = (
        "Nothing fails, but: an input kept on ctx and modified in place after forward gives a "
        "silently wrong gradient (save_for_backward would raise `one of the variables needed "
        "for gradient computation has been modified by an inplace operation`); an output on "
        "ctx makes a reference cycle that keeps it alive until `gc.collect()`; the tensor "
        "outlives backward; `saved_tensors_hooks` (checkpointing, offloading) never see it; "
        "double backward is silently wrong."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        allowed = ctx.settings.allowed_ctx_tensor_attributes
        exempt: set[str] | None = None
        for method in ctx_writers(function):
            if not ctx.own(method):
                continue
            for write in method.ctx_writes:
                tensor = _tensor_held(write)
                if tensor is None or write.attribute in allowed:
                    continue
                if exempt is None:
                    exempt = self._managed_attributes(ctx)
                    if exempt is None:
                        return
                if write.attribute in exempt:
                    continue
                held = f"tensor `{tensor.text}`"
                if tensor is not write.value:
                    held = f"a list or tuple holding {held}"
                yield Report(
                    write.position,
                    f"{function.name}.{method.name} stores {held} as ctx.{write.attribute}; "
                    "pass it to ctx.save_for_backward and read it from ctx.saved_tensors",
                )

    @staticmethod
    def _managed_attributes(ctx: FunctionContext) -> set[str] | None:
        """Attributes the readers release or fill; ``None`` when some reader can't be read."""
        managed: set[str] = set()
        for name in _READERS:
            reader = ctx.function.method(name)
            if reader is None:
                continue
            found = _released_or_filled(reader, ctx.analysis.imports)
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
    ]
    INVALID = [
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
            message="Pair.setup_context stores a list or tuple holding tensor `x.detach()` as ctx.saved",
        ),
    ]
