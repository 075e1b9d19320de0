"""AGL113: a fake kernel returns an input, or builds its output without dtype and device."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.flow import return_statements
from autograd_lint.model.semantic import How, MethodModel
from autograd_lint.rules._custom_ops import calls_in, registrations
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

# Factories whose result takes the default dtype and device unless told otherwise.
_FACTORIES = frozenset("empty zeros ones full rand randn".split())


class FakeOutputMetadata(Rule):
    """Reports, in a fake kernel, ``return x`` of a parameter, and a ``torch.empty(...)`` /
    ``zeros`` / ``ones`` / ``full`` / ``rand`` / ``randn`` call whose shape comes from a
    parameter (``x.shape``, ``x.size(0)``) but which has neither ``dtype=`` nor ``device=``
    (the output is then float32 on the CPU whatever the inputs are).  A constant shape
    (``torch.empty(0)``, a placeholder a C++ kernel may return as well) is not reported.
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

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        unit = analysis.custom_ops.unit if analysis.custom_ops else None
        for op, registration in registrations(analysis, "fake"):
            fake = registration.function
            if not isinstance(fake and fake.node, cst.FunctionDef):
                continue
            node = fake.node
            model = fake.method.semantic if fake.method is not None else None
            if model is None:
                continue
            if model.node is not node:
                continue
            positional = {p.name.value for p in node.params.params}
            for ret in return_statements(node):
                # The semantic model: the returned name holds the parameter itself on every path there.
                if isinstance(ret.value, cst.Name) and model.parameter_of(ret.value) in positional:
                    yield Report(
                        unit.position(ret),
                        f"fake kernel `{fake.name}` of {op.display} returns its input `{ret.value.value}`, while the "
                        "op's outputs may not alias inputs: opcheck test_faketensor fails; return "
                        f"torch.empty_like({ret.value.value})",
                    )
            for call in _factory_calls(node, analysis.imports, model):
                name = analysis.imports.resolve(dotted_name(call.func) or "") or ""
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
        # A constant placeholder, as the CUDA kernel of sageattention returns `torch::empty({0})` too.
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::attn", mutates_args=())
            def attn(q: Tensor, return_lse: bool) -> Tensor:
                return torch.ops.demo_cuda.attn(q, return_lse)

            @attn.register_fake
            def _(q, return_lse):
                if return_lse:
                    return torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
                return torch.empty((0))
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
            line=10,
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
            line=10,
            message="`zeros(...)`",
        ),
    ]


def _mentions(node: cst.CSTNode, model: MethodModel) -> bool:
    """Whether ``node`` uses a name that a parameter's binding reaches (the semantic model's
    reaching bindings; ``x.shape`` after ``x = ...`` in every path does not count)."""

    class _Find(cst.CSTVisitor):
        found = False

        def visit_Name(self, name: cst.Name) -> None:
            self.found |= any(b.how is How.PARAMETER for b in model.reaching(name))

    finder = _Find()
    traverse.visit(node, finder)
    return finder.found


def _factory_calls(node: cst.FunctionDef, imports, model: MethodModel) -> list[cst.Call]:  # type: ignore[no-untyped-def]
    """Factory calls whose shape comes from a parameter (``torch.empty(x.shape)``) but whose dtype
    and device don't: a constant placeholder (``torch.empty(0)``) may match a kernel that
    returns one too, so it is left alone."""
    found = []
    for call in calls_in(node):
        name = dotted_name(call.func)
        qualified = imports.resolve(name) if name else None
        if qualified is None or qualified.rsplit(".", 1)[0] != "torch" or qualified.rsplit(".", 1)[1] not in _FACTORIES:
            continue
        keywords = {a.keyword.value for a in call.args if a.keyword is not None}
        if keywords & {"dtype", "device", "out"} or any(a.star == "**" for a in call.args):
            continue
        if any(a.keyword is None and _mentions(a.value, model) for a in call.args):
            found.append(call)
    return found
