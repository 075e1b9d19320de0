"""AGL103: setup_context unpacks ``inputs`` into another number of names than the op has positional parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.semantic import MethodModel
from autograd_lint.rules._common import plural
from autograd_lint.rules._custom_ops import registrations
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


def _unpackings(model: MethodModel, name: str) -> list[tuple[cst.Assign, int]]:
    """``a, b = name`` statements (no starred target) in the body, with their target counts, where
    ``name`` certainly still holds the parameter (the semantic model's reaching bindings: a use that a
    rebinding of ``name`` may reach is left out)."""
    param = model.params.get(name)
    if param is None:
        return []
    held = {id(use) for use in model.uses(param) if model.reaching(use) == frozenset({param})}
    return [
        (u.node, u.count)
        for u in model.unpackings()
        if isinstance(u.value, cst.Name) and id(u.value) in held and not u.starred
    ]


class SetupContextUnpacking(Rule):
    """Reports ``a, b = inputs`` in a custom op's ``setup_context`` when the number of names
    differs from the op's positional parameters.  ``inputs`` holds every positional
    argument, with defaults filled in (keyword-only ones come in ``keyword_only_inputs``)."""

    code = "AGL103"
    title = "setup_context unpacks inputs into the wrong number of names"
    severity = Severity.ERROR
    why = (
        "`inputs` has as many elements as the op has positional parameters, so the unpacking fails at the "
        "first differentiable call: `ValueError: too many values to unpack (expected 1)` (PyTorch's own "
        "`opcheck` docstring example has this bug)."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op, registration in registrations(analysis, "autograd"):
            setup = registration.setup_context
            if setup is None or not isinstance(setup.node, cst.FunctionDef) or setup.method is None:
                continue
            if any(p.kind.value == "*args" for p in op.params):
                continue
            inputs = next((p for p in setup.method.params if p.name == "inputs"), None)
            if inputs is None:
                continue
            expected = len(op.positional)
            unit = analysis.custom_ops.unit
            model = setup.method.semantic
            if model is None or model.node is not setup.node:
                continue
            found = _unpackings(model, "inputs")
            for assign, count in sorted(found, key=lambda item: (unit.position(item[0]).line, unit.position(item[0]).column)):
                if count != expected:
                    yield Report(
                        unit.position(assign),
                        f"setup_context `{setup.name}` unpacks inputs into {plural(count, 'name')} but {op.display} "
                        f"has {plural(expected, 'positional parameter')} ({', '.join(p.name for p in op.positional)}):"
                        f" ValueError at the first differentiable call",
                    )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                x, y = inputs
                ctx.y = y

            mul.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=setup_context)
            """
        ),
        # Defaults are filled in: three names for three parameters.
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, a: float = 1.0, b: bool = False) -> Tensor:
                return x * a

            def setup_context(ctx, inputs, output):
                _, a, _ = inputs
                ctx.a = a

            scale.register_autograd(lambda ctx, g: (g * ctx.a, None, None), setup_context=setup_context)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                x, *rest = inputs
                ctx.y = rest[0]

            mul.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=setup_context)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                y, = inputs
                ctx.y = y

            mul.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=setup_context)
            """,
            line=9,
            message="unpacks inputs into 1 name",
        ),
        # An op registered without setup_context comes first: the ops after it are still checked.
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::double", mutates_args=())
            def double(x: Tensor) -> Tensor:
                return x * 2

            double.register_autograd(lambda ctx, g: g * 2)

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                y, = inputs
                ctx.y = y

            mul.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=setup_context)
            """,
            line=15,
            message="unpacks inputs into 1 name",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, a: float = 1.0, b: bool = False) -> Tensor:
                return x * a

            def setup_context(ctx, inputs, output):
                x, a = inputs
                ctx.a = a

            scale.register_autograd(lambda ctx, g: (g * ctx.a, None, None), setup_context=setup_context)
            """,
            line=9,
            message="3 positional parameters",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            def setup_context(ctx, inputs, output):
                x, out = inputs
                ctx.save_for_backward(x)

            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * x.cos()

            torch.library.register_autograd("demo::sin", backward, setup_context=setup_context)
            """,
            line=9,
            message="unpacks inputs into 2 names but demo::sin has 1 positional parameter",
        ),
    ]
