"""AGL106: a custom op returns one of its inputs, or a view of one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.flow import return_statements
from autograd_lint.rules._custom_ops import is_tensor_like_annotation, own_ops
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

# Tensor methods whose result is always a view of the receiver.
_VIEWS = frozenset(
    "view view_as t transpose permute narrow select squeeze unsqueeze expand expand_as as_strided "
    "diagonal detach unflatten movedim swapaxes swapdims unfold".split()
)


def _aliased(value: cst.BaseExpression, inputs: set[str]) -> tuple[str, str] | None:
    """(input, how) when ``value`` is an input (how: "itself") or a view of one (how: "a view (...)")."""
    if isinstance(value, cst.Name) and value.value in inputs:
        return value.value, "itself"
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _VIEWS:
        inner = _aliased(value.func.value, inputs)
        return (inner[0], f"a view (`.{value.func.attr.value}()`)") if inner else None
    if isinstance(value, cst.Attribute) and value.attr.value in ("T", "mT"):
        inner = _aliased(value.value, inputs)
        return (inner[0], f"a view (`.{value.attr.value}`)") if inner else None
    if isinstance(value, cst.Subscript) and all(_basic_index(e.slice) for e in value.slice):
        inner = _aliased(value.value, inputs)
        return (inner[0], "a view (basic indexing)") if inner else None
    return None


def _basic_index(index: cst.BaseSlice) -> bool:
    if isinstance(index, cst.Slice):
        return True
    value = index.value  # type: ignore[attr-defined]
    return isinstance(value, (cst.Integer, cst.Ellipsis)) or (isinstance(value, cst.Name) and value.value == "None")


class ReturnsInputAlias(Rule):
    """Reports a ``return`` in a ``custom_op`` function whose value (or an element of a
    returned tuple) is a Tensor parameter, or a view of one (``x.view(...)``, ``x.t()``,
    ``x[:n]``...), when the parameter is not rebound in the body."""

    code = "AGL106"
    title = "custom op returns an input or a view of one"
    severity = Severity.ERROR
    why = (
        "Outputs of a custom op may not alias its inputs; every call fails (torch 2.13, an op returning "
        "its input and one returning `x.view(-1)` alike): `RuntimeError: view (with "
        "implementation in ...): The output of this custom operator (1) must not also be an input to this "
        "custom operator and (2) may not alias any inputs to this custom operator or other returns.`"
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        unit = analysis.custom_ops.unit if analysis.custom_ops else None
        for op in own_ops(analysis):
            body = op.body
            if body is None or not isinstance(body.node, cst.FunctionDef) or op.tags:
                continue
            model = body.semantic
            if model is None:
                continue
            inputs = {p.name for p in op.params if is_tensor_like_annotation(p.annotation) and not model.is_rebound(p.name)}
            if not inputs:
                continue
            for ret in return_statements(body.node):
                values = [ret.value] if not isinstance(ret.value, cst.Tuple) else [e.value for e in ret.value.elements]
                for value in values:
                    found = _aliased(value, inputs) if value is not None else None
                    if found:
                        name, how = found
                        what = f"input `{name}` itself" if how == "itself" else f"{how} of input `{name}`"
                        yield Report(
                            unit.position(ret),
                            f"{op.display} returns {what}: RuntimeError on every call "
                            "(custom op outputs may not alias inputs); return a copy (`.clone()`)",
                        )
                        break

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::flat", mutates_args=())
            def flat(x: Tensor) -> Tensor:
                return x.view(-1).clone()
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::pick", mutates_args=())
            def pick(x: Tensor, index: Tensor) -> Tensor:
                return x[index]
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::relu", mutates_args=())
            def relu(x: Tensor) -> Tensor:
                x = x.clamp(min=0)
                return x
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::ident", mutates_args=())
            def ident(x: Tensor) -> Tensor:
                return x
            """,
            line=6,
            message="demo::ident returns input `x` itself: RuntimeError on every call",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::flat", mutates_args=())
            def flat(x: Tensor) -> Tensor:
                return x.view(-1)
            """,
            line=6,
            message="returns a view (`.view()`) of input `x`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::split", mutates_args=())
            def split(x: Tensor) -> tuple[Tensor, Tensor]:
                return x[:1].clone(), x[1:]
            """,
            line=6,
            message="returns a view (basic indexing) of input `x`",
        ),
    ]
