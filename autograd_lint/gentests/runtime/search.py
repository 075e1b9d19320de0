"""The search for arguments forward and backward accept, and why a case can't be judged (skip reasons)."""

from __future__ import annotations

import collections
import itertools
import os
import re
import sys
import traceback
import types
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch

from autograd_lint.gentests.inputs import ScalarInput, TensorInput
from autograd_lint.gentests.render import RECORD_HINT
from autograd_lint.gentests.runtime.arguments import (
    Domain,
    SCALAR_CANDIDATES,
    SEED,
    build_args,
    filter_plans,
    lifted_plans,
    search_candidates,
    search_shape_plans,
    with_sizes,
)
from autograd_lint.gentests.runtime.budget import stop_if_over_budget
from autograd_lint.gentests.runtime.cases import Case, OnClones
from autograd_lint.gentests.runtime.report import cause_of
from autograd_lint.gentests.runtime.tensors import (
    all_finite,
    differentiable_outputs,
    gradient_like,
    is_plain,
    is_wrapper,
    plain_parts,
    tensor_requires_grad,
)


def _forward_accepts(function: Any, args: tuple[Any, ...]) -> bool:
    return _forward_rejection(function, args) is None


def _forward_rejection(function: Any, args: tuple[Any, ...]) -> str | None:
    """Why forward does not accept these arguments (its error, or what its outputs lack), or None."""
    stop_if_over_budget()  # every candidate of a search: a search too is held to the check's time limit
    try:
        with torch.no_grad():
            result = function.apply(*args)
    except Exception as error:  # noqa: BLE001 - any error means "not this candidate"
        return f"raised {type(error).__name__}: {error}"
    outputs = differentiable_outputs(result)
    if not outputs:
        return "returned no floating-point tensor"
    # A subclass output by its plain parts: torch.masked's reductions fail on a sparse MaskedTensor.
    if not all(all_finite(part) for out in outputs for part in plain_parts(out)):
        return "returned non-finite values"
    return None


def _untestable(function: Any, build: Callable[[], tuple[Any, ...]]) -> str | None:
    """Why gradcheck can't judge ``function`` on the arguments ``build`` makes, or None.

    Found on torch's own Functions: a forward that samples (``_Dirichlet``) gives
    finite differences of noise, and tensor subclasses or nested tensors as outputs
    (``ComplexTensor``, ``ViewNestedFromBuffer``) are beyond gradcheck's comparison;
    each failed without a bug.  Each call gets fresh arguments, so that a forward
    that writes its input in place is not taken for a random one.
    """
    try:
        first, drew = _seeded_outputs(function, build(), _PROBE_SEEDS[0])
    except Exception:  # noqa: BLE001 - the checks report what goes wrong
        return None
    for out in first:
        if is_wrapper(out):
            kind = "a nested tensor" if out.is_nested else f"a {type(out).__name__} (a tensor subclass)"
            return f"forward returns {kind}, which gradcheck cannot compare"
    try:
        seed = _differing_seed(function, build, first, drew)
    except Exception:  # noqa: BLE001 - the checks report what goes wrong
        return None
    if seed is not None:
        return (f"forward gives different outputs for the same inputs under seeds {_PROBE_SEEDS[0]} and {seed} of "
                "torch's generator (it draws random numbers): gradcheck's finite differences need a deterministic "
                "forward")
    return _single_use(function, build()) or _subclass_gradient(function, build())


# The seeds of torch's generator under which forward is called to see whether it draws
# random numbers: always the same, so that the verdict does not depend on the tests that
# ran before (it did: norse's ``CircDist`` samples a Bernoulli at p = 0.9975, whose
# draws rarely change its output).  A forward that draws from the generator gets all
# of them; one that does not (its randomness is elsewhere, or none), two.
_PROBE_SEEDS = (SEED, SEED + 1, SEED + 2, SEED + 3)


