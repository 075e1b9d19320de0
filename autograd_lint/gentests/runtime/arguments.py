"""Concrete arguments for a case: value domains, values drawn or like the recorded ones, candidate shapes."""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, Iterable, Iterator, Sequence

import torch

from autograd_lint.gentests.inputs import ScalarInput, TensorInput
from autograd_lint.gentests.runtime.cases import Case
from autograd_lint.gentests.runtime.tensors import is_differentiable_dtype, is_plain


Domain = tuple[str, float, float, bool]
POSITIVE_DEFINITE = "positive_definite"
SIMPLEX = "simplex"
UNIT_NORM = "unit_norm"
DOMAINS: tuple[Domain, ...] = (
    # name, low, high, random sign
    ("signed", 0.5, 1.5, True),
    (POSITIVE_DEFINITE, 0.5, 1.5, False),
    ("positive", 0.5, 1.5, False),
    ("unit", 0.1, 0.9, False),
    # Last resorts for a forward that checks its input: probabilities (each row
    # positive, summing to one) and unit vectors (each row of norm one).
    (SIMPLEX, 0.5, 1.5, False),
    (UNIT_NORM, 0.5, 1.5, True),
)


BATCH_SIZE = 2
SEED = 0


# 2 before 1 so that a forgotten factor shows; 0.5 for exponents and probabilities.
SCALAR_CANDIDATES = (2, 0.5, 1)


def _promoted(arg: Any) -> Any:
    """A floating (complex) dtype argument as float64 (complex128): it follows the case's tensors,
    which run in float64, so that forward's output is not rounded to float32 under finite differences."""
    if isinstance(arg, torch.dtype) and (arg.is_floating_point or arg.is_complex):
        return torch.complex128 if arg.is_complex else torch.float64
    return arg


def _recorded_args(case: Case) -> tuple[Any, ...]:
    from autograd_lint.gentests import pickled

    args = pickled.loads(case.pickled or "")[1 if case.with_function else 0:]
    # A floating dtype argument follows its tensors to float64 (pickles of older recordings keep torch's own).
    args = tuple(_promoted(a) for a in args)
    # A tensor subclass (MaskedTensor, a jagged nested tensor) keeps what was recorded: it is not differentiated.
    top = [a for a in args if is_plain(a) and is_differentiable_dtype(a.dtype)]
    # Never differentiated by backward (a mask, a fixed filter bank): never made to require grad.
    fixed = [a for i, a in enumerate(args) if i in case.no_grad and isinstance(a, torch.Tensor)]
    strided = [a for a in top if a.layout == torch.strided and not any(a is f for f in fixed)]
    for tensor_arg in top:
        if tensor_arg.layout != torch.strided or any(tensor_arg is f for f in fixed):
            tensor_arg.requires_grad_(False)
    if strided and not any(a.requires_grad for a in strided):
        for tensor_arg in strided:
            tensor_arg.requires_grad_(True)
    return args


def _drawn_values(shape: tuple[int, ...], dtype: torch.dtype, domain: Domain,
                  generator: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator, dtype=torch.float64) > 0.5
    if not is_differentiable_dtype(dtype):
        # 0 and 1 are valid indices along any dimension of the candidate shapes.
        return torch.randint(0, 2, shape, generator=generator).to(dtype)
    name, low, high, signed = domain
    real = torch.float64
    if name == POSITIVE_DEFINITE and _is_square(shape):
        n = shape[-1]
        factor = torch.randn(shape, generator=generator, dtype=real)
        return (factor @ factor.mT / n + torch.eye(n, dtype=real)).to(dtype)
    magnitude = low + (high - low) * torch.rand(shape, generator=generator, dtype=real)
    if signed:
        sign = torch.where(torch.rand(shape, generator=generator, dtype=real) > 0.5, 1.0, -1.0)
        magnitude = magnitude * sign.to(real)
    if name == SIMPLEX and magnitude.dim():
        magnitude = magnitude / magnitude.sum(-1, keepdim=True)
    elif name == UNIT_NORM and magnitude.dim():
        magnitude = magnitude / torch.linalg.vector_norm(magnitude, dim=-1, keepdim=True)
    return magnitude.to(dtype)


