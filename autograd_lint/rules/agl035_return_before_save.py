"""AGL035: forward returns early on one path, before ``save_for_backward``."""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from autograd_lint.model import flow
from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.spec import MethodSpec
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

# Tests under which backward may never run on the early path, or that a flag on ctx
# tells backward about: left alone.
_GRAD_WORDS = re.compile(r"requires_grad|needs_input_grad|grad_enabled|no_grad|inference|training")


def _is_ctx_call(statement: cst.BaseStatement, ctx_name: str, api: str) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Expr)
        and isinstance(small.value, cst.Call)
        and dotted_name(small.value.func) == f"{ctx_name}.{api}"
        for small in statement.body
    )


def _unpacks_saved(statement: cst.BaseStatement, ctx_name: str) -> int | None:
    """How many tensors ``a, b = ctx.saved_tensors`` (or ``ctx.saved_tensors[i]``) expects."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    for small in statement.body:
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            continue
        value, target = small.value, small.targets[0].target
        if dotted_name(value) == f"{ctx_name}.saved_tensors" and isinstance(target, (cst.Tuple, cst.List)):
            if any(isinstance(e, cst.StarredElement) for e in target.elements):
                return None
            return len(target.elements)
        if (
            isinstance(value, cst.Subscript)
            and dotted_name(value.value) == f"{ctx_name}.saved_tensors"
            and len(value.slice) == 1
            and isinstance(value.slice[0].slice, cst.Index)
            and isinstance(value.slice[0].slice.value, cst.Integer)
        ):
            index = value.slice[0].slice.value.evaluated_value
            return index + 1 if isinstance(index, int) else None
    return None


class _Returns(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[cst.Return] = []

    def visit_Return(self, node: cst.Return) -> None:
        self.found.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def _returns_in(statement: cst.CSTNode) -> list[cst.Return]:
    visitor = _Returns()
    statement.visit(visitor)
    return visitor.found


class ReturnBeforeSave(Rule):
    """Reports a ``return`` inside a top-level ``if`` of forward (combined style) that
    comes before forward's top-level ``ctx.save_for_backward(...)``, when backward
    unpacks ``ctx.saved_tensors`` into a fixed number of names at its top level before
    any branch.  On that path nothing is saved, and backward's unpacking fails.  Left
    alone: an early path that sets anything on ctx (a flag backward may test) or marks
    its output non-differentiable, and one whose test or body is about grad mode,
    inference mode or ``requires_grad`` (backward may never run on that path: fla's
    ``if return_intermediate_states: assert torch.is_inference_mode_enabled()``)."""

    code = "AGL035"
    title = "forward returns early, before save_for_backward, and backward unpacks saved_tensors"
    severity = Severity.ERROR
    why = (
        "Measured on torch 2.13 (bench/recreate/issue23_messages.py): a forward that returns "
        "`x.clone()` for an empty input before `ctx.save_for_backward(x, w)`, with a backward that "
        "unpacks `x, w = ctx.saved_tensors`: backward on the empty input raises `ValueError: not enough "
        "values to unpack (expected 2, got 0)`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        forward, backward = function.method("forward"), function.method("backward")
        if (
            forward is None or backward is None or forward.node is None or backward.node is None
            or function.is_split_style is not False or not ctx.own(forward)
            or ctx.unit(forward) is None or ctx.unit(backward) is None
        ):
            return
        fctx, bctx = forward.ctx_name, backward.ctx_name
        if fctx is None or bctx is None:
            return
        expected = self._unpacking(backward, bctx)
        if expected is None:
            return
        body = list(flow.method_body(forward.node))
        saves = [i for i, statement in enumerate(body) if _is_ctx_call(statement, fctx, "save_for_backward")]
        if not saves:
            return
        unit = ctx.unit(forward)
        for statement in body[: saves[0]]:
            if not isinstance(statement, cst.If):
                continue
            code = unit.code(statement)  # type: ignore[union-attr]
            if _GRAD_WORDS.search(code) or re.search(rf"\b{re.escape(fctx)}\b", code):
                continue  # backward may not run there (`assert torch.is_inference_mode_enabled()`), or ctx tells it
            returns = [r for r in _returns_in(statement) if r.value is not None]
            if not returns:
                continue
            line = ctx.position(forward, body[saves[0]]).line
            yield Report(
                ctx.position(forward, returns[0]),
                f"{function.name}.forward returns here before ctx.save_for_backward (line {line}): on this "
                f"path nothing is saved, and backward's unpacking of {expected} saved tensor"
                f"{'s' if expected != 1 else ''} raises `ValueError: not enough values to unpack` "
                "(save on this path too, or tell backward with a ctx flag)",
            )
            return

    @staticmethod
    def _unpacking(backward: MethodSpec, ctx_name: str) -> int | None:
        """The count backward's top-level unpacking of saved_tensors expects, before any branch."""
        assert backward.node is not None
        for statement in flow.method_body(backward.node):
            found = _unpacks_saved(statement, ctx_name)
            if found is not None:
                return found
            if not isinstance(statement, cst.SimpleStatementLine):
                return None  # a branch first: it may test what forward did
        return None

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    if x.numel() == 0:
                        return x.clone()
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    return grad * w, grad * x
            """
        ),
        # The early path tells backward with a flag.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    if x.numel() == 0:
                        ctx.empty = True
                        return x.clone()
                    ctx.empty = False
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    if ctx.empty:
                        return grad, None
                    x, w = ctx.saved_tensors
                    return grad * w, grad * x
            """
        ),
        # The early path only runs in inference mode (fla's intermediate states).
        Valid(
            """
            import torch

            class Chunk(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, k, return_states):
                    o, h = q * k, q + k
                    if return_states:
                        assert torch.is_inference_mode_enabled()
                        return o, h
                    ctx.save_for_backward(q, k)
                    return o

                @staticmethod
                def backward(ctx, do):
                    q, k = ctx.saved_tensors
                    return do * k, do * q, None
            """
        ),
        # Backward may never run on the early path.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    if not (x.requires_grad or w.requires_grad):
                        return x * w
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    return grad * w, grad * x
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    if x.numel() == 0:
                        return x.clone()
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    return grad * w, grad * x
            """,
            line=7,
            message="Mul.forward returns here before ctx.save_for_backward (line 8): on this path nothing is "
            "saved, and backward's unpacking of 2 saved tensors raises `ValueError: not enough values to unpack`",
        ),
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, scale):
                    if scale == 1.0:
                        return x.clone()
                    y = x * scale
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    y = ctx.saved_tensors[0]
                    return grad * y, None
            """,
            line=7,
            message="backward's unpacking of 1 saved tensor raises",
        ),
        Invalid(
            """
            import torch

            class Norm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, eps):
                    if x.dim() == 0:
                        return x / (x.abs() + eps)
                    norm = x.norm(dim=-1, keepdim=True)
                    ctx.save_for_backward(x, norm)
                    return x / (norm + eps)

                @staticmethod
                def backward(ctx, grad):
                    (x, norm) = ctx.saved_tensors
                    return grad / norm, None
            """,
            line=7,
            message="Norm.forward returns here before ctx.save_for_backward (line 9)",
        ),
    ]
