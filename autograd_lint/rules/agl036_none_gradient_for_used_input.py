"""AGL036: backward returns ``None`` for a tensor input that forward's output is computed from."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import dotted_name, node_code
from autograd_lint.model.semantic import Binding, How, MethodModel, Sink
from autograd_lint.model.spec import Kind
from autograd_lint.model.trainable import TrainableArgument, trainable_arguments
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
    differentiable in it (``torch.addmm(bias, x, w)``, ``F.linear(x, w, bias)``), and that a
    ``Fn.apply(...)`` call of the same module passes a trainable value (``self.bias`` of a
    module that makes it an ``nn.Parameter``, :mod:`autograd_lint.model.trainable`).  Such an
    input gets no gradient: a bias is silently never trained.  Whether an input requires
    grad is the callers' choice (a mean computed under ``torch.no_grad()`` is passed without
    history on purpose), so without such a call the rule is silent; with one, an unannotated
    input is a tensor (only floating-point tensors require grad).  Inputs forward rebinds,
    and inputs of a non-tensor kind (annotated ``int``), are left alone; so are Functions
    whose returns are not all tuple literals."""

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
        trainable: dict[int, TrainableArgument] | None = None
        for index in sorted(nones or ()):
            name = inputs[index]
            param = model.params.get(name)
            if param is None or model.is_rebound(name):
                continue
            if param.kind is not Kind.TENSOR and param.kind is not Kind.UNKNOWN:
                continue
            use = _differentiable_use(model, param)
            if use is None:
                continue
            if trainable is None:
                trainable = _trainable_positions(ctx)
            passed = trainable.get(index)
            if passed is None:
                continue  # (what requires grad is a floating-point tensor, so an unannotated input is one)
            yield Report(
                backward.position,
                f"{function.name}.backward returns None as the gradient of `{name}`, which forward's output "
                f"is computed from ({use}) and which `{function.name}.apply` on line {passed.line} passes "
                f"`{passed.code}`, a trainable value: it silently gets no gradient (the parameter is never "
                "updated); return its gradient",
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

            class Dense(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.weight = torch.nn.Parameter(torch.randn(2, 3))
                    self.bias = torch.nn.Parameter(torch.zeros(2))

                def forward(self, x):
                    return Linear.apply(x, self.weight, self.bias)
            """
        ),
        # The caller computes the mean and the scale under no_grad: they are passed without
        # history on purpose, and backward's gradient for `x` already folds their dependence in.
        Valid(
            """
            import torch

            class Normalize(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, mean: torch.Tensor, inv_std: torch.Tensor):
                    out = (x - mean) * inv_std
                    ctx.save_for_backward(out, inv_std)
                    return out

                @staticmethod
                def backward(ctx, g):
                    out, inv_std = ctx.saved_tensors
                    dx = inv_std * (g - g.mean(-1, keepdim=True) - out * (g * out).mean(-1, keepdim=True))
                    return dx, None, None

            class LayerNorm(torch.nn.Module):
                def forward(self, x):
                    with torch.no_grad():
                        mean = x.mean(-1, keepdim=True)
                        inv_std = (x.var(-1, unbiased=False, keepdim=True) + 1e-5).rsqrt()
                    return Normalize.apply(x, mean, inv_std)
            """
        ),
        # A wrapper passes its own parameters on: whether `bias` requires grad is its callers' choice.
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
                    return g @ w, g.t() @ x, None

            def linear(x, w, bias):
                return Linear.apply(x, w, bias)
            """
        ),
        # `self.bias` is a buffer here, not a parameter.
        Valid(
            """
            import torch

            class AddBias(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, bias: torch.Tensor):
                    return x + bias

                @staticmethod
                def backward(ctx, g):
                    return g, None

            class Shift(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("bias", torch.zeros(3))

                def forward(self, x):
                    return AddBias.apply(x, self.bias)
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

            index = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
            Gather.apply(torch.randn(3, requires_grad=True), index, torch.nn.Parameter(torch.ones(())))
            """
        ),
        # Inputs used only in an index (sizes): no differentiable path to the output.
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

            def split(x):
                w = torch.nn.Parameter(torch.ones(2))
                return Split.apply(x, w, w)
            """
        ),
    ]
    INVALID = [
        # Unannotated: the module passes an nn.Parameter there, so it is a float tensor.
        Invalid(
            """
            import torch

            class LinearFn(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight, bias):
                    ctx.save_for_backward(x, weight)
                    return x @ weight.t() + bias

                @staticmethod
                def backward(ctx, g):
                    x, weight = ctx.saved_tensors
                    return g @ weight, g.t() @ x, None

            class MyLinear(torch.nn.Module):
                def __init__(self, i, o):
                    super().__init__()
                    self.weight = torch.nn.Parameter(torch.randn(o, i))
                    self.bias = torch.nn.Parameter(torch.zeros(o))

                def forward(self, x):
                    return LinearFn.apply(x, self.weight, self.bias)
            """,
            line=10,
            message="LinearFn.backward returns None as the gradient of `bias`, which forward's output is computed "
            "from (`x @ weight.t() + bias`) and which `LinearFn.apply` on line 21 passes `self.bias`",
        ),
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

            class Dense(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.weight = torch.nn.Parameter(torch.randn(2, 3))
                    self.bias = torch.nn.Parameter(torch.zeros(2))

                def forward(self, x):
                    return Linear.apply(x, self.weight, self.bias)
            """,
            line=11,
            message="Linear.backward returns None as the gradient of `bias`, which forward's output is computed "
            "from (`out + bias`) and which `Linear.apply` on line 22 passes `self.bias`, a trainable value",
        ),
        # No annotation, but `bias.view(...)` shows a tensor; the bias is registered conditionally.
        Invalid(
            """
            from torch import nn
            import torch

            class AddBias(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, bias):
                    return x + bias.view(1, -1)

                @staticmethod
                def backward(ctx, g):
                    return g, None

            class Biased(nn.Module):
                def __init__(self, bias=True):
                    super().__init__()
                    if bias:
                        self.register_parameter("bias", nn.Parameter(torch.zeros(3)))
                    else:
                        self.bias = None

                def forward(self, x):
                    return x if self.bias is None else AddBias.apply(x, self.bias)
            """,
            line=10,
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

            def step(x, w):
                bias = torch.zeros(2, requires_grad=True)
                return Affine.apply(x, w, bias), bias
            """,
            line=10,
            message="returns None as the gradient of `bias`, which forward's output is computed from (`torch.addmm(...)`)",
        ),
    ]


def _trainable_positions(ctx: FunctionContext) -> dict[int, TrainableArgument]:
    """The first trainable argument the module's ``apply`` calls pass at each position,
    when the class name means one Function only in this module."""
    function = ctx.function
    if sum(1 for f in ctx.analysis.functions if f.name == function.name) != 1:
        return {}
    found: dict[int, TrainableArgument] = {}
    for argument in trainable_arguments(ctx.analysis.source.text, ctx.analysis.imports).get(function.name, ()):
        found.setdefault(argument.position, argument)
    return found


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


def _is_param(model: MethodModel, expr: cst.BaseExpression, param: Binding) -> bool:
    """Whether ``expr`` is ``param``'s object or a view of it (``bias``, ``bias.view(1, -1)``)."""
    origins = model.origins(expr)
    return bool(origins) and model.unnarrowed(origins) == [param]


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes of ``node`` that compute values: not an index (``x[: a + b]`` is no
    differentiable path in ``a``), not a nested scope (it does not run where it is written)."""
    yield from traverse.walk(node, scopes=False, skip=(cst.SubscriptElement,))
