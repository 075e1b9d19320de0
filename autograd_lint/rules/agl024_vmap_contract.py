"""AGL024: the vmap support contract (``generate_vmap_rule`` / the ``vmap`` staticmethod)."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules._common import argument_range, plural
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import FunctionSpec, MethodSpec, Return

# Return shapes (see :class:`autograd_lint.model.spec.Return`) that are never a tuple.
_NOT_A_TUPLE = {
    "list": "a list",
    "listcomp": "a list",
    "call:list": "a list",
    "genexp": "a generator",
    "dict": "a dict",
    "set": "a set",
    "none": "None",
    "bare": "None",
}


def _returns_not_a_pair(ret: Return) -> str | None:
    """What ``ret`` gives when that is certainly not a 2-element tuple."""
    if ret.shape in _NOT_A_TUPLE:
        return _NOT_A_TUPLE[ret.shape]
    if ret.shape == "tuple" and ret.elements is not None and len(ret.elements) != 2:
        return f"a tuple of {len(ret.elements)}"
    if ret.shape in ("other", "name") and ret.value is not None and ret.value.kind.is_tensor:
        return "a single tensor"
    return None


class VmapContract(Rule):
    """Checks the contract of a Function's vmap support: ``generate_vmap_rule = True``
    must not be combined with an overridden ``vmap``; ``vmap`` must take
    ``info``, ``in_dims`` and one parameter per forward input; and every
    ``return`` of ``vmap`` must be an ``(output, out_dims)`` pair.  Arity is
    checked only when forward's inputs are known and ``vmap`` has no ``*args``;
    a return is checked only when its value is certainly not a 2-element tuple
    (a tuple literal of another length, a list, ``None``, a single tensor)."""

    code = "AGL024"
    title = "vmap support contract"
    severity = Severity.ERROR
    why = (
        "Both `generate_vmap_rule = True` and a `vmap` staticmethod: `RuntimeError: You tried to "
        "vmap over F, but it has both generate_vmap_rule=True and an overridden vmap staticmethod. "
        "Please set generate_vmap_rule=False or delete the overridden vmap staticmethod to avoid "
        "ambiguity.` A `vmap` with the wrong number of parameters: `TypeError: F.vmap() takes 3 "
        "positional arguments but 4 were given`. A `vmap` that does not return an `(output, "
        "out_dims)` pair: `RuntimeError: Expected the vmap staticmethod to have two returns, an "
        "output and out_dims with pytree structure compatible with the output. Got a <class "
        "'torch.Tensor'> instead`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        vmap = function.method("vmap")
        if vmap is None:
            return
        yield from self._both_rules(ctx, vmap)
        if not ctx.own(vmap):
            return
        yield from self._arity(function, vmap)
        for ret in vmap.returns:
            what = _returns_not_a_pair(ret)
            if what is not None:
                yield Report(
                    ret.position,
                    f"{function.name}.vmap returns {what}, but it must return an "
                    "(output, out_dims) tuple",
                )

    def _both_rules(self, ctx: FunctionContext, vmap: MethodSpec) -> Iterator[Report]:
        function = ctx.function
        holder = next((s for s in function.mro() if "generate_vmap_rule" in s.class_attributes), None)
        if holder is None or not function.attribute_is_true("generate_vmap_rule"):
            return
        # An unresolved base could override either one in between.
        if not function.knows_all_methods and not (holder is function and ctx.own(vmap)):
            return
        attribute = holder.class_attributes["generate_vmap_rule"]
        if ctx.own(vmap):
            position = vmap.position
        elif holder is function and attribute.position is not None:
            position = attribute.position
        else:
            return  # both come from a base, which is reported on its own
        yield Report(
            position,
            f"{function.name} sets generate_vmap_rule = True and also overrides vmap "
            f"(in {vmap.defined_in.rsplit('.', 1)[-1]}); PyTorch refuses to vmap over it",
        )

    def _arity(self, function: FunctionSpec, vmap: MethodSpec) -> Iterator[Report]:
        passed = argument_range(function)
        if passed is None or vmap.has_var_positional:
            return
        positional = vmap.positional
        required = sum(1 for p in positional if p.default is None)
        fewest, most = passed[0] + 2, passed[1] + 2
        if required > most or len(positional) < fewest:
            expected = plural(most, "positional parameter")
            if fewest != most:
                expected = f"{fewest} to {expected}"
            yield Report(
                vmap.position,
                f"{function.name}.vmap takes {plural(len(positional), 'positional parameter')}, "
                f"but it is called with {expected.replace('parameter', 'argument')} "
                f"(info, in_dims and one per forward input)",
            )

    VALID = [
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(x, factor):
                    return x * factor

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.factor = inputs[1]

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor, None

                @staticmethod
                def vmap(info, in_dims, x, factor):
                    return Scale.apply(x, factor), in_dims[0]
            """
        ),
        # Trap 3: vmap(info, in_dims, *args) takes any number of inputs.
        Valid(
            """
            import torch

            class Add(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x + y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def vmap(info, in_dims, *args):
                    return args[0] + args[1], 0
            """
        ),
        # Trap 2: a returned variable has a shape syntax can't tell.
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.exp()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(output)

                @staticmethod
                def vmap(info, in_dims, x):
                    result = (x.exp(), in_dims[0]) if in_dims[0] is not None else x.exp()
                    return result
            """
        ),
        # Trap 5: generate_vmap_rule = False in the subclass switches the base's rule off.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                generate_vmap_rule = True

                @staticmethod
                def forward(x):
                    return x * 2

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

            class Custom(Base):
                generate_vmap_rule = False

                @staticmethod
                def vmap(info, in_dims, x):
                    return x * 2, in_dims[0]
            """
        ),
        # Trap 5: a base imported from elsewhere may define vmap itself; nothing to check here.
        Valid(
            """
            from mylib import VmapBase

            class Gen(VmapBase):
                generate_vmap_rule = True

                @staticmethod
                def forward(x):
                    return x * 2
            """
        ),
    ]
    INVALID = [
        # A single value through a local name instead of (output, out_dims).
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return torch.exp(x)

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(output)

                @staticmethod
                def vmap(info, in_dims, x):
                    out = torch.exp(x)
                    return out
            """,
            line=15,
            message="Exp.vmap returns a single tensor",
        ),
        Invalid(
            """
            import torch

            class Square(torch.autograd.Function):
                generate_vmap_rule = True

                @staticmethod
                def forward(x):
                    return x * x

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs[0])

                @staticmethod
                def vmap(info, in_dims, x):
                    return x * x, in_dims[0]
            """,
            line=15,
            message="Square sets generate_vmap_rule = True and also overrides vmap",
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
                    ctx.factor = inputs[1]

                @staticmethod
                def vmap(info, in_dims, x):
                    return x * 2.0, in_dims[0]
            """,
            line=13,
            message="Scale.vmap takes 3 positional parameters, but it is called with 4 positional arguments",
        ),
        Invalid(
            """
            import torch

            class Neg(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return -x

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def vmap(info, in_dims, x):
                    return -x
            """,
            line=14,
            message="Neg.vmap returns a single tensor, but it must return an (output, out_dims) tuple",
        ),
        Invalid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.clone()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def vmap(info, in_dims, x):
                    return [x.clone(), in_dims[0]]
            """,
            line=14,
            message="Pair.vmap returns a list",
        ),
        # The rule set in a subclass of a Function whose vmap is overridden.
        Invalid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 3

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def vmap(info, in_dims, x):
                    return x * 3, in_dims[0]

            class Derived(Base):
                generate_vmap_rule = True
            """,
            line=17,
            message="(in Base)",
        ),
    ]