def _seeded_outputs(function: Any, args: tuple[Any, ...], seed: int) -> tuple[tuple[torch.Tensor, ...], bool]:
    """Forward's differentiable outputs with torch's generator seeded with ``seed`` (in a forked
    state), and whether forward drew from that generator."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        state = torch.random.get_rng_state()
        outputs = differentiable_outputs(function.apply(*args))
        return outputs, not torch.equal(state, torch.random.get_rng_state())


def _differing_seed(function: Any, build: Callable[[], tuple[Any, ...]], first: tuple[torch.Tensor, ...],
                    drew: bool) -> int | None:
    """The first of the other :data:`_PROBE_SEEDS` under which forward's outputs differ from ``first``, or None."""
    for seed in _PROBE_SEEDS[1:] if drew else _PROBE_SEEDS[1:2]:
        outputs, _ = _seeded_outputs(function, build(), seed)
        if len(first) != len(outputs) or not all(
            a.shape == b.shape and a.layout == b.layout and torch.equal(_dense(a), _dense(b))
            for a, b in zip(first, outputs)
        ):
            return seed
    return None


def _dense(value: torch.Tensor) -> torch.Tensor:
    """``value`` with its values laid out densely: ``torch.equal`` has no sparse kernel."""
    return value.to_dense() if value.layout != torch.strided else value


def _single_use(function: Any, args: tuple[Any, ...]) -> str | None:
    """Why the same arguments can't be used twice (an object a call consumes), or None.

    gradcheck calls the Function many times with the same arguments.  torch's
    ``ScanAutogradOp`` gets a ``HopPartitionedGraph`` that ``torch.scan`` builds
    afresh for each call: after one forward and backward its backward graph expects
    another argument, so a replay's second call raises where the first worked.
    """
    if _backward_failure(function, args) is not None:
        return None  # the checks report backward's error
    error = _backward_failure(function, args)
    if error is None:
        return None
    return (f"forward and backward work once, then raise {type(error).__name__}: {error} on a second call "
            "with the same arguments: an argument is consumed by a call (a single-use object), and gradcheck "
            "calls the Function many times")


def _subclass_gradient(function: Any, args: tuple[Any, ...]) -> str | None:
    """Why the gradients backward returns can't be compared (a tensor subclass for a plain input), or None.

    torch.masked's ``Combine`` returns a ``MaskedTensor`` gradient, whose masked-out
    entries mean "no value": gradcheck compares them with finite differences and fails without a bug.
    """
    inputs = [a for a in args if is_plain(a) and a.requires_grad]
    try:
        outputs = [out for out in differentiable_outputs(function.apply(*args)) if out.requires_grad]
        grads = torch.autograd.grad(outputs, inputs, [gradient_like(out) for out in outputs], allow_unused=True)
    except Exception:  # noqa: BLE001 - the checks report what goes wrong
        return None
    for index, (grad, arg) in enumerate(zip(grads, inputs)):
        if grad is not None and is_wrapper(grad) and not is_wrapper(arg):
            kind = "a nested tensor" if grad.is_nested else f"a {type(grad).__name__} (a tensor subclass)"
            return (f"backward returns {kind} as the gradient of tensor input {index}, "
                    "which gradcheck cannot compare with finite differences")
    return None


def _backward_failure(function: Any, args: tuple[Any, ...]) -> Exception | None:
    """What backward raises for these arguments (wrong gradient shapes included), or None."""
    stop_if_over_budget()
    inputs = [a for a in args if tensor_requires_grad(a)]
    try:
        outputs = [out for out in differentiable_outputs(function.apply(*args)) if out.requires_grad]
        torch.autograd.grad(outputs, inputs, [gradient_like(out) for out in outputs], allow_unused=True)
    except Exception as error:  # noqa: BLE001 - any error means "not this candidate"
        return error
    return None


def describe_backward_error(function: Any, args: tuple[Any, ...]) -> str | None:
    """Why backward fails for these arguments (wrong gradient shapes included), or None."""
    error = _backward_failure(function, args)
    return None if error is None else f"{type(error).__name__}: {error}"