def _is_square(shape: tuple[int, ...]) -> bool:
    """A matrix, or a batch of them, larger than 1x1."""
    return len(shape) >= 2 and shape[-1] == shape[-2] > 1


def _values_like_recorded(shape: tuple[int, ...], dtype: torch.dtype, stats: dict[str, float | bool],
                          generator: torch.Generator) -> torch.Tensor:
    """Random values with the recorded statistics of a tensor too large to record.

    Structure first (a probability vector, a positive-definite or symmetric matrix),
    else the recorded range, whole numbers where all recorded ones were.
    """
    real = torch.float64
    low, high = float(stats.get("min", -1.0)), float(stats.get("max", 1.0))
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator, dtype=real) > 0.5
    if stats.get("simplex"):
        values = torch.softmax(torch.randn(shape, generator=generator, dtype=real), dim=-1)
    elif stats.get("positive_definite"):
        n = shape[-1]
        factor = torch.randn(shape, generator=generator, dtype=real)
        values = factor @ factor.transpose(-1, -2) / n + torch.eye(n, dtype=real)
    elif stats.get("integral") or not is_differentiable_dtype(dtype):
        values = torch.randint(int(low), int(high) + 1, shape, generator=generator).to(real)
    else:
        values = low + (high - low) * torch.rand(shape, generator=generator, dtype=real)
        if stats.get("symmetric") and len(shape) >= 2:
            values = (values + values.transpose(-1, -2)) / 2
    return values.to(dtype)


def _non_contiguous(values: torch.Tensor) -> torch.Tensor:
    """The same values, as every other element of a twice larger tensor (as a recorded view was)."""
    if values.dim() == 0:
        return values
    spread = torch.zeros(values.shape[:-1] + (2 * values.shape[-1],), dtype=values.dtype, device=values.device)
    spread[..., ::2] = values
    return spread[..., ::2]


def _make_tensor(arg: TensorInput, shape: tuple[int, ...], domain: Domain,
                 generator: torch.Generator) -> torch.Tensor:
    dtype = getattr(torch, arg.dtype)
    if arg.values is not None:
        flat = [float(item) if isinstance(item, str) else item for item in arg.values]
        values = torch.tensor(flat, dtype=torch.float64 if dtype.is_floating_point else None).to(dtype)
        values = values.reshape(shape)
    elif arg.stats is not None:
        values = _values_like_recorded(shape, dtype, dict(arg.stats), generator)
    else:
        values = _drawn_values(shape, dtype, domain, generator)
    values = values.to(arg.device)
    if not arg.contiguous:
        values = _non_contiguous(values)
    if arg.requires_grad and is_differentiable_dtype(dtype):
        values.requires_grad_(True)
    return values


def build_args(case_args: tuple[Any, ...], shapes: Iterator[tuple[int, ...]], scalars: Iterator[float],
               domain: Domain, seed: int, pickled: str | None = None, with_function: bool = False,
               no_grad: tuple[int, ...] = ()) -> tuple[Any, ...]:
    if pickled is not None:
        return _recorded_args(Case((), pickled, with_function, no_grad=no_grad))
    generator = torch.Generator().manual_seed(seed)
    built = []
    for arg in case_args:
        if isinstance(arg, TensorInput):
            shape = arg.shape if arg.shape is not None else next(shapes)
            built.append(_make_tensor(arg, shape, domain, generator))
        elif isinstance(arg, ScalarInput):
            built.append(next(scalars))
        else:
            built.append(_promoted(arg))
    return tuple(built)


# A tensor of a known least rank (:attr:`TensorInput.rank`): a batch of vectors, of
# (even-sized) images, of images with a third axis of 3 (bands, colours).
_RANKED_SHAPES = {2: (3, 4), 3: (2, 3, 4), 4: (2, 3, 4, 4), 5: (2, 3, 3, 4, 4)}


def ranked_shape(rank: int) -> tuple[int, ...]:
    """The candidate shape of a tensor with ``rank`` dimensions."""
    return _RANKED_SHAPES.get(rank) or (2, 3) + (2,) * (rank - 4) + (4, 4)


