"""AGL031: backward or jvp reads a ctx attribute that forward / setup_context never set."""

from __future__ import annotations

import difflib
import re
from typing import Iterator

from autograd_lint.model import flow
from autograd_lint.model.semantic import Sink
from autograd_lint.model.spec import FunctionSpec, MethodSpec
from autograd_lint.rules._common import ctx_writers, is_stub, only_raises
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

# Attributes every ctx has (dir() of a Function's backward class in torch 2.13, public part).
CTX_OWN_ATTRIBUTES = frozenset(
    """
    apply apply_boxed apply_jvp dirty_tensors mark_dirty mark_non_differentiable mark_shared_storage
    materialize_grads maybe_clear_saved_tensors metadata name needs_input_grad next_functions
    non_differentiable register_hook register_prehook requires_grad save_for_backward save_for_forward
    saved_for_forward saved_tensors saved_variables set_materialize_grads to_save
    """.split()
)
# Methods that run with the ctx forward filled: they read it.
_READERS = ("backward", "vjp", "jvp")


def _set_attributes(method: MethodSpec) -> set[str] | None:
    """The ctx attributes ``method`` sets; None when it may set others out of sight
    (ctx handed to a call such as a helper or ``setattr`` with a name that is not a string
    literal, used in a nested function, or its ``__dict__`` touched)."""
    model = method.semantic
    ctx_name = method.ctx_name
    if model is None or ctx_name is None:
        return None
    if ctx_name not in model.params or model.escapes(ctx_name, setattr_stores=True):
        return None
    if any(owner == ctx_name and attr == "__dict__" for owner, attr, _ in model.attribute_reads):
        return None
    found = {f.detail or "" for f in model.flows_to(Sink.CTX_ATTRIBUTE) if f.owner == ctx_name}
    # `ctx.a, ctx.b = pair()` sets attributes with no value per element.
    return found | {write.attribute for write in method.ctx_writes}


def _assigned_elsewhere(text: str, attribute: str) -> bool:
    """Whether the module assigns ``<something>.<attribute>`` or names it in a string
    (``setattr(obj, "<attribute>", ...)``): the ctx is reachable as ``output.grad_fn``."""
    pattern = rf"\.{re.escape(attribute)}\s*=(?!=)|[\"']{re.escape(attribute)}[\"']"
    return re.search(pattern, text) is not None


def _every_set_attribute(function: FunctionSpec) -> set[str] | None:
    """Attributes set on ctx by any method of the class that receives it; None when undecidable."""
    if not function.knows_all_methods or function.is_split_style is None:
        return None
    found: set[str] = set()
    methods = [*ctx_writers(function), *(function.method(name) for name in _READERS)]
    for method in methods:
        if method is None:
            continue
        attributes = _set_attributes(method)
        if attributes is None:
            return None
        found |= attributes
    return found


