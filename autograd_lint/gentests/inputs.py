"""Input cases of a Function, and the order in which their sources are preferred.

An input case is the structure of the positional arguments of one ``apply`` call:
tensors by shape, dtype, device and ``requires_grad``, other arguments as the
Python source of a literal.  Cases come from, in this order of preference:

1. **recorded**: ``pytest --autograd-record`` (see :mod:`.recording`);
2. **static**: literal ``apply`` call sites (see :mod:`.callsites`), then
   shape-annotated parameters (``Float[Tensor, "batch features"]``) with literal
   defaults for the others;
3. **search**: tensors of unknown shape, searched for at run time by the
   generated test; the other arguments from their defaults or annotations;
4. **none**: the test is generated as skipped.

Nothing here imports torch.
"""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import dataclass, replace
from typing import Mapping

from autograd_lint.gentests.param_uses import INTEGER, TENSOR
from autograd_lint.model.spec import FunctionSpec, Kind, Param


class Origin(enum.Enum):
    """Where the input cases of a Function come from."""

    RECORDED = "recorded"
    STATIC = "static"
    SEARCH = "search"
    NONE = "none"


@dataclass(frozen=True)
class TensorInput:
    """A tensor argument; ``shape`` is ``None`` when the generated test searches for it."""

    shape: tuple[int, ...] | None
    dtype: str = "float64"
    device: str = "cpu"
    requires_grad: bool = True
    contiguous: bool = True
    # Recorded elements (flattened; "nan"/"inf"/"-inf" as strings), or, for a larger
    # tensor, recorded statistics as sorted (name, value) pairs: see :mod:`.recording`.
    values: tuple[float | int | bool | str, ...] | None = None
    stats: tuple[tuple[str, float | bool], ...] | None = None
    # A recorded tensor subclass (``module.Qualname``, e.g. a MaskedTensor; a ragged size is -1 in ``shape``):
    # only a pickled case has one.
    subclass: str | None = None
    # A searched tensor's least number of dimensions, from forward's use of it (:func:`.param_uses.parameter_ranks`).
    rank: int | None = None
    # (dim, size) pairs a searched tensor's dimensions must have (:func:`.param_uses.parameter_sizes`).
    sizes: tuple[tuple[int, int], ...] = ()

    @property
    def is_differentiable(self) -> bool:
        return self.dtype.startswith(("float", "complex", "bfloat"))


@dataclass(frozen=True)
class ValueInput:
    """A non-tensor argument, as the source text of a literal (dtypes spelt ``torch.X``)."""

    source: str


@dataclass(frozen=True)
class ScalarInput:
    """A non-tensor argument of unknown type: the generated test searches for a number."""


@dataclass(frozen=True)
class ObjectInput:
    """A recorded argument that is neither a tensor nor a literal, by its type's qualified name.

    Only a recorded case has one, and the case carries the pickle of its arguments.
    """

    type_name: str


Input = TensorInput | ValueInput | ScalarInput | ObjectInput


@dataclass(frozen=True)
class ProcessGroupInput:
    """The default process group (``torch.distributed``) a recorded call was made under.

    A collective in forward or backward needs one; the replay runs the case under a
    single-process group, which reproduces the call only when it was made in a
    world of one process.  ``mesh_device``/``mesh_shape`` describe the device mesh
    an argument held (a ``DeviceMesh``, or a ``DTensor``'s), if any.
    """

    backend: str
    world_size: int
    rank: int = 0
    mesh_device: str | None = None
    mesh_shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class InputCase:
    """The arguments of one ``apply`` call."""

    args: tuple[Input, ...]
    # The recorded arguments, pickled (see :mod:`.pickled`): the replay uses them, ``args`` label the case.
    pickled: str | None = None
    # ``pickled`` starts with the Function class (one defined inside a function).
    with_function: bool = False
    # The process group the call was recorded under, if any.
    process_group: ProcessGroupInput | None = None
    # A pickled case's positions whose tensors must not require grad (backward never differentiates them).
    no_grad: tuple[int, ...] = ()

    @property
    def has_non_tensor(self) -> bool:
        return any(isinstance(arg, (ValueInput, ScalarInput, ObjectInput)) for arg in self.args)

    @property
    def devices(self) -> tuple[str, ...]:
        """The non-CPU devices the case needs (its tensors', its device mesh's), sorted."""
        devices = {a.device for a in self.args if isinstance(a, TensorInput)}
        if self.process_group is not None and self.process_group.mesh_device is not None:
            devices.add(self.process_group.mesh_device)
        return tuple(sorted(devices - {"cpu"}))