def _unmet_precondition(function: Any, error: BaseException) -> str | None:
    """Why ``error``, raised by backward, is a precondition the generated tests cannot meet, or None.

    Two kinds, found on torch's own ``dist_autograd_test`` Functions: a ``raise``
    or ``assert`` statement of the Function's own module raised it (a state its
    own tests set up, a deliberately simulated error), or backward calls
    ``torch.distributed`` while no process group is initialised (a collective, the
    distributed autograd context): the generated tests run in one process.  An
    error raised elsewhere, by torch or numpy on wrong shapes, is no such thing.
    """
    subject = function.function if isinstance(function, OnClones) else function
    module = sys.modules.get(getattr(subject, "__module__", ""))
    source = getattr(module, "__file__", None)
    frames = traceback.extract_tb(error.__traceback__)
    own = [frame for frame in frames if source is not None and frame.filename == source]
    if own and own[-1] is frames[-1] and (frames[-1].line or "").startswith(("raise", "assert")):
        statement = (frames[-1].line or "").split()[0]
        return (f"it raises on purpose: a `{statement}` statement of its module, at "
                f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} (a state or input its own tests provide)")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return None
    library = os.path.join(os.path.dirname(torch.__file__), "distributed") + os.sep
    called = any(frame.filename.startswith(library) for frame in frames)
    if own and own[-1] is frames[-1] and not called:
        # An error raised in C++ by a torch.distributed binding called on backward's line.
        for name in re.findall(r"\b([A-Za-z_]\w*)\s*\.", own[-1].line or ""):
            value = getattr(module, name, None)
            owner = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            called = called or (isinstance(owner, str) and owner.startswith("torch.distributed"))
    if called:
        where = f" (`{own[-1].line}`, {os.path.basename(own[-1].filename)}:{own[-1].lineno})" if own else ""
        return (f"it calls torch.distributed{where}, which needs an initialised process group or RPC agent; "
                "the generated tests run in one process without one")
    return None


@dataclass(frozen=True)
class Resolution:
    """The searched shapes and scalar values and the value domain chosen for a case.

    ``backward_error`` is set when backward failed on every candidate the forward
    accepted: the first such candidate is kept, with the error backward raised.
    """

    shapes: tuple[tuple[int, ...], ...]
    scalars: tuple[float, ...]
    domain: Domain
    backward_error: str | None = None
    unmet_precondition: str | None = None  # why backward_error is no bug (see _unmet_precondition)
    untestable: str | None = None  # why gradcheck can't judge this Function (see _untestable)


# (Function, repr(case)) -> resolution: every check of a case reuses one search;
# repr because literal arguments (lists) need not be hashable.
_resolved: dict[tuple[Any, str], Resolution | None] = {}


def _resolve(function: Any, case: Case) -> Resolution | None:
    """The searched shapes, scalars and value domain the forward accepts, or None."""
    key = (function, repr(case))
    if key not in _resolved:
        # Seeded (in a forked state): a forward that draws random numbers accepts or rejects
        # a candidate alike whichever tests ran before.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            _resolved[key] = _search(function, case)
    return _resolved[key]


# Why forward refused a case that has nothing to search (recorded or literal), by _resolved's key.
_refused: dict[tuple[Any, str], str] = {}


