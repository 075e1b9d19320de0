"""AGL036: backward returns ``None`` for a tensor input that forward's output is computed from."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import dotted_name, node_code
from autograd_lint.model.semantic import Binding, How, MethodModel, Sink
from autograd_lint.model.spec import Kind
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

# Arithmetic whose result is differentiable in each operand.
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply)
# torch functions differentiable in every tensor argument they take positionally.
_DIFFERENTIABLE = frozenset(
    f"torch.{name}"
    for name in ("add", "sub", "mul", "div", "matmul", "mm", "bmm", "addmm", "baddbmm", "addcmul", "einsum")
) | frozenset(f"torch.nn.functional.{name}" for name in ("linear", "conv1d", "conv2d", "conv3d", "layer_norm"))


class NoneGradientForUsedInput(Rule):
    """Reports a backward that returns ``None`` (on every return) at the position of a
    forward input that is certainly a floating-point tensor and that forward's returned
    value is computed from by arithmetic (``x @ w.t() + bias``) or a torch function
    differentiable in it (``torch.addmm(bias, x, w)``, ``F.linear(x, w, bias)``).  Such an
    input gets no gradient: a bias is silently never trained.  Inputs forward rebinds, and
    inputs of unknown or integer kind, are left alone; so are Functions whose returns are
    not all tuple literals."""

    code = "AGL036"
    title = "backward returns None for an input the output is computed from"
    severity = Severity.WARNING
    enabled_by_default = False
    why = (
        "autograd takes the `None` as a zero gradient, silently: on torch 2.13 a Linear Function whose "
        "backward returns `grad_x, grad_w, None` leaves `bias.grad` None after `loss.backward()` "
        "(bench/recreate/none_gradient.py), so an optimizer never updates the bias and nothing warns."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        forward = function.method("forward")
        backward = function.backward_method
        if (
            forward is None
            or backward is None
            or function.is_split_style is not False
            or forward.semantic is None
            or not ctx.own(forward)
            or not backward.returns
        ):
            return
        inputs = [p.name for p in forward.positional[1:]]
        nones: set[int] | None = None
        for ret in backward.returns:
            if ret.elements is None or len(ret.elements) < len(inputs):
                return
            here = {i for i, e in enumerate(ret.elements[: len(inputs)]) if e.kind is Kind.NONE}
            nones = here if nones is None else nones & here
        model = forward.semantic
        for index in sorted(nones or ()):
            name = inputs[index]
            param = model.params.get(name)
            if param is None or model.is_rebound(name):
                continue
            if not (param.kind is Kind.TENSOR or (param.kind is Kind.UNKNOWN and _used_as_float_tensor(model, param))):
                continue
            use = _differentiable_use(model, param)
            if use is None:
                continue
            yield Report(
                backward.position,
                f"{function.name}.backward returns None as the gradient of `{name}`, which forward's output "
                f"is computed from ({use}): `{name}` silently gets no gradient (a trained parameter is never "
                "updated); return its gradient, or mark the input as not differentiable by design",
            )

    VALID = [
        Valid(
            """
            import torch

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor):
                    ctx.save_for_backward(x, w)
                    return x @ w.t() + bias

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    return g @ w, g.t() @ x, g.sum(0)
            """
        ),
        # An index input: used to select, not in arithmetic; a float scale: not a tensor.
        Valid(
            """
            import torch

            class Gather(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, index: torch.Tensor, scale: float):
                    ctx.save_for_backward(index)
                    ctx.scale = scale
                    return x[index] * scale

                @staticmethod
                def backward(ctx, g):
                    (index,) = ctx.saved_tensors
                    out = torch.zeros_like(g)
                    return out, None, None
            """
        ),
        # An unannotated input used only as a number (a size): no evidence it is a tensor.
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, head_dim, rope_dim):
                    ctx.total = head_dim + rope_dim
                    return x[..., : head_dim + rope_dim] * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2, None, None
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor):
                    ctx.save_for_backward(x, w)
                    out = x @ w.t()
                    return out + bias

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    return g @ w, g.t() @ x, None
            """,
            line=11,
            message="Linear.backward returns None as the gradient of `bias`, which forward's output is computed "
            "from (`out + bias`)",
        ),
        # No annotation, but `bias.view(...)` shows a tensor.
        Invalid(
            """
            import torch

            class AddBias(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, bias):
                    return x + bias.view(1, -1)

                @staticmethod
                def backward(ctx, g):
                    return g, None
            """,
            line=9,
            message="AddBias.backward returns None as the gradient of `bias`",
        ),
        Invalid(
            """
            import torch

            class Affine(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor):
                    ctx.save_for_backward(x, w)
                    return torch.addmm(bias, x, w.t())

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    return g @ w, g.t() @ x, None
            """,
            line=10,
            message="returns None as the gradient of `bias`, which forward's output is computed from (`torch.addmm(...)`)",
        ),
    ]


def _contributing(model: MethodModel) -> list[cst.BaseExpression]:
    """The returned expressions and the values of every binding they read, transitively."""
    exprs: list[cst.BaseExpression] = [f.expr for f in model.flows_to(Sink.RETURN)]
    seen: set[int] = set()
    stack = list(exprs)
    while stack:
        expr = stack.pop()
        for binding in model.dependencies(expr):
            if id(binding) in seen or binding.value is None or binding.how is not How.ASSIGNMENT:
                continue
            seen.add(id(binding))
            exprs.append(binding.value)
            stack.append(binding.value)
    return exprs


def _differentiable_use(model: MethodModel, param: Binding) -> str | None:
    """The expression (as written) through which forward's output is computed from ``param``."""
    for expr in _contributing(model):
        for node in _walk(expr):
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
                if any(_is_param(model, side, param) for side in (node.left, node.right)):
                    return f"`{node_code(node)}`"
            if isinstance(node, cst.Call):
                qualified = model.imports.resolve(dotted_name(node.func) or "")
                if qualified in _DIFFERENTIABLE and any(
                    _is_param(model, arg.value, param) for arg in node.args if not arg.star
                ):
                    return f"`{dotted_name(node.func)}(...)`"
    return None


# Attributes only a tensor has (not a Python number): evidence that an unannotated input is one.
_TENSOR_ATTRIBUTES = frozenset(
    "shape dtype device t view reshape contiguous size dim ndim numel transpose unsqueeze squeeze expand "
    "permute is_cuda stride data_ptr".split()
)
_NOT_FLOAT = frozenset("long int bool short byte".split())


def _used_as_float_tensor(model: MethodModel, param: Binding) -> bool:
    """Whether forward uses ``param`` as a tensor (``bias.view(...)``, ``x.shape``) and never
    as an index or an integer tensor (``x[param]``, ``param.long()``)."""
    tensor = False
    for use in model.uses(param):
        parent = model.parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            if parent.attr.value in _NOT_FLOAT:
                return False
            tensor = tensor or parent.attr.value in _TENSOR_ATTRIBUTES
        if isinstance(parent, (cst.SubscriptElement, cst.Index)):
            return False
    return tensor


def _is_param(model: MethodModel, expr: cst.BaseExpression, param: Binding) -> bool:
    """Whether ``expr`` is ``param``'s object or a view of it (``bias``, ``bias.view(1, -1)``)."""
    origins = model.origins(expr)
    return bool(origins) and model.unnarrowed(origins) == [param]


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield from traverse.walk(node, scopes=False)