@dataclass(frozen=True)
class FunctionInputs:
    """The input cases chosen for one Function, with their origin.

    ``reason`` says why there are no cases when ``origin`` is :attr:`Origin.NONE`.
    """

    origin: Origin
    cases: tuple[InputCase, ...]
    reason: str | None = None


MAX_CASES = 3

# Checks run in float64 (gradcheck's finite differences need it); other dtypes
# (indices, masks) are kept as they are.
_PROMOTED_DTYPES = {
    "float16": "float64", "bfloat16": "float64", "float32": "float64", "float64": "float64",
    "complex32": "complex128", "complex64": "complex128", "complex128": "complex128",
}


def normalise_case(args: tuple[Input, ...], pickled: str | None = None, with_function: bool = False,
                   process_group: ProcessGroupInput | None = None) -> InputCase:
    """The case as checks run it: float64, and every float input requiring grad if none did.

    A call where no input requires grad (an inference-only test, or a literal call
    site) says nothing about which inputs are differentiated, so all are.
    """
    tensors = [a for a in args if isinstance(a, TensorInput) and a.is_differentiable]
    any_requires_grad = any(t.requires_grad for t in tensors)
    normalised: list[Input] = []
    for arg in args:
        if isinstance(arg, TensorInput):
            dtype = _PROMOTED_DTYPES.get(arg.dtype, arg.dtype)
            requires_grad = arg.is_differentiable and (arg.requires_grad or not any_requires_grad)
            arg = replace(arg, dtype=dtype, requires_grad=requires_grad)
        normalised.append(arg)
    return InputCase(tuple(normalised), pickled, with_function, process_group)


def distinct(cases: list[InputCase], limit: int = MAX_CASES) -> tuple[InputCase, ...]:
    """The first ``limit`` distinct cases, in order."""
    kept: list[InputCase] = []
    for case in cases:
        if case not in kept:
            kept.append(case)
    return tuple(kept[:limit])


# ---------------------------------------------------------------------------
# Parameters: annotations and defaults

_JAXTYPING = re.compile(
    r"^(?:\w+\.)*(?P<kind>Float|Int|UInt|Bool|Shaped|Num|Real|Inexact|Complex)\d*\[\s*"
    r"(?:torch\.)?Tensor\s*,\s*(?P<quote>['\"])(?P<dims>.*)(?P=quote)\s*\]$"
)
_JAXTYPING_DTYPES = {"Int": "int64", "UInt": "uint8", "Bool": "bool", "Complex": "complex128"}
# Sizes given to named dimensions in order of first appearance: distinct, so that a
# transposed gradient has the wrong shape instead of passing by accident.
_DIMENSION_SIZES = (3, 4, 5, 6, 7, 2, 8, 9, 10, 11)
_BATCH_SIZE = 2
# Values given to parameters annotated with a scalar type and no default.
_SCALAR_GUESSES = {"int": "1", "float": "0.5", "bool": "False", "complex": "0.5j"}


def _strip_optional(annotation: str) -> str:
    text = annotation.strip().strip("'\"")
    match = re.fullmatch(r"(?:typing\.)?Optional\[(.*)\]", text)
    if match:
        return match.group(1).strip()
    parts = [part.strip() for part in text.split("|")]
    return " | ".join(part for part in parts if part != "None")


def is_tensor_annotation(annotation: str | None) -> bool:
    """Whether an annotation names a tensor (``Tensor``, ``torch.Tensor``, ``Float[Tensor, ...]``)."""
    return annotation is not None and re.search(r"\bTensor\b", annotation) is not None


