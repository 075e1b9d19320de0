"""AGL111: a fake kernel reads tensor data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.rules._custom_ops import calls_in, registrations, tensor_parameters
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

# Methods a FakeTensor cannot serve at all.
_FAILING = frozenset({"numpy", "data_ptr"})
# Methods that give data-dependent (unbacked) values: a graph break, an error under fullgraph/export.
_DATA_DEPENDENT = frozenset({"item", "tolist"})


class FakeReadsData(Rule):
    """Reports, in a function registered with ``register_fake``, a call of ``.numpy()`` or
    ``.data_ptr()`` (which fail on FakeTensors) or of ``.item()`` / ``.tolist()``, or
    ``int()`` / ``float()`` / ``bool()`` of a parameter (data-dependent values).  A fake
    kernel sees only shapes, dtypes and devices."""

    code = "AGL111"
    title = "fake kernel reads tensor data"
    severity = Severity.ERROR
    why = (
        "The fake kernel runs only under torch.compile / torch.export, on FakeTensors, which hold no data. "
        "`.numpy()` fails every compiled call: `TorchRuntimeError: ... got RuntimeError('.numpy() is not "
        "supported for tensor subclasses.')`. `.item()`, `.tolist()` and `int(x)` give data-dependent values: "
        "with `fullgraph=True` or export, `UserError: Could not extract specialized integer from "
        "data-dependent expression` (a warning-level finding: without fullgraph the call graph-breaks)."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        unit = analysis.custom_ops.unit if analysis.custom_ops else None
        for op, registration in registrations(analysis, "fake"):
            fake = registration.function
            if fake is None or fake.node is None:
                continue
            params = tensor_parameters(fake, op)
            for call in calls_in(fake.node):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in _FAILING | _DATA_DEPENDENT:
                    method = func.attr.value
                    failing = method in _FAILING
                    yield Report(
                        unit.position(call),
                        f"fake kernel `{fake.name}` of {op.display} calls `.{method}()`, which "
                        + (
                            "fails on FakeTensors: every torch.compile call of the op fails"
                            if failing
                            else "needs data a FakeTensor doesn't hold: a graph break, and an error under "
                            "fullgraph=True or torch.export"
                        ),
                        None if failing else Severity.WARNING,
                    )
                elif (
                    isinstance(func, cst.Name)
                    and func.value in ("int", "float", "bool")
                    and len(call.args) == 1
                    and isinstance(call.args[0].value, cst.Name)
                    and call.args[0].value.value in params
                ):
                    yield Report(
                        unit.position(call),
                        f"fake kernel `{fake.name}` of {op.display} calls `{func.value}()` on tensor "
                        f"`{call.args[0].value.value}`: a data-dependent value, an error under fullgraph=True or "
                        "torch.export",
                        Severity.WARNING,
                    )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::nonzero", mutates_args=())
            def nonzero(x: Tensor) -> Tensor:
                return x.nonzero()

            @nonzero.register_fake
            def _(x):
                n = torch.library.get_ctx().new_dynamic_size()
                return x.new_empty(n, x.dim(), dtype=torch.int64)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::repeat", mutates_args=())
            def repeat(x: Tensor, n: int) -> Tensor:
                return x.repeat(n)

            @repeat.register_fake
            def _(x, n):
                return x.new_empty(x.shape[0] * int(n))
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return torch.from_numpy(x.numpy()).sin()

            @sin.register_fake
            def _(x):
                return torch.empty_like(x)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::double", mutates_args=())
            def double(x: Tensor) -> Tensor:
                return x * 2

            @double.register_fake
            def _(x):
                n = x.numpy().shape[0]
                return x.new_empty(n)
            """,
            line=10,
            message="`.numpy()`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::head", mutates_args=())
            def head(x: Tensor) -> Tensor:
                return x[: int(x.sum().item()) % 2 + 1].clone()

            @torch.library.register_fake("demo::head")
            def _(x):
                n = int(x.sum().item())
                return x.new_empty(n)
            """,
            line=10,
            message="`.item()`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::top", mutates_args=())
            def top(x: Tensor, k: Tensor) -> Tensor:
                return x[: int(k)].clone()

            top.register_fake(lambda x, k: x.new_empty(int(k)))
            """,
            line=8,
            message="`int()` on tensor `k`",
        ),
    ]