class CtxAttributeNeverSet(Rule):
    """Reports a read of ``ctx.<name>`` in backward, vjp or jvp when no method of the
    class sets ``ctx.<name>`` on any path (forward in combined style, setup_context in
    split style, or the readers themselves), and ``<name>`` is not an attribute every
    ctx has (``saved_tensors``, ``needs_input_grad``...).  The rule stays silent when
    attributes can be set out of its sight: ctx passed to any call (a helper,
    ``setattr`` with a name that is not a string literal), stored, aliased or rebound, used in a nested function, ``ctx.__dict__`` touched, a base class
    outside the analysed files, a private name (``ctx._...``), an assignment to
    ``<anything>.<name>`` elsewhere in the module (the ctx is the output's
    ``grad_fn``), a legacy Function with instance methods, or a class with no ``forward``
    of its own or its bases' (or one that only raises): its backward runs only under a
    subclass's forward, which may be in a file not analysed with it.  ``vmap`` receives no
    ctx and is not checked."""

    code = "AGL031"
    title = "backward reads a ctx attribute that forward never sets"
    severity = Severity.ERROR
    why = (
        "Backward fails when it runs: `AttributeError: 'FBackward' object has no attribute "
        "'lambd'` (forward set `ctx.lamda`).  Forward and the output look fine until then."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        readers = [m for name in _READERS if (m := function.methods.get(name)) is not None and ctx.own(m)]
        if not readers or not all(m.is_staticmethod or m.is_classmethod for m in function.effective_methods.values()):
            return  # a legacy instance-method Function keeps its state on `self`
        forward = function.method("forward")
        if forward is None or only_raises(forward.node) or (
            forward.node is not None and is_stub(flow.method_body(forward.node))
        ):  # (no node: a base read from another file, whose code is not at hand here)
            return  # backward runs only under a subclass's forward, which may be in another file
        set_attributes = _every_set_attribute(function)
        if set_attributes is None:
            return
        for method in readers:
            model = method.semantic
            if model is None or method.ctx_name is None:
                continue
            reported: set[str] = set()
            for owner, attribute, node in model.attribute_reads:
                if owner != method.ctx_name or attribute in reported:
                    continue
                if attribute in set_attributes or attribute in CTX_OWN_ATTRIBUTES or attribute.startswith("_"):
                    continue
                if _assigned_elsewhere(ctx.analysis.source.text, attribute):
                    continue  # e.g. `out.grad_fn.<name> = ...`: the ctx is the output's grad_fn
                reported.add(attribute)
                close = difflib.get_close_matches(attribute, sorted(set_attributes), n=1)
                hint = f" (forward sets ctx.{close[0]})" if close else ""
                yield Report(
                    ctx.position(method, node),
                    f"{function.name}.{method.name} reads ctx.{attribute}, which is never set{hint}: "
                    f"`AttributeError: '{function.name}Backward' object has no attribute '{attribute}'` "
                    f"when {method.name} runs",
                )

    VALID = [
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, lambd: float):
                    ctx.lambd = lambd
                    return x * lambd

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.lambd, None
            """
        ),
        # Set out of sight: through setattr, or by a helper that receives ctx.
        Valid(
            """
            import torch

            def remember(ctx, **values):
                for key, value in values.items():
                    setattr(ctx, key, value)

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, lambd: float):
                    remember(ctx, lambd=lambd)
                    return x * lambd

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.lambd, None
            """
        ),
        # Split style sets attributes in setup_context; a tuple target sets two; ctx's own
        # attributes (needs_input_grad, saved_tensors) need no setting.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(x, y, scale: float):
                    return x * y * scale

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, y, scale = inputs
                    ctx.save_for_backward(x, y)
                    ctx.scale, ctx.shape = scale, x.shape

                @staticmethod
                def backward(ctx, grad):
                    x, y = ctx.saved_tensors
                    gx = grad * y * ctx.scale if ctx.needs_input_grad[0] else None
                    return gx, grad * x * ctx.scale, None
            """
        ),
        # Set from outside through the output's grad_fn; a base class out of view may set it.
        Valid(
            """
            import torch

            class Hook(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    return ctx.grad_from_pipeline

            def run(x, received):
                out = Hook.apply(x)
                out.grad_fn.grad_from_pipeline = received
                return out
            """
        ),
        # setattr with a literal name sets that attribute.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, scale: float):
                    setattr(ctx, "scale", scale)
                    return x * scale

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.scale, None
            """
        ),
        # A base class with no forward: its subclasses (in other files) set ctx.weight.
        Valid(
            """
            import torch

            class ChunkedLossBase(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    raise NotImplementedError

                @staticmethod
                def backward(ctx, grad_output):
                    (grad_x,) = ctx.saved_tensors
                    return grad_x * grad_output, ctx.weight * grad_output
            """
        ),
        # A stub forward (docstring, `...`): an abstract base too, apply gives no grad_fn.
        Valid(
            """
            import torch

            class ScaledBase(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    "Subclasses set ctx.scale."
                    ...

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.scale
            """
        ),
        Valid(
            """
            from mylib import BaseFunction

            class Scale(BaseFunction):
                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.lambd, None
            """
        ),
    ]
    INVALID = [
        # `setattr(ctx, "scale", s)` is `ctx.scale = s`: the misspelt read is still a misspelling.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, scale: float):
                    setattr(ctx, "scale", scale)
                    return x * scale

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.scael, None
            """,
            line=11,
            message="Scale.backward reads ctx.scael, which is never set (forward sets ctx.scale)",
        ),
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, lambd: float):
                    ctx.lamda = lambd
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return -ctx.lambd * g, None
            """,
            line=11,
            message="Scale.backward reads ctx.lambd, which is never set (forward sets ctx.lamda)",
        ),
        # Set on one path only is fine; never set on any path is not.
        Invalid(
            """
            import torch

            class Clip(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, low: float, high: float):
                    if low > 0:
                        ctx.low = low
                    else:
                        ctx.low = 0.0
                    return x.clamp(low, high)

                @staticmethod
                def backward(ctx, grad):
                    return grad * ((ctx.low < grad) & (grad < ctx.high)), None, None
            """,
            line=14,
            message="reads ctx.high, which is never set",
        ),
        # jvp reads an attribute only backward's sibling would have set.
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.exp()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_forward(output)

                @staticmethod
                def jvp(ctx, tangent):
                    return ctx.result * tangent
            """,
            line=14,
            message="Exp.jvp reads ctx.result, which is never set",
        ),
    ]
