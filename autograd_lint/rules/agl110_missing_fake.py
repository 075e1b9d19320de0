"""AGL110: a custom op has no fake kernel anywhere in the run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from autograd_lint.rules._custom_ops import module_of
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class MissingFake(Rule):
    """Reports a ``custom_op`` that no file of the run registers a fake kernel for
    (``@op.register_fake``, ``torch.library.register_fake("ns::name")``,
    ``impl_abstract``).  Only ``autograd-lint check`` decides this, once every file is
    read; under flake8 (one file at a time) the rule is silent.  It is also silent when
    some registration's op can't be named statically, for ``triton_op`` (traced through),
    and for an op that mutates arguments and returns ``None`` (PyTorch generates its fake)."""

    code = "AGL110"
    title = "custom op has no register_fake"
    severity = Severity.WARNING
    why = (
        "torch.compile and torch.export run ops on FakeTensors; without a fake kernel every compiled call "
        "fails: `TorchRuntimeError: RuntimeError when making fake tensor call ... There was no fake impl "
        "registered for <CustomOpDef(ns::op)>. This is necessary for torch.compile/export/fx tracing to "
        "work.` Eager calls work."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        module = module_of(analysis)
        if module is None or not module.whole_run or module.has_unresolved_registration:
            return
        fakes = {target for kind, target in module.run_targets if kind == "fake"}
        for op in module.ops:
            if op.factory != "custom_op" or op.registered("fake") or op.has_generated_fake:
                continue
            # A re-export (`from pkg import op`) names the op by another module path.
            if any(t in op.keys or t.rsplit(".", 1)[-1] == op.python_name for t in fakes):
                continue
            yield Report(
                op.position,
                f"no register_fake for {op.display} in the analysed files: every torch.compile or torch.export "
                "call of it fails ('There was no fake impl registered'); register one with "
                f"@{op.python_name}.register_fake",
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

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            @torch.library.register_fake("demo::sin")
            def _(x):
                return torch.empty_like(x)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin_out", mutates_args=("out",))
            def sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())
            """
        ),
    ]
    # The rule needs the whole run: these examples are checked by `autograd-lint check`
    # in tests/rules/test_custom_op_rules.py, not by flake8.
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()
            """,
            line=5,
            message="no register_fake for demo::sin",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            @torch.library.register_fake("demo::cos")
            def _(x):
                return torch.empty_like(x)
            """,
            line=5,
            message="demo::sin",
        ),
        Invalid(
            """
            from torch import Tensor
            from torch.library import custom_op

            def _mul(x: Tensor, w: Tensor) -> Tensor:
                return x * w

            mul = custom_op("demo::mul", _mul, mutates_args=())
            mul.register_autograd(lambda ctx, g: (None, None))
            """,
            line=7,
            message="@mul.register_fake",
        ),
    ]
