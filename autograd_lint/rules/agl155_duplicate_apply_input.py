"""AGL155: the same tensor passed twice to ``Fn.apply`` graph-breaks under torch.compile."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.analysis import ModuleNeed
from autograd_lint.model.spec import Kind
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class DuplicateApplyInput(Rule):
    """Reports a call ``Fn.apply(..., x, ..., x, ...)`` (or through an alias ``f = Fn.apply``)
    for a Function of this module that passes the same name twice as positional arguments,
    when the name is certainly a tensor there (a ``torch.*`` call, a tensor-only method, a
    name annotated ``Tensor`` or used as one).  Both arguments are then one tensor object,
    which Dynamo refuses to trace (compile compatibility family: off unless selected or
    ``uses-compile = true``).  Only names: two attribute reads ``self.w, self.w`` may be
    different objects (a property), and two different names may be one object but the lint
    cannot tell for certain.  Eager autograd is fine with it: each argument gets its own
    gradient, and the engine adds them up."""

    code = "AGL155"
    title = "the same tensor passed twice to apply graph-breaks under torch.compile"
    severity = Severity.INFO
    enabled_by_default = False
    on_when_compiling = True
    needs = frozenset({ModuleNeed.APPLY_DUPLICATES})
    why = (
        "Measured with `torch.compile(f, fullgraph=True, backend=\"eager\")` on torch 2.13, "
        "`f = lambda x: Mul.apply(x, x)` with `x.requires_grad`: "
        "`torch._dynamo.exc.Unsupported: autograd.Function.apply: duplicate tensor input ... Explanation: Dynamo "
        "does not support tracing autograd.Function.apply when the same tensor is passed to multiple forward "
        "inputs.` "
        "([GB6297](https://meta-pytorch.github.io/compile-graph-break-site/gb/gb6297.html)); without "
        "`fullgraph=True` the graph breaks there.  The check runs when Dynamo traces the Function, which it "
        "does when an input requires grad: with none that does, Dynamo inlines forward and the call compiles "
        "(also measured).  Pass a copy when the Function needs the tensor twice (`Mul.apply(x, x.clone())`: "
        "the gradient still flows to `x` through both), or give forward one parameter."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        index = analysis.apply_index
        if index is None:
            return
        for call, function in index.applied_calls():
            seen: dict[str, int] = {}
            reported: set[str] = set()
            for position, arg in enumerate(call.args):
                if arg.star or arg.keyword is not None:
                    # ``*rest`` may hold anything and shifts every later position.
                    if arg.star:
                        break
                    continue
                if not isinstance(arg.value, cst.Name):
                    continue
                name = arg.value.value
                if name not in seen:
                    seen[name] = position
                    continue
                if name in reported:
                    continue
                kind = index.kinds_around(call)
                if kind(arg.value) is not Kind.TENSOR:
                    continue
                reported.add(name)
                yield Report(
                    index.unit.position(arg.value),
                    f"{function.name}.apply gets tensor `{name}` as arguments {seen[name] + 1} and {position + 1}: "
                    "torch.compile cannot trace a Function given one tensor twice (GB6297, "
                    "\"duplicate tensor input\"): a graph break, an error under fullgraph=True, when an input "
                    f"requires grad; pass `{name}.clone()` as one of them",
                )

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, g):
                    a, b = ctx.saved_tensors
                    return g * b, g * a

            def square(x: torch.Tensor) -> torch.Tensor:
                return Mul.apply(x, x.clone())
            """
        ),
        # The same integer twice is not a tensor: Dynamo checks tensor inputs only.
        Valid(
            """
            import torch

            class Pad(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, left, right):
                    ctx.sizes = (left, right)
                    return torch.nn.functional.pad(x, (left, right))

                @staticmethod
                def backward(ctx, g):
                    left, right = ctx.sizes
                    return g[..., left:g.shape[-1] - right], None, None

            def pad(x: torch.Tensor, n: int) -> torch.Tensor:
                return Pad.apply(x, n, n)
            """
        ),
        # Two attribute reads may be two objects (a property): not reported.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, g):
                    a, b = ctx.saved_tensors
                    return g * b, g * a

            class Layer(torch.nn.Module):
                def forward(self, x):
                    return Mul.apply(self.weight, self.weight) * x
            """
        ),
        # `Mul` here is a parameter, not the class: resolve names, don't match them.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    return a * b

                @staticmethod
                def backward(ctx, g):
                    return g, g

            def run(Mul, x: torch.Tensor):
                return Mul.apply(x, x)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, g):
                    a, b = ctx.saved_tensors
                    return g * b, g * a

            def square(x: torch.Tensor) -> torch.Tensor:
                return Mul.apply(x, x)
            """,
            line=15,
            message="Mul.apply gets tensor `x` as arguments 1 and 2",
        ),
        # Through an alias, with the tensor made by a torch call.
        Invalid(
            """
            import torch
            from torch.autograd import Function

            class Bilinear(Function):
                @staticmethod
                def forward(ctx, x, w, y):
                    ctx.save_for_backward(x, w, y)
                    return x @ w @ y

                @staticmethod
                def backward(ctx, g):
                    x, w, y = ctx.saved_tensors
                    return g @ y.T @ w.T, x.T @ g @ y.T, w.T @ x.T @ g

            bilinear = Bilinear.apply

            def quadratic(w):
                v = torch.randn(4, 4)
                return bilinear(v, w, v)
            """,
            line=19,
            message="arguments 1 and 3",
        ),
        # A name used as a tensor in the function (a tensor method on it).
        Invalid(
            """
            import torch

            class Gate(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, g):
                    ctx.save_for_backward(x, g)
                    return x * torch.sigmoid(g)

                @staticmethod
                def backward(ctx, grad):
                    x, g = ctx.saved_tensors
                    s = torch.sigmoid(g)
                    return grad * s, grad * x * s * (1 - s)

            def self_gate(h):
                h = torch.relu(h)
                return Gate.apply(h, h)
            """,
            line=17,
            message="GB6297",
        ),
    ]