def with_sizes(plan: tuple[tuple[int, ...], ...],
               sizes: Sequence[tuple[tuple[int, int], ...]]) -> tuple[tuple[int, ...], ...]:
    """``plan`` with each tensor's dimensions of a known size (:attr:`TensorInput.sizes`) given that size,
    where the shape has that dimension."""
    sized = []
    for shape, known in zip(plan, sizes):
        dims = list(shape)
        for dim, size in known:
            if -len(dims) <= dim < len(dims):
                dims[dim] = size
        sized.append(tuple(dims))
    return tuple(sized) + plan[len(sized):]


def search_shape_plans(count: int, ranks: Sequence[int | None] = ()) -> list[tuple[tuple[int, ...], ...]]:
    """Candidate shapes for ``count`` searched tensors, most common layouts first.

    ``ranks`` (one per tensor, None where unknown) put first the plans that give
    each such tensor that many dimensions, then one more (``x[:, :, None]`` read
    from a 3-d input may be meant for a 4-d one); the usual plans follow, as the
    evidence is a guess.
    """
    same = [(3, 4), (2, 3, 4), (3, 3), (4,), ()]
    dims = [3 + i for i in range(count + 1)]  # one more than the tensors: any number of them
    plans: list[tuple[tuple[int, ...], ...]] = [tuple([same[0]] * count)]
    # Matrix chains (a @ b @ ...), plain and batched.
    plans.append(tuple((dims[i], dims[i + 1]) for i in range(count)))
    plans.extend(tuple([shape] * count) for shape in same[1:3])
    plans.append(tuple((2, dims[i], dims[i + 1]) for i in range(count)))
    # A matrix with vectors broadcast against its last dimension (bias, scale).
    plans.append(((3, 4),) + ((4,),) * (count - 1))
    plans.extend(tuple([shape] * count) for shape in same[3:])
    # Last resorts for a backward written for one size (a forward that accepts any): other last dimensions.
    plans.extend(tuple([(3, last)] * count) for last in (2, 5, 6, 7, 8))
    plans.extend(tuple([(last,)] * count) for last in (2, 3, 5, 6, 7, 8))
    if count in (2, 3):
        # An element of a group with points or tangent vectors of another size (a quaternion and a
        # 3-d point, a 7-d pose and a 6-d twist): the first tensor's last dimension differs.
        plans.extend(((3, first),) + ((3, other),) * (count - 1)
                     for first in (4, 5, 6, 7, 8) for other in (3, 4, 6, 7) if first != other)
    if any(ranks):
        plans = [tuple(ranked_shape(rank + extra) if rank and len(shape) < rank + extra else shape
                       for shape, rank in zip(plan, ranks)) for extra in (0, 1) for plan in plans] + plans
    unique: list[tuple[tuple[int, ...], ...]] = []
    for plan in plans:
        if plan not in unique:
            unique.append(plan)
    return unique


# torch's and Python's words for "this needs more dimensions", and the least rank each implies.
_RANK_ERRORS = (
    (re.compile(r"not enough values to unpack \(expected (\d+), got \d+\)"), lambda m: int(m[1])),
    (re.compile(r"too many indices for tensor of dimension (\d+)"), lambda m: int(m[1]) + 1),
    (re.compile(r"Dimension out of range \(expected to be in range of \[-\d+, -?\d+\], but got (-?\d+)\)"),
     lambda m: int(m[1]) + 1 if int(m[1]) >= 0 else -int(m[1])),
    (re.compile(r"Expected (?:\d+D \(unbatched\) or )?(\d+)D"), lambda m: int(m[1])),
)
MAX_RANK = 6


# torch's convolutions on a weight whose channel dimensions do not fit the input:
# "Given groups=3, weight of size [6, 3, 4, 4], expected input[2, 3, 4, 4] to have 9 channels, but got 3 ...".
_CONV_WEIGHT_ERROR = re.compile(r"weight of size \[([\d, ]+)\], expected input\[[\d, ]+\] to have \d+ channels")
# A filter read as a vector and reshaped to one axis of another rank ("shape '[1, 1, 1, 4]' is invalid for
# input of size 96": pytorch-wavelets' ``ha.reshape(1, 1, 1, m)`` with ``m = ha.shape[2]``).
_FILTER_RESHAPE_ERROR = re.compile(r"shape '\[([\d, ]+)\]' is invalid for input of size \d+")
# Lengths of a filter: odd (centred, "same" padding) first, then even (the other half of a filter bank).
FILTER_LENGTHS = (5, 4)