def shaped_tensor(annotation: str, sizes: dict[str, int]) -> TensorInput | None:
    """The tensor a jaxtyping annotation describes, naming dimensions through ``sizes``.

    ``sizes`` is shared by the parameters of one forward, so that a dimension name
    gets the same size everywhere.  Returns None for annotations without a shape or
    with dimensions this module does not evaluate (arithmetic such as ``n+1``).
    """
    match = _JAXTYPING.match(_strip_optional(annotation))
    if match is None:
        return None
    shape: list[int] = []
    for dim in match.group("dims").split():
        if dim.isdigit():
            shape.append(int(dim))
        elif dim == "...":
            continue
        elif dim.startswith("*") and dim[1:].isidentifier():
            shape.append(_BATCH_SIZE)
        else:
            name = dim.lstrip("#")
            if not name.isidentifier():
                return None
            if name == "_":
                shape.append(_DIMENSION_SIZES[0])
                continue
            if name not in sizes:
                sizes[name] = _DIMENSION_SIZES[len(sizes) % len(_DIMENSION_SIZES)]
            shape.append(sizes[name])
    return TensorInput(tuple(shape), _JAXTYPING_DTYPES.get(match.group("kind"), "float64"))


def scalar_guess(annotation: str | None) -> str | None:
    """A plausible value for a parameter annotated ``int``/``float``/``bool``, as source."""
    if annotation is None:
        return None
    return _SCALAR_GUESSES.get(_strip_optional(annotation))


def never_differentiated(spec: FunctionSpec) -> frozenset[int]:
    """Positions of the inputs whose gradient every ``return`` of backward spells ``None``.

    Such an input is a non-tensor (a factor, a dim) far more often than a tensor.
    """
    backward = spec.backward_method
    if backward is None or not backward.returns:
        return frozenset()
    positions: set[int] | None = None
    for ret in backward.returns:
        if ret.value is not None and ret.value.kind is Kind.NONE:
            found = {0}
        elif ret.elements is not None:
            found = {i for i, element in enumerate(ret.elements) if element.kind is Kind.NONE}
        elif ret.value is not None and (spelt := _spelt_out(ret.value.text)) is not None:
            found = {i for i, is_none in enumerate(spelt) if is_none}
        else:
            return frozenset()
        positions = found if positions is None else positions & found
    return frozenset(positions or ())


def always_differentiated(spec: FunctionSpec) -> frozenset[int]:
    """Positions of the inputs for which every ``return`` of backward gives an expression known to be a tensor.

    A parameter with a number for default is still a tensor there: a number gets
    no gradient, and autograd raises on one ("returned a gradient different than
    None at position 3, but the corresponding forward input was not a Variable"),
    as spikingjelly's ``DSRIFFunction(inp, T=10, v_threshold=1.0, ...)`` does when
    given its default: its real callers pass a 0-d threshold ``Parameter``.
    """
    backward = spec.backward_method
    if backward is None or not backward.returns or any(ret.elements is None for ret in backward.returns):
        return frozenset()
    positions: set[int] | None = None
    for ret in backward.returns:
        found = {i for i, element in enumerate(ret.elements or ()) if element.kind is Kind.TENSOR}
        positions = found if positions is None else positions & found
    return frozenset(positions or ())


def _spelt_out(source: str) -> list[bool] | None:
    """Whether each element of a tuple built as ``(a,) + (None,) * 5`` is ``None``, or None if not such a tuple."""
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError:
        return None

    def elements(node: ast.expr) -> list[bool] | None:
        if isinstance(node, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in node.elts):
            return [isinstance(e, ast.Constant) and e.value is None for e in node.elts]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = elements(node.left), elements(node.right)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) \
                and isinstance(node.right, ast.Constant) and type(node.right.value) is int:
            repeated = elements(node.left)
            return None if repeated is None else repeated * node.right.value
        return None

    return elements(tree) if isinstance(tree, ast.BinOp) else None