def _search(function: Any, case: Case) -> Resolution | None:
    """The first candidate both forward and backward accept, else the first forward accepts.

    A forward can accept shapes its backward was not written for (a matrix where a
    vector was meant); when backward runs on none, the forward's choice still lets
    the checks report what goes wrong in it.  Where forward's error says a tensor
    needs more dimensions (see :func:`.arguments.lifted_plans`), the plan with more
    is tried next; where it says a convolution got a weight of the wrong shape,
    the plan with filters (:func:`.arguments.filter_plans`).
    """
    forward_only: Resolution | None = None
    searched = [a.rank for a in case.args if isinstance(a, TensorInput) and a.shape is None]
    sizes = [a.sizes for a in case.args if isinstance(a, TensorInput) and a.shape is None]
    fixed = [not a.requires_grad for a in case.args if isinstance(a, TensorInput) and a.shape is None]
    plans = collections.deque(search_shape_plans(len(searched), searched) if searched else [()])
    seen = set(plans)
    scalar_count = sum(1 for a in case.args if isinstance(a, ScalarInput))
    scalar_choices = list(itertools.product(SCALAR_CANDIDATES, repeat=scalar_count))
    # Shapes and numbers rejected for their shapes: other value domains would not help.
    rejected_shapes: set[tuple[Any, ...]] = set()
    lifts = filters = reduced = 0
    while plans:
        # Dimensions of a size forward's source fixes have it in every plan (see .param_uses.parameter_sizes).
        for plan, scalars, domain in search_candidates([with_sizes(plans.popleft(), sizes)], scalar_choices,
                                                       case.domains):
            if (plan, scalars) in rejected_shapes:
                continue

            def build() -> tuple[Any, ...]:
                return build_args(case.args, iter(plan), iter(scalars), domain, SEED, case.pickled,
                                  case.with_function, case.no_grad)

            args = build()
            rejection = _forward_rejection(function, args)
            if rejection is not None:
                _refused.setdefault((function, repr(case)), rejection)
                if rejection.startswith("raised ") and _about_shapes(rejection.removeprefix("raised ")):
                    rejected_shapes.add((plan, scalars))
                # Next, in the order given; filters (a convolution's error) apart, as they need lifts first.
                more = lifted_plans(plan, rejection) if lifts < _MAX_LIFTS else []
                wanted = filter_plans(plan, rejection, fixed, [bool(known) for known in sizes]) if filters < _MAX_LIFTS else []
                for lifted in reversed(more + wanted):
                    if lifted not in seen:
                        seen.add(lifted)
                        plans.appendleft(lifted)
                        lifts += lifted in more
                        filters += lifted in wanted
                continue
            untestable = _untestable(function, build)
            if untestable is not None:
                return Resolution(plan, scalars, domain, untestable=untestable)
            error = _backward_failure(function, args)
            if error is None:
                return Resolution(plan, scalars, domain)
            shaped = _plan_of_gradient_shape(plan, case, args, str(error))
            if shaped is not None and shaped not in seen and reduced < _MAX_REDUCED:
                seen.add(shaped)
                plans.appendleft(shaped)
                reduced += 1
            if _about_shapes(f"{type(error).__name__}: {error}"):
                rejected_shapes.add((plan, scalars))
            forward_only = forward_only or Resolution(plan, scalars, domain, f"{type(error).__name__}: {error}",
                                                      _unmet_precondition(function, error))
    return forward_only


# autograd's check of a gradient's shape, which names the tensor input (0-based, among the tensors) and both shapes.
_INVALID_GRADIENT = re.compile(
    r"returned an invalid gradient at index (\d+) - got \[([\d, ]*)\] but expected shape compatible with \[([\d, ]*)\]")


def _plan_of_gradient_shape(plan: tuple[tuple[int, ...], ...], case: Case, args: tuple[Any, ...],
                            error: str) -> tuple[tuple[int, ...], ...] | None:
    """``plan`` with a searched tensor given the shape backward's gradient for it has, when
    ``error`` is autograd's "returned an invalid gradient at index i - got [S] but expected
    shape compatible with [T]" for it and S has no more dimensions than T; else None.

    The gradient's shape is backward's word on the input meant: spikingjelly's
    ``DSRLIFFunction`` sums a threshold's gradient to a 0-d tensor, as its callers pass
    a 0-d threshold, and ``DSRIFFunction`` stacks ``T`` time steps, as its callers pass
    ``T`` steps; a searched (3, 4) input made backward fail on every candidate.  The
    shape is kept only where forward accepts it and backward then returns a gradient
    of that shape: a backward wrong for every shape still fails.  Tried at most
    :data:`_MAX_REDUCED` times per case.
    """
    match = _INVALID_GRADIENT.search(error)
    if match is None:
        return None
    tensors = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
    searched = [k for k, a in enumerate(case.args) if isinstance(a, TensorInput) and a.shape is None]
    index = int(match.group(1))
    if index >= len(tensors) or tensors[index] not in searched:
        return None
    shape = tuple(int(size) for size in match.group(2).replace(" ", "").split(",") if size)
    if len(shape) > len(args[tensors[index]].shape):
        return None
    position = searched.index(tensors[index])
    return plan[:position] + (shape,) + plan[position + 1:]


# Plans with a gradient's shape tried on backward's word, at most.
_MAX_REDUCED = 2


# Plans with more dimensions tried on forward's word, at most (each costs a pass over the numbers and domains).
_MAX_LIFTS = 12


