"""AGL027: a deprecated ctx API (``ctx.saved_variables``, ``ctx.mark_shared_storage``)."""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from autograd_lint.rules._common import takes_ctx
from autograd_lint.rules.base import FixSafety, Fixer, FunctionContext, Invalid, Report, Rule, Severity, Valid


class _Fix(Fixer):
    """Renames a reported ``ctx.saved_variables`` to ``ctx.saved_tensors`` and deletes a
    reported ``ctx.mark_shared_storage(...)`` statement (a no-op in torch 2.13 apart
    from the warning).  A call used as a value (``y = ctx.mark_shared_storage(...)``)
    is left alone; a block left empty gets ``pass``; comment lines above a deleted
    statement are kept."""

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        if original_node.attr.value == "saved_variables" and self.reported(original_node):
            return updated_node.with_changes(attr=cst.Name("saved_tensors"))
        return updated_node

    def _deleted(self, statement: cst.BaseSmallStatement) -> bool:
        return (
            isinstance(statement, cst.Expr)
            and isinstance(statement.value, cst.Call)
            and isinstance(statement.value.func, cst.Attribute)
            and statement.value.func.attr.value == "mark_shared_storage"
            and self.reported(statement.value)
        )

    def _kept(
        self, original: Sequence[cst.BaseSmallStatement], updated: Sequence[cst.BaseSmallStatement]
    ) -> list[cst.BaseSmallStatement]:
        kept = [new for old, new in zip(original, updated) if not self._deleted(old)]
        if kept and len(kept) < len(updated):
            kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return kept

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []  # comment lines above deleted statements
        for old, new in zip(original_node.body, updated_node.body):
            if isinstance(old, cst.SimpleStatementLine) and isinstance(new, cst.SimpleStatementLine):
                kept = self._kept(old.body, new.body)
                if not kept:
                    carried.extend(new.leading_lines)
                    continue
                new = new.with_changes(body=kept)
            if carried:
                new = new.with_changes(leading_lines=[*carried, *new.leading_lines])
                carried = []
            body.append(new)
        if not body:
            body.append(cst.SimpleStatementLine([cst.Pass()], leading_lines=carried))
            carried = []
        return updated_node.with_changes(body=body, footer=[*carried, *updated_node.footer])

    def leave_SimpleStatementSuite(
        self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite
    ) -> cst.SimpleStatementSuite:
        kept = self._kept(original_node.body, updated_node.body)
        return updated_node.with_changes(body=kept or [cst.Pass()])


class DeprecatedCtxApi(Rule):
    """Reports loads of ``ctx.saved_variables`` (use ``ctx.saved_tensors``) and calls to
    ``ctx.mark_shared_storage(...)`` (delete them: shared storage is tracked
    automatically).  ctx is the first positional parameter, whatever its name, of
    ``setup_context``, ``backward``, ``vjp``, ``jvp``, and of ``forward`` when the class
    does not override ``setup_context``."""

    code = "AGL027"
    title = "deprecated ctx API"
    severity = Severity.INFO
    fix = FixSafety.SAFE
    fixer = _Fix
    why = (
        "`DeprecationWarning: 'saved_variables' is deprecated; use 'saved_tensors'`; "
        "``FutureWarning: `mark_shared_storage` is deprecated. Tensors with shared storages "
        "are automatically tracked. Note that calls to `set_()` are not tracked``."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for name, method in function.methods.items():
            if not takes_ctx(function, name):
                continue
            for read in method.reads("saved_variables"):
                yield Report(
                    read.position,
                    f"{function.name}.{name} reads ctx.saved_variables, which is deprecated; "
                    "use ctx.saved_tensors",
                )
            for call in method.calls("mark_shared_storage"):
                yield Report(
                    call.position,
                    f"{function.name}.{name} calls ctx.mark_shared_storage(), which is "
                    "deprecated and does nothing (shared storage is tracked automatically); "
                    "delete the call",
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
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """
        ),
        # Trap 9: ctx found by position; a same-named attribute of something else is not ctx.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(self, a, b):
                    self.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(self, grad, state=None):
                    a, b = self.saved_tensors
                    legacy = state.saved_variables if state is not None else None
                    return grad * b, grad * a
            """
        ),
        # Split style: forward's first parameter is an input, not ctx.
        Valid(
            """
            import torch

            class Take(torch.autograd.Function):
                @staticmethod
                def forward(record, index):
                    return record.saved_variables[index]

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad):
                    return None, None
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
                def backward(ctx, grad):
                    a, b = ctx.saved_variables
                    return grad * b, grad * a
            """,
            line=11,
            message="Mul.backward reads ctx.saved_variables, which is deprecated",
            fixed="""
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """,
        ),
        Invalid(
            """
            from torch.autograd import Function

            class View(Function):
                @staticmethod
                def forward(self, x):
                    y = x.view(-1)
                    self.mark_shared_storage((x, y))
                    return y

                @staticmethod
                def backward(self, grad):
                    return grad
            """,
            line=7,
            message="View.forward calls ctx.mark_shared_storage()",
            fixed="""
            from torch.autograd import Function

            class View(Function):
                @staticmethod
                def forward(self, x):
                    y = x.view(-1)
                    return y

                @staticmethod
                def backward(self, grad):
                    return grad
            """,
        ),
        Invalid(
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
                def jvp(ctx, tangent):
                    (y,) = ctx.saved_variables
                    return tangent * y
            """,
            line=14,
            message="Exp.jvp reads ctx.saved_variables",
            fixed="""
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.exp()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(output)

                @staticmethod
                def jvp(ctx, tangent):
                    (y,) = ctx.saved_tensors
                    return tangent * y
            """,
        ),
        # The fix keeps the comment above a deleted call and puts `pass` in an emptied block.
        Invalid(
            """
            import torch

            class Alias(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.clone()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    # input and output share storage
                    ctx.mark_shared_storage((inputs[0], output))

                @staticmethod
                def backward(ctx, grad): ctx.mark_shared_storage((grad, grad)); return grad
            """,
            line=11,
            message="Alias.setup_context calls ctx.mark_shared_storage()",
            fixed="""
            import torch

            class Alias(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.clone()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    # input and output share storage
                    pass

                @staticmethod
                def backward(ctx, grad): return grad
            """,
        ),
    ]