def parameter_kinds(spec: FunctionSpec) -> dict[str, Kind]:
    """The kind of each forward input as the analysis knows it.

    A parameter forward (or ``setup_context``, by the same name) passes to
    ``save_for_backward`` or ``mark_dirty``, uses as a tensor or returns as it is,
    is a tensor; one
    annotated or defaulted as a number is not.
    """
    forward = spec.method("forward")
    kinds = dict(forward.param_kinds) if forward is not None else {}
    if forward is not None:
        # An input forward returns as it is is an output: a tensor.
        for ret in forward.returns:
            for value in (ret.elements or ()) + ((ret.value,) if ret.value is not None else ()):
                if value.name is not None and kinds.get(value.name, Kind.UNKNOWN) is Kind.UNKNOWN \
                        and any(param.name == value.name for param in forward.params):
                    kinds[value.name] = Kind.TENSOR
    setup = spec.method("setup_context")
    if setup is not None:
        for api in ("save_for_backward", "mark_dirty"):
            for call in setup.calls(api):
                for arg in call.args:
                    if arg.name is not None and kinds.get(arg.name, Kind.UNKNOWN) is Kind.UNKNOWN:
                        kinds[arg.name] = Kind.TENSOR
    return kinds


def _parameter_inputs(
    params: tuple[Param, ...], default_source: dict[str, str | None], shaped: bool,
    never_differentiated: frozenset[int] = frozenset(), kinds: dict[str, Kind] | None = None,
    uses: Mapping[str, str] | None = None, ranks: Mapping[str, int] | None = None,
    sizes: Mapping[str, tuple[tuple[int, int], ...]] | None = None, differentiated: frozenset[int] = frozenset(),
) -> list[Input] | str:
    """Inputs for ``params``, or a reason why they can't be given.

    With ``shaped``, tensors must carry a jaxtyping shape; otherwise their shape is
    left to the run-time search.  An unannotated parameter is a searched number
    when ``kinds`` says it is not a tensor, or when it is at a position in
    ``never_differentiated`` and not known to be a tensor; a tensor that never gets
    a gradient does not require one.  Trailing parameters whose default is not a
    literal are left out, so that the Function's own default applies.

    ``uses`` (:func:`.param_uses.parameter_uses`) refine an unannotated parameter: one
    read as a number through ``.item()`` or ``int()`` is a 0-d tensor (an int64 1
    when backward never differentiates it: a dimension or a count passed as a
    tensor; else a float 0-d tensor), one used through other tensor attributes is a
    tensor even where backward never differentiates it (then without gradient).
    ``ranks`` (:func:`.param_uses.parameter_ranks`) give a searched tensor its least
    number of dimensions, ``sizes`` (:func:`.param_uses.parameter_sizes`) the sizes of single dimensions.
    A parameter with a number for default at a position in ``differentiated``
    (:func:`always_differentiated`) is a 0-d tensor of that value.
    """
    kinds = kinds or {}
    uses = uses or {}
    ranks = ranks or {}
    inputs = _unranked_inputs(params, default_source, shaped, never_differentiated, kinds, uses, differentiated)
    if isinstance(inputs, str):
        return inputs
    sizes = sizes or {}
    inputs = [replace(arg, sizes=sizes[param.name])
              if isinstance(arg, TensorInput) and arg.shape is None and param.name in sizes else arg
              for param, arg in zip(params, inputs)]
    return [replace(arg, rank=ranks[param.name])
            if isinstance(arg, TensorInput) and arg.shape is None and ranks.get(param.name, 0) > 1 else arg
            for param, arg in zip(params, inputs)]


def _number(source: str | None) -> int | float | None:
    """The int or float a literal default's source spells (``1.0``, ``-2``), or None."""
    try:
        value = ast.literal_eval(source) if source is not None else None
    except (ValueError, SyntaxError):
        return None
    return value if type(value) in (int, float) else None