# Words of the errors torch raises for a shape or size it was not written for; an error
# without them (AttributeError from a misspelt ctx attribute, NameError, an unpacking
# of saved_tensors) does not depend on the shapes guessed, and stays a failure.
_SHAPE_WORDS = re.compile(
    r"size|shape|dimension|\bdims?\b|broadcast|out of (?:range|bounds)|numel|mat\d|must match|invalid for input",
    re.IGNORECASE,
)


def _about_shapes(error: str) -> bool:
    """Whether backward's ``error`` ("Type: message") may come from the shapes the search chose."""
    kind = error.split(":", 1)[0]
    if "returned an invalid gradient" in error:
        return False  # autograd's own check: a gradient not shaped like its input is wrong for any input
    return kind in ("RuntimeError", "IndexError", "ValueError") and _SHAPE_WORDS.search(error) is not None


def make_args(function: Any, case: Case, seed: int = SEED, compares: bool = True) -> tuple[Any, ...]:
    """Concrete arguments for ``case``; skips the test when no candidate is accepted.

    ``compares`` is false for a check that looks at structure only (which gradients
    are None, that double backward raises, shapes and finiteness): it still runs on a
    Function whose outputs can't be compared (see ``_untestable``).
    """
    resolved = _resolve(function, case)
    if resolved is None:
        searched = any(isinstance(a, (TensorInput, ScalarInput)) and getattr(a, "shape", None) is None
                       for a in case.args)
        if not searched and (function, repr(case)) in _refused:
            # Recorded or literal inputs: the recording is not what is missing.
            pytest.skip(f"{function.__qualname__}.forward {_refused[(function, repr(case))]} on this case's "
                        "inputs, which the checks pass in float64 (an integer or bool tensor keeps its dtype)")
        what = "none of the candidate shapes and values" if searched else "none of the value domains"
        pytest.skip(f"{function.__qualname__}.forward accepted {what}; {RECORD_HINT}")
    if compares and resolved.untestable is not None:
        pytest.skip(f"{function.__qualname__}: {resolved.untestable}")
    if resolved.unmet_precondition is not None:
        pytest.skip(f"{function.__qualname__}.backward raised {resolved.backward_error}, and "
                    f"{resolved.unmet_precondition}")
    if resolved.backward_error is not None and resolved.scalars and resolved.backward_error.startswith("TypeError"):
        # A number was guessed for a parameter of unknown kind and backward used it
        # as something else (a callable kept on ctx): our guess, not a bug.
        positions = [i for i, a in enumerate(case.args) if isinstance(a, ScalarInput)]
        pytest.skip(f"{function.__qualname__}.backward raised {resolved.backward_error} with numbers searched "
                    f"for the argument(s) at position(s) {positions}, whose kind is unknown; {RECORD_HINT}")
    if resolved.backward_error is not None and (resolved.shapes or resolved.scalars):
        # With nothing searched there was no choice to explain: the check reports the failure.
        searched = ", ".join(str(tuple(shape)) for shape in resolved.shapes) or "the searched values"
        cause = cause_of(RuntimeError(resolved.backward_error))
        if "no input fixes this" not in cause and _about_shapes(resolved.backward_error):
            # A guess of ours forward did not reject: the Function is likely written for other shapes
            # (a Lie group's 7-vector, a point of 4), and a failure would claim a bug nobody saw.
            pytest.skip(f"{function.__qualname__}.backward raised {resolved.backward_error} on every searched "
                        f"candidate forward accepted (first: {searched}): the Function is likely meant for other "
                        f"shapes; {RECORD_HINT}")
        # Inputs can help unless the cause says none does: the Function may be meant only for others
        # (Affine's vector bias), which a recording of its real calls shows.
        advice = cause if "no input fixes this" in cause else f"{cause + ' ' if cause else ''}If it is meant for " \
            f"other inputs, {RECORD_HINT}"
        pytest.fail(
            f"{function.__qualname__}.backward failed: {resolved.backward_error}\n"
            f"It failed on every searched candidate; forward accepted {searched} first. {advice}",
            pytrace=False,
        )
    return build_args(case.args, iter(resolved.shapes), iter(resolved.scalars), resolved.domain, seed,
                      case.pickled, case.with_function, case.no_grad)
