"""AGL152: forward reads tensor data with .item() or .tolist()."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.semantic import Binding, MethodModel, Sink
from autograd_lint.rules._custom_ops import calls_in
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

# Tensor factories whose positional arguments (or one tuple/list of them) are sizes.
_FACTORIES = frozenset(f"torch.{name}" for name in ("zeros", "ones", "empty", "full", "rand", "randn"))
_NEW_FACTORIES = frozenset(("new_zeros", "new_ones", "new_empty", "new_full"))


class DataDependentForward(Rule):
    """Reports ``.item()`` and ``.tolist()`` calls in a Function's ``forward`` or
    ``setup_context`` (compile compatibility family: off unless selected or
    ``uses-compile = true``)."""

    code = "AGL152"
    title = "forward calls .item() or .tolist() (a graph break under torch.compile)"
    severity = Severity.INFO
    enabled_by_default = False
    on_when_compiling = True
    why = (
        "Dynamo speculates forward into one higher-order op. Measured on torch 2.13 "
        "(bench/recreate/issue23_messages.py, default inductor backend): a float `.item()` used as a scale "
        "graph-breaks (`Graph break from Tensor.item()`), and with `fullgraph=True` raises "
        "`InternalTorchDynamoError: PendingUnbackedSymbolNotFound: Pending unbacked symbols {zuf1} not in "
        "returned outputs`; so does an integer `.tolist()` whose values only go on ctx, and a float "
        "`.tolist()` (`Unsupported: Tensor.tolist() with non-integer tensor`). An integer `.item()` that sizes "
        "the returned tensor (`x.new_ones(n)`) compiles, even under `fullgraph=True`: the claim is only made "
        "for numbers that do not size an output, and the rule is silent where the number's only uses size "
        "tensors forward returns (`m = counter.item(); out = torch.zeros(m, 3); ...; return out`: compiles "
        "under fullgraph=True, eager and aot_eager backends, bench/recreate/agl152_sizes.py). A number that "
        "only sizes a split in backward (`ctx.sizes = sizes.tolist()`, `g.split(ctx.sizes)`) still raises "
        "`PendingUnbackedSymbolNotFound` when forward computed the tensor (same script). A number read straight off an input tensor "
        "(`t.item()`, `t.tolist()` with `t` a parameter of forward) compiled under `fullgraph=True` in every "
        "case measured (eager and inductor backends), so the rule is silent there."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        for name in ("forward", "setup_context"):
            method = ctx.function.methods.get(name)
            if method is None or method.node is None or ctx.unit(method) is None:
                continue
            model = method.semantic
            for call in calls_in(method.node):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist") and not call.args:
                    receiver = func.value
                    if (
                        isinstance(receiver, cst.Name)
                        and model is not None
                        and receiver.value in model.params
                        and not model.is_rebound(receiver.value)
                    ):
                        # Read straight off an input, the number compiles (measured on torch 2.13,
                        # fullgraph=True, eager and inductor: `t.item()` as a scale or on ctx,
                        # `t.tolist()` on ctx and split by in backward); only a value computed in
                        # forward leaves Dynamo a pending unbacked symbol.
                        continue
                    if model is not None and _only_sizes_returned_tensors(model, call):
                        continue
                    yield Report(
                        ctx.position(method, call),
                        f"{ctx.function.name}.{name} calls `.{func.attr.value}()`: under torch.compile a "
                        "number read here that does not size an output breaks the graph (fullgraph=True raises "
                        "`PendingUnbackedSymbolNotFound`); keep the value a tensor",
                    )

    VALID = [
        Valid(
            """
            import torch

            class March(torch.autograd.Function):
                @staticmethod
                def forward(ctx, rays):
                    counter = torch.zeros(1, dtype=torch.int32)
                    counter.add_(rays.shape[0])
                    m = counter.item()
                    xyzs = torch.zeros(m, 3, dtype=rays.dtype)
                    xyzs.add_(rays.sum())
                    return xyzs

                @staticmethod
                def backward(ctx, g):
                    return None
            """
        ),
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    s = x.sum()
                    ctx.save_for_backward(s)
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    (s,) = ctx.saved_tensors
                    return g * s
            """
        ),
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * g.sum().item()
            """
        ),
        Valid(
            """
            import torch

            class Pick(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, index: int):
                    ctx.index = index
                    return x[index].clone()

                @staticmethod
                def backward(ctx, g):
                    return None, None
            """
        ),
        Valid(
            """
            import torch

            class Gather(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, sizes):
                    ctx.sizes = sizes.tolist()
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return torch.cat([p * 2 for p in g.split(ctx.sizes)]), None
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Item(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.s = x.sum().item()
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * ctx.s
            """,
            line=6,
            message="`.item()`",
        ),
        Invalid(
            """
            import torch

            class Shapes(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, lengths):
                    ctx.lengths = lengths.int().tolist()
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2, None
            """,
            line=6,
            message="`.tolist()`",
        ),
        Invalid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 2

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.m = inputs[0].max().item()

                @staticmethod
                def backward(ctx, g):
                    return g * 2
            """,
            line=10,
            message="setup_context calls",
        ),
    ]


def _only_sizes_returned_tensors(model: MethodModel, call: cst.Call) -> bool:
    """Whether ``n = <call>`` binds a number whose every use is a size of a tensor factory
    (``torch.zeros(n, 3)``, ``x.new_empty((n,))``) whose result forward returns: the
    unbacked size is then in the returned outputs, and Dynamo compiles it (measured)."""
    assign = model.parent(call)
    if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1):
        return False
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return False
    bindings = [b for b in model.bindings_of(target.value) if b.site is assign]
    if len(bindings) != 1:
        return False
    uses = model.uses(bindings[0])
    returned = {binding for flow in model.flows_to(Sink.RETURN) for binding in flow.origins}
    return bool(uses) and all(_sizes_returned_tensor(model, use, returned) for use in uses)


def _sizes_returned_tensor(model: MethodModel, use: cst.Name, returned: set[Binding]) -> bool:
    node: cst.CSTNode = use
    parent = model.parent(node)
    if isinstance(parent, cst.Element):  # torch.zeros((n, 3))
        node, parent = model.parent(parent), model.parent(model.parent(parent))
        if not isinstance(node, (cst.Tuple, cst.List)):
            return False
    if not (isinstance(parent, cst.Arg) and parent.keyword is None and parent.star == ""):
        return False
    factory = model.parent(parent)
    if not isinstance(factory, cst.Call):
        return False
    func = factory.func
    qualified = model.imports.resolve(dotted_name(func) or "")
    if qualified not in _FACTORIES and not (isinstance(func, cst.Attribute) and func.attr.value in _NEW_FACTORIES):
        return False
    assign = model.parent(factory)
    if not (isinstance(assign, cst.Assign) and assign.value is factory and len(assign.targets) == 1):
        return False
    target = assign.targets[0].target
    return isinstance(target, cst.Name) and any(
        b.site is assign for b in model.bindings_of(target.value) if b in returned
    )
