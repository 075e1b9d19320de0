"""AGL113: a fake kernel returns an input, or builds its output without dtype and device."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.flow import bound_names, return_statements
from autograd_lint.rules._custom_ops import registrations
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

# Factories whose result takes the default dtype and device unless told otherwise.
_FACTORIES = frozenset("empty zeros ones full rand randn".split())


class FakeOutputMetadata(Rule):
    """Reports, in a fake kernel, ``return x`` of a parameter, and a ``torch.empty(...)`` /
    ``zeros`` / ``ones`` / ``full`` / ``rand`` / ``randn`` call with neither ``dtype=`` nor
    ``device=`` (the output is then float32 on the CPU whatever the inputs are).
    ``torch.empty_like(x)`` and ``x.new_empty(shape)`` keep the input's dtype and device."""

    code = "AGL113"
    title = "fake kernel returns an input or output without dtype and device"
    severity = Severity.WARNING
    why = (
        "The compiled graph is built from the fake kernel's output metadata. `opcheck` fails in "
        "`test_faketensor`: `found mismatched tensor metadata: Dtypes torch.float64 and torch.float32` for a "
        "`torch.empty(x.shape)`, `found mismatch in outputs_alias_inputs check True != False` for `return x`; "
        "under torch.compile later ops are traced with the wrong dtype, device or aliasing."
    )

    def check_module(self, analysis, settings) -> Iterator[Report]:  # type: ignore[no-untyped-def]
        unit = analysis.custom_ops.unit if analysis.custom_ops else None
        for op, registration in registrations(analysis, "fake"):
            fake = registration.function
            if not isinstance(fake and fake.node, cst.FunctionDef):
                continue
            node = fake.node
            params = {p.name.value for p in node.params.params} - bound_names(node)
            for ret in return_statements(node):
                if isinstance(ret.value, cst.Name) and ret.value.value in params:
                    yield Report(
                        unit.position(ret),
                        f"fake kernel `{fake.name}` of {op.display} returns its input `{ret.value.value}`, while the "
                        "op's outputs may not alias inputs: opcheck test_faketensor fails; return "
                        f"torch.empty_like({ret.value.value})",
                    )
            for call in _factory_calls(node, analysis.imports):
                name = analysis.imports.resolve(_dotted(call.func) or "") or ""
                yield Report(
                    unit.position(call),
                    f"fake kernel `{fake.name}` of {op.display} builds an output with `{name.rsplit('.', 1)[-1]}(...)` "
                    "without dtype= or device=: always float32 on the CPU, whatever the inputs are; use "
                    "torch.empty_like / x.new_empty, or pass dtype= and device=",
                )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            @sin.register_fake
            def _(x):
                return torch.empty_like(x)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::rowsum", mutates_args=())
            def rowsum(x: Tensor) -> Tensor:
                return x.sum(1)

            @rowsum.register_fake
            def _(x):
                return torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::rowsum", mutates_args=())
            def rowsum(x: Tensor) -> Tensor:
                return x.sum(1)

            @rowsum.register_fake
            def _(x):
                x = x.new_empty(x.shape[0])
                return x
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::copy", mutates_args=())
            def copy(x: Tensor) -> Tensor:
                return x.clone()

            @copy.register_fake
            def _(x):
                return x
            """,
            line=10,
            message="returns its input `x`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::double", mutates_args=())
            def double(x: Tensor) -> Tensor:
                return x * 2

            @double.register_fake
            def _(x):
                return torch.empty(x.shape)
            """,
            message="`empty(...)` without dtype= or device=",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::rowsum", mutates_args=())
            def rowsum(x: Tensor) -> Tensor:
                return x.sum(1)

            @torch.library.register_fake("demo::rowsum")
            def _(x):
                out = torch.zeros(x.shape[0])
                return out
            """,
            message="`zeros(...)`",
        ),
    ]


def _dotted(node: cst.BaseExpression) -> str | None:
    from autograd_lint.model.exprs import dotted_name

    return dotted_name(node)


def _factory_calls(node: cst.FunctionDef, imports) -> list[cst.Call]:  # type: ignore[no-untyped-def]
    from autograd_lint.rules._custom_ops import calls_in

    found = []
    for call in calls_in(node):
        name = _dotted(call.func)
        qualified = imports.resolve(name) if name else None
        if qualified is None or qualified.rsplit(".", 1)[0] != "torch" or qualified.rsplit(".", 1)[1] not in _FACTORIES:
            continue
        keywords = {a.keyword.value for a in call.args if a.keyword is not None}
        if not keywords & {"dtype", "device", "out"} and not any(a.star == "**" for a in call.args):
            found.append(call)
    return found
