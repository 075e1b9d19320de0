"""AGL104: a custom op writes to a parameter that ``mutates_args`` does not name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.semantic import How, InplaceWrite, MethodModel
from autograd_lint.rules._custom_ops import is_tensor_annotation, is_tensor_like_annotation, own_ops
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class UndeclaredMutation(Rule):
    """Reports an in-place write (``p.add_()``, ``p.copy_(...)``, ``p[...] = ...``, ``out=p``,
    ``torch.foo_(p)``) to a Tensor parameter of a ``custom_op`` function, or of a kernel
    registered on it, when ``mutates_args`` does not name that parameter.  A write is
    reported where the semantic model's in-place writes say it certainly writes the
    parameter's object (``+=`` only on a tensor, as for every rule): not after the parameter
    is rebound (``p = p.clone()``), nor where another value may reach the name."""

    code = "AGL104"
    title = "custom op mutates a parameter missing from mutates_args"
    severity = Severity.WARNING
    why = (
        "`mutates_args` \"MUST be accurate, otherwise, the behavior is undefined\": eager is right, but "
        "`torch.compile` (aot_eager and inductor alike) may drop or reorder the call when the op returns "
        "nothing or its result is unused, and the mutated tensor silently keeps its old value. "
        "`torch.library.opcheck` fails in `test_schema` with `Argument out is not defined as mutable but was "
        "mutated`."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        unit = analysis.custom_ops.unit if analysis.custom_ops else None
        for op in own_ops(analysis):
            if not isinstance(op.mutates_args, tuple):
                continue
            undeclared = {p.name for p in op.params if is_tensor_like_annotation(p.annotation)} - set(op.mutates_args)
            if not undeclared:
                continue
            bodies = [op.body] + [r.function.method for r in op.registered("kernel") if r.function]
            for body in bodies:
                if body is None or not isinstance(body.node, cst.FunctionDef) or body.path != op.path:
                    continue
                if body.semantic is None:
                    continue
                tracked = undeclared
                tensors = {p.name for p in op.params if is_tensor_annotation(p.annotation)}
                if body is not op.body:  # a kernel's parameters are the op's, by position
                    names = [p.name for p in body.positional]
                    tracked = {names[i] for i, p in enumerate(op.positional) if i < len(names) and p.name in undeclared}
                    tensors = {names[i] for i, p in enumerate(op.positional) if i < len(names) and p.name in tensors}
                for write, name in _parameter_writes(body.semantic, tracked, tensors):
                    parameter = name if body is op.body else op.positional[[p.name for p in body.positional].index(name)].name
                    yield Report(
                        unit.position(write.node),
                        f"{op.display} writes to `{parameter}` in place ({write.how}) but mutates_args="
                        f"{_shown(op.mutates_args)} does not name it: silently wrong under torch.compile when the "
                        f"call's result is unused; add \"{parameter}\" to mutates_args",
                    )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin_out", mutates_args=("out",))
            def sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::relu", mutates_args=())
            def relu(x: Tensor) -> Tensor:
                x = x.clone()
                x.clamp_(min=0)
                return x
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::fill", mutates_args="unknown")
            def fill(x: Tensor, value: float) -> None:
                x.fill_(value)
            """
        ),
        # Copying a tensor onto itself changes nothing; code after `return` never runs.
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::same", mutates_args=())
            def same(x: Tensor) -> None:
                x.copy_(x)
                return
                x.zero_()
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin_out", mutates_args=())
            def sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())
            """,
            line=6,
            message="writes to `out` in place (copy_())",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::update", mutates_args=("cache",))
            def update(cache: Tensor, index: Tensor, values: Tensor) -> None:
                cache[index] = values
                index += 1
            """,
            line=7,
            message="`index`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::add_into", mutates_args=())
            def add_into(x: Tensor, y: Tensor, out: Tensor) -> None:
                torch.add(x, y, out=out)
            """,
            line=6,
            message="out=",
        ),
        # A kernel's parameters are the op's: `+=` on one the op declares a Tensor writes it.
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::bump", mutates_args=())
            def bump(x: Tensor, out: Tensor) -> None:
                out.copy_(x)

            @bump.register_kernel("cpu")
            def _(x, out):
                out += 1
            """,
            line=10,
            message="writes to `out` in place (AddAssign)",
        ),
    ]


def _parameter_writes(
    model: MethodModel, names: set[str], tensors: set[str]
) -> Iterator[tuple[InplaceWrite, str]]:
    """The in-place writes of the body that certainly write the object of one of the parameters
    ``names`` (the write's only origin is that parameter), each once, with the parameter's name.
    ``t.copy_(t)`` and ``clear()`` (of a container) change no tensor data.

    The model counts ``p += ...`` as in place only where it knows ``p`` is a tensor; a
    kernel's parameters often carry no annotation, but the op's schema says which are one
    tensor (``tensors``), so ``+=`` on those counts too.
    """
    seen: set[int] = set()
    for write in model.inplace_writes:
        if write.self_copy or write.how == "clear()" or len(write.origins) != 1 or id(write.node) in seen:
            continue
        (origin,) = write.origins
        if origin.how is How.PARAMETER and origin.name in names:
            seen.add(id(write.node))
            yield write, origin.name
    for binding in model.all_bindings():
        site = binding.site
        if binding.how is not How.AUGMENTED or binding.name not in names & tensors or id(site) in seen:
            continue
        if not isinstance(site, cst.AugAssign) or not isinstance(site.target, cst.Name):
            continue
        origins = model.origins(site.target)
        if len(origins) == 1 and next(iter(origins)) is model.params.get(binding.name):
            seen.add(id(site))
            yield InplaceWrite(site, site.operator.__class__.__name__, site.target, origins), binding.name


def _shown(names: tuple[str, ...]) -> str:
    return "(" + ", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else "") + ")"
