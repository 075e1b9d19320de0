"""AGL022: forward / setup_context signatures do not match the style the class uses."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.exprs import annotation_kind
from autograd_lint.model.semantic import MethodModel
from autograd_lint.rules._common import plural
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import FunctionSpec, Kind, MethodSpec, ParamKind

# Names that say a parameter is meant to be ctx (trap 9: `self` in old code).
_CTX_NAMES = frozenset({"ctx", "context", "self"})
# ctx APIs that only a real ctx has.
_CTX_APIS = frozenset(
    {"save_for_backward", "save_for_forward", "mark_dirty", "mark_non_differentiable", "set_materialize_grads"}
)
# What a tuple has; any other attribute of setup_context's `inputs` raises AttributeError.
_TUPLE_ATTRIBUTES = frozenset(dir(tuple))


def _unpacks(semantic: MethodModel, name: str) -> list[tuple[cst.Assign, int]]:
    """The statements ``a, b = <name>`` (one target, no starred name) of the body, with
    how many names each unpacks into."""
    return [
        (u.node, u.count)
        for u in semantic.unpackings()
        if len(u.node.targets) == 1 and isinstance(u.value, cst.Name) and u.value.value == name and not u.starred
    ]


class SignatureMismatch(Rule):
    """Checks that forward and setup_context have the signatures their style needs.
    (a) With ``setup_context`` overridden (split style), forward takes no ctx: flags a
    forward whose first parameter is named ``ctx``/``context``/``self`` or that calls
    ctx APIs on it.  (b) Without ``setup_context`` (combined style), forward's first
    positional parameter receives ctx: flags a forward with no positional parameter
    (and no ``*args``) or whose first parameter is annotated as a tensor.  (c)
    ``setup_context`` is called with ``(ctx, inputs, output)``: flags fewer than 3
    positional parameters or more than 3 required ones (skipped with ``*args``).  (d)
    ``inputs`` is a tuple of every forward argument: flags an attribute that a tuple
    lacks (``inputs.shape``, ``inputs.float()``) and unpacking it into a different number of names than
    forward's positional parameters (passing it to ``ctx.save_for_backward`` is AGL004).
    (e) ``apply`` passes only positional arguments: flags keyword-only parameters of
    forward (``**kwargs`` alone stays empty, so it is not flagged).  Classmethod
    forwards and setup_contexts are left to AGL002."""

    code = "AGL022"
    title = "forward/setup_context signature mismatch"
    severity = Severity.ERROR
    why = (
        "(a) `TypeError: missing a required argument: 'a'`. (b) `TypeError: F.forward() "
        "takes 1 positional argument but 2 were given`. (c) `TypeError: F.setup_context() "
        "missing 1 required positional argument: 'extra'`. (d) `AttributeError: 'tuple' "
        "object has no attribute 'shape'`, or `ValueError: too many values to unpack`. (e) "
        "`TypeError: forward() got an unexpected keyword argument 'scale'` (in split style "
        "even when the argument is not passed, since apply binds forward's defaults)."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        forward = function.method("forward")
        setup = function.method("setup_context")
        split = function.is_split_style
        if forward is not None and not forward.is_classmethod:
            if split and (ctx.own(forward) or ctx.own(setup)):
                yield from self._split_forward(function, forward, setup, ctx)
            if split is False and ctx.own(forward):
                yield from self._combined_forward(function, forward)
            if ctx.own(forward):
                yield from self._keyword_parameters(function, forward, split)
        if setup is not None and ctx.own(setup) and not setup.is_classmethod:
            yield from self._setup_context(function, setup, ctx)

    def _split_forward(
        self, function: FunctionSpec, forward: MethodSpec, setup: MethodSpec | None, ctx: FunctionContext
    ) -> Iterator[Report]:
        positional = forward.positional
        if not positional:
            return
        first = positional[0].name
        calls = [c for c in forward.ctx_calls if c.api in _CTX_APIS]
        if first not in _CTX_NAMES and not calls:
            return
        evidence = f"calls {first}.{calls[0].api}()" if calls else f"names its first parameter `{first}`"
        where = forward if ctx.own(forward) else setup
        assert where is not None
        yield Report(
            where.position,
            f"{function.name} overrides setup_context, so forward takes no ctx and `{first}` "
            f"receives the first input, but {function.name}.forward {evidence}",
        )

    def _combined_forward(self, function: FunctionSpec, forward: MethodSpec) -> Iterator[Report]:
        positional = forward.positional
        if not positional and not forward.has_var_positional:
            yield Report(
                forward.position,
                f"{function.name}.forward has no positional parameter, but without "
                "setup_context forward receives ctx as its first argument",
            )
        elif positional and annotation_kind(positional[0].annotation) is Kind.TENSOR:
            yield Report(
                forward.position,
                f"{function.name}.forward's first parameter `{positional[0].name}` is annotated "
                f"`{positional[0].annotation}`, but without setup_context it receives ctx; "
                "add a ctx parameter or override setup_context",
            )

    def _keyword_parameters(self, function: FunctionSpec, forward: MethodSpec, split: bool | None) -> Iterator[Report]:
        # `**kwargs` alone is left out: it stays empty unless a call site passes
        # keywords, so the declaration is no bug by itself (ApplyTemplate, trap 8).
        keyword_only = [p for p in forward.params if p.kind is ParamKind.KEYWORD_ONLY]
        if not keyword_only:
            return
        names = ", ".join(f"`{p.name}`" for p in keyword_only)
        required = [p for p in keyword_only if p.default is None]
        if split:
            consequence = (
                "with setup_context, apply binds forward's defaults and passes these by "
                "keyword, so every call raises TypeError"
            )
        elif required:
            consequence = f"apply passes arguments positionally, so every call misses `{required[0].name}` (TypeError)"
        else:
            consequence = (
                "apply passes arguments positionally, so they can never be set "
                "(a keyword argument to apply raises TypeError)"
            )
        yield Report(
            forward.position,
            f"{function.name}.forward declares keyword-only parameters ({names}): {consequence}",
        )

    def _setup_context(self, function: FunctionSpec, setup: MethodSpec, ctx: FunctionContext) -> Iterator[Report]:
        if setup.has_var_positional:
            return  # trap 3: setup_context(*args, **kwargs)
        positional = setup.positional
        required = [p for p in positional if p.is_required_positional]
        if len(positional) < 3 or len(required) > 3:
            count = plural(len(required if len(required) > 3 else positional), "positional parameter")
            yield Report(
                setup.position,
                f"{function.name}.setup_context takes {count}"
                + (" that must be given" if len(required) > 3 else "")
                + ", but it is called with exactly 3: (ctx, inputs, output)",
            )
            return
        unit = ctx.unit(setup)
        semantic = setup.semantic
        if unit is None or semantic is None:
            return
        name = positional[1].name
        if semantic.is_rebound(name):
            return
        for node in semantic.attribute_loads(name):
            if node.attr.value in _TUPLE_ATTRIBUTES:
                continue
            yield Report(
                unit.position(node),
                f"{function.name}.setup_context reads `{unit.code(node)}`, but `{name}` is the "
                "tuple of forward's arguments, not a tensor",
            )
        n_inputs = function.n_inputs
        if n_inputs is None:
            return
        for node, count in _unpacks(semantic, name):
            if count != n_inputs:
                yield Report(
                    unit.position(node),
                    f"{function.name}.setup_context unpacks `{name}` into "
                    f"{plural(count, 'name')}, but forward takes {plural(n_inputs, 'input')}",
                )

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(a, b):
                    return a * b

                @staticmethod
                def setup_context(ctx, inputs, output):
                    a, b = inputs
                    ctx.save_for_backward(a, b)

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y
            """
        ),
        # Trap 3: *args in forward and setup_context; trap 8: a generic pass-through
        # forward(*args, **kwargs) as in torch's ApplyTemplate; trap 9: ctx named `self`
        # in combined style; an extra setup_context parameter with a default.
        Valid(
            """
            import torch

            class Checkpoint(torch.autograd.Function):
                @staticmethod
                def forward(ctx, run_function, *args):
                    return run_function(*args)

                @staticmethod
                def backward(ctx, *grads):
                    return (None,) + grads

            class Legacy(torch.autograd.Function):
                @staticmethod
                def forward(self, x):
                    self.save_for_backward(x)
                    return x * 2

                @staticmethod
                def backward(self, grad):
                    return grad * 2

            class Generic(torch.autograd.Function):
                @staticmethod
                def forward(*args, **kwargs):
                    return args[0] + args[1]

                @staticmethod
                def setup_context(*args, **kwargs):
                    pass

            class Extra(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 2

                @staticmethod
                def setup_context(ctx, inputs, output, extra=None):
                    ctx.n = inputs.count(None) + len(inputs)
            """
        ),
        # Trap 17: split style counts every forward parameter, defaults included;
        # trap 5: setup_context inherited; `inputs` rebound before use.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(x, dim=0):
                    return x.sum(dim)

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, dim = inputs
                    ctx.dim = dim

            class Child(Base):
                @staticmethod
                def forward(x, dim=1):
                    return x.sum(dim) * 2

            class Rebound(Base):
                @staticmethod
                def setup_context(ctx, inputs, output):
                    inputs = inputs[0]
                    ctx.shape = inputs.shape
            """
        ),
    ]
    INVALID = [
        # (a) ctx kept in forward although setup_context is overridden.
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    return a * b

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(*inputs)

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """,
            line=5,
            message="Mul overrides setup_context, so forward takes no ctx and `ctx` receives the first input",
        ),
        # (b) combined style without ctx.
        Invalid(
            """
            import torch
            from torch import Tensor

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x: Tensor) -> Tensor:
                    return x.exp()

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=6,
            message="Exp.forward's first parameter `x` is annotated `Tensor`, but without "
            "setup_context it receives ctx",
        ),
        # (c) setup_context without `output`; (d) follows.
        Invalid(
            """
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(x, dim=0):
                    return x.sum(dim)

                @staticmethod
                def setup_context(ctx, inputs):
                    ctx.shape = inputs[0].shape
            """,
            line=9,
            message="Sum.setup_context takes 2 positional parameters, but it is called with exactly 3",
        ),
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(x, factor=2.0):
                    return x * factor

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.dtype = inputs.dtype
            """,
            line=10,
            message="Scale.setup_context unpacks `inputs` into 1 name, but forward takes 2 inputs",
        ),
        # (e) keyword-only parameters, in both styles.
        Invalid(
            """
            from torch.autograd import Function

            class Scale(Function):
                @staticmethod
                def forward(ctx, x, *, scale=2.0, **options):
                    return x * scale

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2

            class Shift(Function):
                @staticmethod
                def forward(x, *, shift=1.0):
                    return x + shift

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=5,
            message="Scale.forward declares keyword-only parameters (`scale`): apply passes "
            "arguments positionally, so they can never be set",
        ),
    ]