def _unranked_inputs(
    params: tuple[Param, ...], default_source: dict[str, str | None], shaped: bool,
    never_differentiated: frozenset[int], kinds: dict[str, Kind], uses: Mapping[str, str],
    differentiated: frozenset[int] = frozenset(),
) -> list[Input] | str:
    sizes: dict[str, int] = {}
    inputs: list[Input] = []
    for index, param in enumerate(params):
        if param.default is not None:
            source = default_source.get(param.name)
            number = _number(source)
            if number is not None and index in differentiated and not shaped:
                # A number forward takes by default, but backward gives it a gradient: a 0-d tensor of that value.
                inputs.append(TensorInput((), values=(float(number),)))
                continue
            if source is None:
                if all(p.default is not None for p in params[index:]):
                    break
                return f"the default of parameter {param.name!r} is not a literal"
            inputs.append(ValueInput(source))
            continue
        if param.annotation is None and not shaped:
            kind = kinds.get(param.name, Kind.UNKNOWN)
            if uses.get(param.name) == INTEGER and kind is not Kind.NON_TENSOR:
                inputs.append(TensorInput((), "int64", requires_grad=False, values=(1,))
                              if index in never_differentiated else TensorInput(()))
                continue
            if uses.get(param.name) == TENSOR and kind is Kind.UNKNOWN and index in never_differentiated:
                inputs.append(TensorInput(None, requires_grad=False))
                continue
            if kind is Kind.NON_TENSOR or (kind is Kind.UNKNOWN and index in never_differentiated):
                inputs.append(ScalarInput())
                continue
            if kind is Kind.INDEX_TENSOR:  # indices or a mask: searched as int64 0s and 1s
                inputs.append(TensorInput(None, "int64", requires_grad=False))
                continue
            if index in never_differentiated:  # a tensor, e.g. saved for backward, without a gradient
                inputs.append(TensorInput(None, requires_grad=False))
                continue
        if is_tensor_annotation(param.annotation) or param.annotation is None:
            if not shaped:
                inputs.append(TensorInput(None))
                continue
            tensor = shaped_tensor(param.annotation, sizes) if param.annotation else None
            if tensor is None:
                return f"parameter {param.name!r} has no shape annotation"
            inputs.append(tensor)
            continue
        guess = scalar_guess(param.annotation)
        if guess is None:
            return f"no value is known for parameter {param.name!r}: {param.annotation}"
        inputs.append(ValueInput(guess))
    return inputs


def choose_inputs(
    spec: FunctionSpec,
    recorded: list[InputCase],
    call_sites: list[InputCase],
    default_source: dict[str, str | None],
    uses: Mapping[str, str] | None = None,
    ranks: Mapping[str, int] | None = None,
    sizes: Mapping[str, tuple[tuple[int, int], ...]] | None = None,
) -> FunctionInputs:
    """The input cases of ``spec`` from the most preferred source that has any.

    ``default_source`` maps each forward parameter with a default to the source of
    that default when it is a literal (None otherwise), see :func:`.literals.default_sources`.
    ``uses``, ``ranks`` and ``sizes`` are :func:`.param_uses.parameter_uses`, ``parameter_ranks`` and
    ``parameter_sizes`` of ``spec``.  An input whose
    gradient every ``return`` of backward spells ``None`` never requires grad, in
    any case: backward does not differentiate it by design (a mask, a fixed filter).
    """
    never = never_differentiated(spec)
    if recorded:
        return FunctionInputs(Origin.RECORDED, distinct([_without_grad(case, never) for case in recorded]))
    if call_sites:
        return FunctionInputs(Origin.STATIC, distinct([_without_grad(case, never) for case in call_sites]))
    params = spec.forward_inputs
    if params is None:
        return FunctionInputs(
            Origin.NONE, (), "its forward's parameters are not known statically (*args, or an unresolved base class)"
        )
    annotated = _parameter_inputs(params, default_source, shaped=True)
    if not isinstance(annotated, str):
        return FunctionInputs(Origin.STATIC, (normalise_case(tuple(annotated)),))
    searched = _parameter_inputs(params, default_source, shaped=False, differentiated=always_differentiated(spec),
                                 never_differentiated=never, kinds=parameter_kinds(spec), uses=uses, ranks=ranks,
                                 sizes=sizes)
    if isinstance(searched, str):
        return FunctionInputs(Origin.NONE, (), searched)
    return FunctionInputs(Origin.SEARCH, (normalise_case(tuple(searched)),))


def _without_grad(case: InputCase, positions: frozenset[int]) -> InputCase:
    """``case`` with the tensors at ``positions`` (backward never differentiates them) not requiring grad."""
    if not positions:
        return case
    args = tuple(replace(arg, requires_grad=False) if isinstance(arg, TensorInput) and index in positions else arg
                 for index, arg in enumerate(case.args))
    if case.pickled is not None:
        return replace(case, args=args, no_grad=tuple(sorted(i for i in positions if i < len(case.args))))
    return replace(case, args=args)
