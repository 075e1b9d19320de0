"""The input cases a generated test names: :class:`Case` and the helpers that build its arguments.

A case's arguments are gen-tests' own input types (:mod:`autograd_lint.gentests.inputs`),
one definition for both halves: the command writes them as source text
(``tensor((3, 4))``, ``any_tensor()``, ``any_scalar()``) and the generated test
evaluates that text into the same :class:`TensorInput` and :class:`ScalarInput`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

# The recorded group, as gen-tests read it from the recording, is what a generated case names.
from autograd_lint.gentests.inputs import ProcessGroupInput as RecordedProcessGroup
from autograd_lint.gentests.inputs import ScalarInput, TensorInput


@dataclass(frozen=True)
class Case:
    """One input case: the positional arguments of ``apply``, tensors as :class:`TensorInput`.

    A recorded call with objects among its arguments has ``pickled`` instead (see :func:`recorded`).
    """

    args: tuple[Any, ...]
    pickled: str | None = None
    with_function: bool = False
    # Value domains to try first (evidence in forward, see :mod:`autograd_lint.gentests.domains`), by name.
    domains: tuple[str, ...] = ()
    process_group: RecordedProcessGroup | None = None
    # A recorded case's positions whose tensors never require grad: backward never differentiates them.
    no_grad: tuple[int, ...] = ()


def recorded(*chunks: str, function: bool = False, process_group: RecordedProcessGroup | None = None,
             no_grad: tuple[int, ...] = ()) -> Case:
    """A recorded call whose arguments were pickled whole (objects, callables, sparse tensors).

    Every call of the case unpickles them afresh: floating tensors in float64,
    each tensor once even where objects share it, so that gradcheck's perturbation
    of an argument reaches the objects holding it.  The top-level floating tensors
    require grad as recorded (all of them if none did); sparse ones never do.
    With ``function``, the pickle starts with the Function class: one defined inside
    a function, which :func:`recorded_function` gives the test.  The tensors at
    ``no_grad`` never require grad (every ``return`` of backward gives them ``None``).
    """
    return Case((), "".join(chunks), function, process_group=process_group, no_grad=no_grad)


_recorded_functions: dict[str, Any] = {}


class OnClones:
    """A Function whose ``apply`` gets clones of its tensor arguments; everything else is the Function's."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def apply(self, *args: Any) -> Any:
        return self.function.apply(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.function, name)


_on_clones: dict[Any, OnClones] = {}


def in_place(function: Any) -> Any:
    """``function``, a Function that modifies an input in place (``ctx.mark_dirty``), called on clones.

    As torch's own OpInfos call one (``NumpyExp_.apply(x.clone())``): autograd
    refuses to modify a leaf that requires grad, and gradcheck's finite
    differences need the inputs unchanged from one call to the next.  Gradients
    flow through the clone to the input.
    """
    if function not in _on_clones:
        _on_clones[function] = OnClones(function)
    return _on_clones[function]


def recorded_function(case: Case) -> Any:
    """The Function class pickled with a recorded case (a class defined inside a function)."""
    from autograd_lint.gentests import pickled

    if not case.with_function or case.pickled is None:
        raise ValueError("the case was not recorded with its Function class")
    if case.pickled not in _recorded_functions:
        _recorded_functions[case.pickled] = pickled.loads(case.pickled)[0]
    return _recorded_functions[case.pickled]


def tensor(
    shape: Sequence[int], dtype: str = "float64", device: str = "cpu", requires_grad: bool = True,
    contiguous: bool = True, values: Sequence[float | int | bool | str] | None = None,
    stats: dict[str, float | bool] | None = None,
) -> TensorInput:
    """A tensor argument of a known shape, with its recorded values or statistics if any.

    ``values`` are the flattened elements (``"nan"``, ``"inf"``, ``"-inf"`` as
    strings); ``stats`` describe a tensor too large to record: ``min``, ``max``,
    ``integral``, ``symmetric``, ``positive_definite``, ``simplex``.
    """
    return TensorInput(tuple(shape), dtype, device, requires_grad, contiguous,
                       tuple(values) if values is not None else None,
                       tuple(sorted(stats.items())) if stats else None)


def any_scalar() -> ScalarInput:
    """A number argument whose value is searched for at run time."""
    return ScalarInput()


def any_tensor(dtype: str = "float64", requires_grad: bool = True, rank: int | None = None,
               sizes: tuple[tuple[int, int], ...] = ()) -> TensorInput:
    """A tensor argument whose shape is searched for at run time (with at least ``rank`` dimensions first,
    and the size of each (dim, size) pair in ``sizes`` wherever it has that dimension)."""
    return TensorInput(None, dtype, "cpu", requires_grad, rank=rank, sizes=tuple(sizes))