def filter_plans(plan: tuple[tuple[int, ...], ...], error: str, fixed: Sequence[bool] = (),
                 stacked: Sequence[bool] = ()) -> list[tuple[tuple[int, ...], ...]]:
    """``plan`` with filters where forward's ``error`` says a convolution got a weight of the wrong shape, else [].

    A convolution whose weight's channels do not fit the input (the error prints
    the weight's size, so its number of dimensions), or a reshape of a filter to
    one axis of a few elements, is given filters: the tensors backward never
    differentiates (``fixed``; if none or all are, every tensor but the first)
    become filters of that many dimensions, the others data of at least as many
    (one more for a tensor forward unbinds into parts, ``stacked``: each part is data).
    A filter has every size 1 but one, of length :data:`FILTER_LENGTHS` (or the
    reshape's): ``(1, 1, 5, 1)``, one channel in and out, which ``repeat`` or
    ``expand`` to the input's channels and any grouping accept (pytorch-wavelets'
    filter banks, reshaped in helpers of another module that forward's source
    does not show).
    """
    conv = _CONV_WEIGHT_ERROR.search(error)
    reshape = _FILTER_RESHAPE_ERROR.search(error)
    match = conv or reshape
    if match is None or len(plan) < 2:
        return []
    sizes = [int(size) for size in match[1].split(",")]
    rank, lengths = len(sizes), FILTER_LENGTHS
    if conv is None:
        length = math.prod(sizes)
        if not 1 < length <= max(FILTER_LENGTHS) or sizes.count(length) != 1:
            return []
        lengths = (length,)
    if not 3 <= rank <= MAX_RANK:
        return []
    is_filter = list(fixed) if any(fixed) and not all(fixed) else [False] + [True] * (len(plan) - 1)
    least = [rank + 1 if index < len(stacked) and stacked[index] else rank for index in range(len(plan))]
    data = [shape if len(shape) >= needed else ranked_shape(needed) for shape, needed in zip(plan, least)]
    lifted = [tuple(filter_shape if to_filter else shape for shape, to_filter in zip(data, is_filter))
              for filter_shape in ((1, 1, length) + (1,) * (rank - 3) for length in lengths)]
    return [candidate for candidate in lifted if candidate != plan]


def lifted_plans(plan: tuple[tuple[int, ...], ...], error: str) -> list[tuple[tuple[int, ...], ...]]:
    """``plan`` with more dimensions where forward's ``error`` says it needs them, else [].

    The error does not say which tensor: first the first tensor alone (the data,
    beside filters or parameters), then every tensor with fewer dimensions.
    """
    for pattern, needed in _RANK_ERRORS:
        match = pattern.search(error)
        if match is None:
            continue
        rank = needed(match)
        if not 1 < rank <= MAX_RANK or not any(len(shape) < rank for shape in plan):
            return []
        first = (ranked_shape(rank) if len(plan[0]) < rank else plan[0],) + plan[1:]
        every = tuple(ranked_shape(rank) if len(shape) < rank else shape for shape in plan)
        return [first] if first == every else [first, every]
    return []


def search_candidates(
    plans: Sequence[tuple[tuple[int, ...], ...]], scalar_choices: Iterable[tuple[float, ...]],
    preferred: Sequence[str] = (),
) -> Iterator[tuple[tuple[tuple[int, ...], ...], tuple[float, ...], Domain]]:
    """(shapes, scalar values, value domain) to try, in order; the ``preferred`` domains first."""
    domains = sorted(DOMAINS, key=lambda d: preferred.index(d[0]) if d[0] in preferred else len(preferred))
    for plan, scalars, domain in itertools.product(plans, scalar_choices, domains):
        if domain[0] == POSITIVE_DEFINITE and not any(_is_square(shape) for shape in plan):
            continue  # no square matrix: the same values as "positive"
        yield plan, scalars, domain
