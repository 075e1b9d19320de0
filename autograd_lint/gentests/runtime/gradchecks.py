"""The checks of the gradcheck family (gradcheck, gradgradcheck, forward AD, undefined gradients),
each failure worded with what was compared, on which inputs, and what the mismatch suggests."""

from __future__ import annotations

import sys
import warnings
from typing import Any, Callable

import pytest
import torch

from autograd_lint.gentests.inputs import TensorInput
from autograd_lint.gentests.render import RECORD_HINT
from autograd_lint.gentests.runtime.arguments import SEED
from autograd_lint.gentests.runtime.budget import CHECK_SECONDS_VARIABLE, OverBudget
from autograd_lint.gentests.runtime.calls import (
    DifferentiableCall,
    differentiable_call,
    nondeterminism_tolerance,
    transposable_positions,
    uses_fast_mode,
)
from autograd_lint.gentests.runtime.cases import Case
from autograd_lint.gentests.runtime.contract import gradient_contract
from autograd_lint.gentests.runtime.evidence import (
    backward_moves,
    backward_moves_at,
    constant_elements,
    constant_outputs,
    random_backward,
    zero_on_both_sides,
)
from autograd_lint.gentests.runtime.guessed import guessed_constants, structured
from autograd_lint.gentests.runtime.report import cause_of, describe_inputs, raised_at, reported, where_to_reproduce
from autograd_lint.gentests.runtime.search import describe_backward_error, make_args


_GradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError
# gradcheck's own defaults (a declared tolerance replaces them), and the factor of
# the looser re-run that tells a small mismatch (passes when looser) from one no
# tolerance explains (fails anyway).  The re-run never goes past rtol=0.1 and
# atol=1e-3 (unless the check's own are looser): the line it gives calls the
# mismatch "within about 10%".  A float32 forward's 1e-3 and 1e-2 times 100 are
# rtol=1, which accepts a zero gradient for any derivative: spikingjelly's
# DSRIFFunction, a surrogate, was called a small mismatch and offered a tolerance.
ATOL, RTOL = 1e-5, 1e-3
_LOOSER = 100
_LOOSEST_ATOL, _LOOSEST_RTOL = 1e-3, 0.1
# The float32 re-run of a failed check: float32's unit roundoff is 6e-8, so central
# differences with eps=1e-3 err by about 6e-8 * |f| / 1e-3 = 6e-5 (rounding) plus
# 1e-7 times the third derivative (truncation) at the harness's inputs of magnitude
# 0.5 to 1.5: a right backward stays about ten times inside atol=1e-3, rtol=1e-2.
# With these, gradcheck passed all 25 float32 torch ops tried on such inputs
# (elementwise, reductions, softmax, matmul, solve, cholesky, eigvalsh, inv, det,
# pinv, matrix_exp).
_FLOAT32_EPS, _FLOAT32_ATOL, _FLOAT32_RTOL = 1e-3, 1e-3, 1e-2


def _double_backward_note(function: Any, args: tuple[Any, ...]) -> str:
    """Why double backward raised: autograd differentiating through a backward that was not written for it."""
    first_order = describe_backward_error(function, args)
    if first_order is not None:
        return f"backward raises at first order too ({first_order}): see test_gradcheck\n"
    return ("backward itself runs; the error comes from autograd differentiating through backward, which is not "
            "@once_differentiable: every double backward through this Function (a Hessian, a gradient penalty) "
            "raises it. Make backward differentiable, or decorate it with "
            "@torch.autograd.function.once_differentiable (double backward then raises a clear error saying so)\n")


def _float32_verdict(function: Any, case: Case, args: tuple[Any, ...], run: Callable[..., bool], atol: float,
                     rtol: float, options: dict[str, Any]) -> str:
    """Whether the failed check passes on the same inputs in float32, at float32's tolerances: one line.

    A mismatch float32 cannot resolve does not show where the Function runs in
    float32; one it can is visible there too.
    """
    atol, rtol = max(atol, _FLOAT32_ATOL), max(rtol, _FLOAT32_RTOL)
    header = f"in float32 (eps={_FLOAT32_EPS:g}, atol={atol:g}, rtol={rtol:g})"
    if case.pickled is not None:
        return f"{header}: not tried, the recorded objects keep their own float64 tensors"
    single = tuple(
        (a.detach().float().requires_grad_(a.requires_grad) if a.dtype == torch.float64 else a)
        if isinstance(a, torch.Tensor) else torch.float32 if a is torch.float64 else a
        for a in args)
    try:
        call, inputs = differentiable_call(function, single)
        if any(out.dtype != torch.float32 for out in call(*inputs)):
            return f"{header}: not tried, forward does not return float32 for float32 inputs"
        with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
            warnings.simplefilter("ignore")  # gradcheck warns about inputs that are not float64
            torch.manual_seed(SEED)
            run(call, inputs, eps=_FLOAT32_EPS, atol=atol, rtol=rtol,
                # Without the options' own eps: a forward that casts to float32 already has float32's step there.
                **{**{k: v for k, v in options.items() if k != "eps"},
                   "nondet_tol": nondeterminism_tolerance(call, inputs)})
    except _GradcheckError:
        return f"{header}: fails too"
    except Exception as error:  # noqa: BLE001 - reported as the verdict
        return f"{header}: raises {type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
    return f"{header}: passes (the mismatch is below what float32 resolves)"


def _run_gradcheck(check: str, what: str, function: Any, case: Case, run: Callable[..., bool], *, atol: float,
                   rtol: float, double_backward: bool = False, non_contiguous: bool = False, seed: int = SEED,
                   **options: Any) -> None:
    """Run gradcheck (or gradgradcheck) ``run``; on failure, fail with what was compared on which inputs.

    The message also says whether tolerances 100 times looser (at most rtol=0.1) would pass, which
    tells a small mismatch (an approximate forward, an ill-conditioned point) from
    one no tolerance explains, and names the declaration that accepts either.  An
    exception other than gradcheck's own (raised by the Function, or by autograd
    differentiating through backward) fails the test with the same header, chained.

    With ``non_contiguous``, the floating inputs of 2 or more dimensions are passed
    not contiguous; a failure is reported only if the same check passes on
    contiguous inputs (else it is test_gradcheck's to report, and the test skips).

    A first-order check that fails on a Function whose backward is not the
    derivative by design, as the run shows (:mod:`.evidence`), is an expected
    failure saying which evidence, once the gradient contract holds.  A forward
    that returns float32 for float64 inputs is compared at float32's step and
    tolerances, in slow mode (fast mode compares float64 with float32 and raises
    "Double did not match Float").
    """
    try:
        args = make_args(function, case, seed=seed)
    except pytest.fail.Exception:
        if not non_contiguous:
            raise
        # The search's backward failed on its contiguous inputs: layout has nothing to do with it.
        pytest.skip(f"{function.__qualname__}: backward fails on contiguous inputs too (test_gradcheck reports "
                    "it): not a question of memory layout")
    transposed = transposable_positions(args) if non_contiguous else []
    if non_contiguous and not transposed:
        pytest.skip(f"{function.__qualname__}: the case has no floating-point tensor input of 2 or more dimensions "
                    "(none of size 1) that could be passed non-contiguous")
    for position in transposed:
        # In place, keeping the tensor: an object among the arguments that holds it (an
        # ODE function and its parameters) sees the same layout and gradcheck's perturbations.
        args[position].data = args[position].data.mT.contiguous().mT
    call, inputs = differentiable_call(function, args, transposed)
    options.setdefault("nondet_tol", nondeterminism_tolerance(call, inputs))
    lowered = _lowered_outputs(call, inputs)
    if lowered:
        # Double backward too: gradgradcheck perturbs the output gradients, float32 like the outputs, and
        # at float64's step their rounding is the whole difference (a correct cast failed, spikingjelly's
        # LeakyIntegratorStep: 1.0133 for 1).
        atol, rtol = max(atol, _FLOAT32_ATOL), max(rtol, _FLOAT32_RTOL)
        options["eps"] = _FLOAT32_EPS

    def seeded_run(atol: float, rtol: float, call: DifferentiableCall = call,
                   inputs: tuple[torch.Tensor, ...] = inputs) -> None:
        # gradgradcheck's output gradients and fast mode's projections are drawn from
        # torch's global generator: seeded, the verdict does not depend on earlier tests.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            run(call, inputs, atol=atol, rtol=rtol, **options)

    where = f"inputs (float64): {describe_inputs(args)}; {where_to_reproduce(seed)}\n"
    if lowered:
        where += (f"cause: forward returns {lowered} for float64 inputs (it casts): compared at float32's step and "
                  f"tolerances (eps={_FLOAT32_EPS:g}, atol={atol:g}, rtol={rtol:g}), in slow mode\n")
    raised: Exception | None = None
    try:
        # Double backward also differentiates with respect to the output gradients.
        options["fast_mode"] = not lowered and uses_fast_mode(inputs + call(*inputs) if double_backward else inputs)
        seeded_run(atol, rtol)
        return
    except _GradcheckError as error:
        detail = str(error).strip()
    except Exception as error:  # noqa: BLE001 - the Function's own error, reported with its context
        raised = error
    if transposed:
        try:
            seeded_run(atol, rtol, *differentiable_call(function, make_args(function, case)))
        except Exception as error:  # noqa: BLE001 - any failure: not a question of layout
            pytest.skip(f"{function.__qualname__}: gradcheck fails on contiguous inputs too "
                        f"({type(error).__name__}; test_gradcheck reports it): not a question of memory layout")
        where += (f"inputs {', '.join(f'#{i}' for i in transposed)} were passed non-contiguous (the same values, "
                  "memory laid out transposed: x.mT.contiguous().mT); gradcheck passes with all inputs contiguous: "
                  "the Function assumes contiguous memory (a .view, data_ptr or stride arithmetic, a kernel called "
                  "without .contiguous())\n")
    if raised is not None:
        note = _double_backward_note(function, args) if double_backward else ""
        cause = cause_of(raised)
        note += f"{cause}\n" if cause else ""
        raise pytest.fail.Exception(
            f"{function.__qualname__}: {check} raised {type(raised).__name__}: {raised}{raised_at(raised)}\n"
            f"{where}{note}", pytrace=False) from raised
    if not transposed:
        _skip_if_guessed_values_decide(function, case, args, check, seeded_run, atol, rtol)
    if not double_backward and not transposed and options.get("check_backward_ad", True):
        where += _not_the_derivative(function, case, call, inputs, seeded_run, atol, rtol, seed)
    if double_backward and not transposed:
        where += _first_order_differs(call, inputs, atol, rtol, options)
    jump = _jump_within_step(call, inputs)
    if jump is not None:
        pytest.skip(f"{function.__qualname__}: {check} can't judge backward on this case: {jump}")
    # A layout failure is not a question of precision: the contiguous run passed at these tolerances.
    try:
        precision = "" if transposed else _precision(function, case, args, run, seeded_run, atol, rtol, options)
    except OverBudget:  # the failure stands; only its diagnosis is cut short
        precision = ("whether looser tolerances or float32 change the verdict: not measured (the check's time "
                     f"limit, {CHECK_SECONDS_VARIABLE}, was reached)\n")
    nondeterministic = (f"backward is nondeterministic: nondet_tol={options['nondet_tol']:.3g} was used\n"
                        if options.get("nondet_tol") else "")
    pytest.fail(
        f"{function.__qualname__}: {what}\n"
        f"{where}{precision}{nondeterministic}"
        f"gradcheck said: {detail}",
        pytrace=False,
    )


def _skip_if_guessed_values_decide(function: Any, case: Case, args: tuple[Any, ...], check: str,
                                   seeded_run: Callable[..., None], atol: float, rtol: float) -> None:
    """After a failed comparison: skip when it passes with the guessed constants made symmetric.

    The search drew the values of the inputs backward never differentiates (a
    filter bank, a mask): a backward right only for the values its callers pass
    (symmetric filters) fails on them without a bug (see :mod:`.guessed`).
    """
    positions = guessed_constants(case, args)
    for structure, variant in structured(args, positions):
        try:
            seeded_run(atol, rtol, *differentiable_call(function, variant))
        except OverBudget:
            raise
        except Exception:  # noqa: BLE001 - fails (or raises) with these values too
            continue
        named = ", ".join(f"#{i}" for i in positions)
        pytest.skip(f"{function.__qualname__}: {check} fails on the searched inputs but passes when the searched "
                    f"input(s) {named}, which backward never differentiates (filters, masks, constants), are made "
                    f"{structure}: backward relies on a property of their values that the search can't know (a "
                    "symmetric filter is its own time reversal, a symmetric matrix its own transpose, a filter bank has "
                    "one channel), so a failure "
                    f"on guessed values is no evidence of a bug; {RECORD_HINT}")


def _first_order_differs(call: DifferentiableCall, inputs: tuple[torch.Tensor, ...], atol: float, rtol: float,
                         options: dict[str, Any]) -> str:
    """A line when backward is not forward's derivative on these inputs either, else ''.

    pypose's Lie-group Functions return tangent-space gradients by design: their double
    backward differs from finite differences of backward because the first derivative
    already does, which test_gradcheck reports; one declaration covers both.
    """
    first = {k: v for k, v in options.items() if k in ("eps", "nondet_tol", "fast_mode")}
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            if torch.autograd.gradcheck(call, inputs, atol=atol, rtol=rtol, raise_exception=False,
                                        check_undefined_grad=False, **first):
                return ""
    except OverBudget:
        # Not measured (pypose's recorded 20x8 cases on a loaded machine): the declaration still applies if it does.
        return ("first-order: not compared on these inputs (the check's time limit was reached); if test_gradcheck "
                "fails too and backward is deliberately not the derivative (a tangent-space or surrogate gradient), "
                "declare it on the class: # autograd-lint: surrogate-gradient\n")
    except Exception:  # noqa: BLE001 - a first-order check that raises proves nothing
        return ""
    return ("first-order: backward differs from the finite-difference Jacobian of forward on these inputs too "
            "(test_gradcheck): a double backward through it is not forward's second derivative either; if backward "
            "is deliberately not the derivative (a tangent-space or surrogate gradient), declare it on the class: "
            "# autograd-lint: surrogate-gradient (no derivative comparison is generated then)\n")


def _lowered_outputs(call: DifferentiableCall, inputs: tuple[torch.Tensor, ...]) -> str:
    """The lower-precision dtypes forward returns for float64 inputs (``"float32"``), or ''."""
    try:
        with torch.no_grad():
            dtypes = {str(out.dtype).removeprefix("torch.") for out in call(*inputs)
                      if out.dtype in (torch.float32, torch.float16, torch.bfloat16)}
    except Exception:  # noqa: BLE001 - the check reports what goes wrong
        return ""
    return ", ".join(sorted(dtypes)) if inputs and all(x.dtype == torch.float64 for x in inputs) else ""


def _not_the_derivative(function: Any, case: Case, call: DifferentiableCall, inputs: tuple[torch.Tensor, ...],
                        seeded_run: Callable[..., None], atol: float, rtol: float, seed: int) -> str:
    """After a failed comparison: an expected failure where the run shows backward is not the derivative
    by design (see :mod:`.evidence`) and the gradient contract holds; else a line of evidence, or ''."""
    name = function.__qualname__
    try:
        sampled = random_backward(call, inputs)
        constant = [] if sampled is not None else [
            k for k in constant_outputs(call, inputs) if backward_moves(call, inputs, k)]
        count = len(call(*inputs))
    except OverBudget:
        raise
    except Exception:  # noqa: BLE001 - a probe that fails proves nothing
        return ""
    if sampled is not None:
        gradient_contract(function, case, sampled=True, seed=seed)
        pytest.xfail(f"{name}: backward is random (evidence at run time: two backward passes on the same inputs "
                     f"and output gradients differ by {sampled:.3g} relative): its gradient is a sample, not the "
                     "derivative, which finite differences can't judge; the gradient contract holds (count, "
                     "shapes, finite values, grad_output left unchanged). If it samples by design, declare it on "
                     "the class: # autograd-lint: surrogate-gradient sampled")
    if not constant:
        return _constant_elements(call, inputs, seeded_run, atol, rtol)
    outputs = ", ".join(f"#{k}" for k in constant)
    evidence = (f"evidence at run time: forward is locally constant at output(s) {outputs} (no element moves for a "
                "step of 1e-6 in every input element: the numerical Jacobian is identically zero) while backward "
                "returns a non-zero gradient for it: a surrogate gradient, not the derivative")
    rest = [k for k in range(count) if k not in constant]
    if rest:
        def others(*values: torch.Tensor) -> tuple[torch.Tensor, ...]:
            results = call(*values)
            return tuple(results[k] for k in rest)

        try:
            seeded_run(atol, rtol, others, inputs)
        except OverBudget:
            raise
        except Exception:  # noqa: BLE001 - the other outputs disagree too: the failure stands
            return f"{evidence}; the other outputs disagree with finite differences too\n"
    gradient_contract(function, case, sampled=False, seed=seed)
    agree = "the other outputs agree with finite differences; " if rest else ""
    pytest.xfail(f"{name}: {evidence}; {agree}the gradient contract holds (count, shapes, finite values, "
                 "grad_output left unchanged, deterministic). If the surrogate is by design, declare it on the class "
                 "(# autograd-lint: surrogate-gradient); else forward is wrongly constant")


def _constant_elements(call: DifferentiableCall, inputs: tuple[torch.Tensor, ...],
                       seeded_run: Callable[..., None], atol: float, rtol: float) -> str:
    """After a failed comparison, no output wholly constant: a line where some output elements are locally
    constant with a non-zero backward there, and whether the other elements agree with finite differences; else ''.

    Never an expected failure: a straight-through estimator by design (snntorch's
    ``SpikeTime.Tolerance`` overwrites the elements near their target and passes
    every gradient) and a clamp whose backward forgets its mask look the same at run
    time, and the second is a bug.  The line says which, and the declaration that
    accepts the first.
    """
    try:
        masks = constant_elements(call, inputs)
        if not any(bool(mask.any()) and not bool(mask.all()) for mask in masks) \
                or not backward_moves_at(call, inputs, masks):
            return ""
    except OverBudget:
        raise
    except Exception:  # noqa: BLE001 - a probe that fails proves nothing
        return ""

    def moving(*values: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(out[~mask] for out, mask in zip(call(*values), masks) if not bool(mask.all()))

    still = sum(int(mask.sum()) for mask in masks)
    total = sum(mask.numel() for mask in masks)
    evidence = (f"evidence at run time: forward is locally constant at {still} of {total} output elements (they do "
                "not move for a step of 1e-6 in every input element) while backward returns a non-zero gradient "
                "for them")
    try:
        seeded_run(atol, rtol, moving, inputs)
    except OverBudget:
        raise
    except Exception:  # noqa: BLE001 - the other elements disagree too
        return f"{evidence}; the other elements disagree with finite differences too\n"
    return (f"{evidence}; every other element agrees with finite differences: backward is wrong only where "
            "forward is constant (a mask left out, as in a clamp that passes every gradient), unless it is a "
            "straight-through estimator by design: then declare it on the class (# autograd-lint: "
            "surrogate-gradient)\n")


# Steps of the continuity probe: gradcheck's own eps, and one a hundred times smaller.
_PROBE_STEP = 1e-6
_PROBE_STEP_RATIO = 100.0
_PROBE_DIRECTIONS = 4


def _jump_within_step(call: DifferentiableCall, inputs: tuple[torch.Tensor, ...]) -> str | None:
    """Why finite differences can't judge backward at ``inputs``, when forward jumps there; else None.

    A recorded input can sit exactly on a tie that forward decides (two equal pivots
    of a pivoted Cholesky, a max, a sort): a step of gradcheck's size then changes the
    decision and the output jumps, and the numerical Jacobian is of order 1/eps,
    however right backward is.  Along a few random sign vectors (every element moved
    by the step), a smooth forward's central difference shrinks with the step, a
    hundred times for a hundred times smaller step; a jump's does not.  Asked only
    after a comparison failed, so a passing check costs nothing.
    """
    generator = torch.Generator().manual_seed(SEED)
    small = _PROBE_STEP / _PROBE_STEP_RATIO
    try:
        with torch.no_grad():
            # Below this, a difference is rounding: signs that cancel in a mean give ~1e-17 at both steps.
            scale = max((float(out.abs().max()) for out in call(*inputs) if out.numel()), default=0.0)
            noise = 1e-8 * (1.0 + scale)
            for _ in range(_PROBE_DIRECTIONS):
                signs = [torch.randint(0, 2, x.shape, generator=generator).to(x) * 2 - 1 for x in inputs]

                def difference(step: float, signs: list[torch.Tensor] = signs) -> float:
                    plus = call(*(x + step * s for x, s in zip(inputs, signs)))
                    minus = call(*(x - step * s for x, s in zip(inputs, signs)))
                    return max((float((a - b).abs().max()) for a, b in zip(plus, minus) if a.numel()), default=0.0)

                large, tiny = difference(_PROBE_STEP), difference(small)
                # Smooth: tiny ~ large / 100.  A jump: tiny ~ large (the same tie crossed by both steps).
                if tiny > noise and tiny > large / 10:
                    return (f"forward's output jumps by {tiny:.3g} for a step of {small:g} in every input element "
                            f"(by {large:.3g} for {_PROBE_STEP:g}): it is not continuous here (a tie or a branch "
                            "decided by the inputs' exact values, such as equal pivots or a max), so gradcheck's "
                            "finite differences measure the jump, not the derivative")
    except (Exception, OverBudget):  # noqa: BLE001 - a probe that fails or runs out of time proves nothing
        return None
    return None


def _precision(function: Any, case: Case, args: tuple[Any, ...], run: Callable[..., bool],
               seeded_run: Callable[[float, float], None], atol: float, rtol: float, options: dict[str, Any]) -> str:
    """Two lines on a failed comparison: whether it passes looser (within about 10%), and in float32."""
    looser_atol = max(atol, min(atol * _LOOSER, _LOOSEST_ATOL))
    looser_rtol = max(rtol, min(rtol * _LOOSER, _LOOSEST_RTOL))
    how = (f"{_LOOSER} times looser" if (looser_atol, looser_rtol) == (atol * _LOOSER, rtol * _LOOSER)
           else "with none looser (already as loose as a small mismatch allows)" if (looser_atol, looser_rtol) == (
               atol, rtol) else f"looser (atol={looser_atol:g}, rtol={looser_rtol:g})")
    try:
        # Declared tolerances already this loose: a re-run would only repeat the failure.
        passes = (looser_atol, looser_rtol) != (atol, rtol) and seeded_run(looser_atol, looser_rtol) is None
    except _GradcheckError:
        passes = False
    if passes:
        # Not "no bug": a backward 5% off (`1.05 * cos` for `sin`) passes 100 times looser too.
        looser = (f"fails at atol={atol:g}, rtol={rtol:g}; passes {how}: the mismatch is small "
                  "(within about 10%): an approximate forward (e.g. an iterative solver), ill-conditioned numerics, "
                  "or a formula slightly off; if forward is an approximation, declare the tolerance on the class: "
                  f"# autograd-lint: gradcheck atol={looser_atol:g} rtol={looser_rtol:g}")
    else:
        looser = (f"fails at atol={atol:g}, rtol={rtol:g} and {how}: not a precision problem; "
                  "a wrong formula unless the gradient is deliberately not the derivative (meant only for some "
                  "losses, or a surrogate: declare it with # autograd-lint: surrogate-gradient)")
    return f"{looser}\n{_float32_verdict(function, case, args, run, atol, rtol, options)}\n"


@reported
def check_gradcheck(function: Any, case: Case, atol: float = ATOL, rtol: float = RTOL) -> None:
    """backward agrees with finite differences (within the declared tolerances, if any)."""
    draws = _DRAWS if case.pickled is None and any(
        isinstance(a, TensorInput) and a.values is None for a in case.args) else 1
    for attempt in range(draws):
        _run_gradcheck("gradcheck", "backward differs from the finite-difference Jacobian of forward (gradcheck)",
                       function, case, torch.autograd.gradcheck, atol=atol, rtol=rtol, check_undefined_grad=False,
                       seed=SEED + attempt)
        if not _degenerate(function, case, SEED + attempt):
            return
    pytest.skip(f"{function.__qualname__}: degenerate inputs: on {draws} draw(s) of the inputs forward is locally "
                "constant and backward returns all-zero gradients, so gradcheck compared two zero Jacobians and "
                f"checked nothing; {RECORD_HINT}")


# Input draws tried when gradcheck passed on two zero Jacobians (a surrogate whose threshold zeroed it).
_DRAWS = 3


def _degenerate(function: Any, case: Case, seed: int) -> bool:
    """Whether backward's gradients are all zero and forward locally constant on this draw: nothing was compared."""
    try:
        call, inputs = differentiable_call(function, make_args(function, case, seed=seed))
        return zero_on_both_sides(call, inputs)
    except (Exception, OverBudget):  # noqa: BLE001 - a probe that fails proves nothing
        return False


@reported
def check_gradcheck_non_contiguous(function: Any, case: Case, atol: float = ATOL, rtol: float = RTOL) -> None:
    """backward agrees with finite differences when the inputs are not contiguous, as it does when they are.

    A kernel that assumes contiguous memory (a ``.view`` of an input or a saved
    tensor, pointer or stride arithmetic, a C extension given ``x`` without
    ``.contiguous()``) is right on the fresh tensors of most tests and wrong, or
    raising, on a transposed weight or a slice.
    """
    _run_gradcheck("gradcheck with non-contiguous inputs",
                   "backward and the finite-difference Jacobian of forward disagree on non-contiguous inputs "
                   "(gradcheck)", function, case, torch.autograd.gradcheck, atol=atol, rtol=rtol,
                   non_contiguous=True, check_undefined_grad=False)


@reported
def check_gradgradcheck(function: Any, case: Case, atol: float = ATOL, rtol: float = RTOL) -> None:
    """backward is itself differentiable, correctly."""
    _run_gradcheck(
        "gradgradcheck (double backward)",
        "double backward differs from finite differences of backward (gradgradcheck). backward is not "
        "@once_differentiable, so autograd differentiates through it and returns this wrong second "
        "derivative silently; if it is not meant to be differentiated twice, decorate it with "
        "@once_differentiable",
        function, case, torch.autograd.gradgradcheck, atol=atol, rtol=rtol, double_backward=True,
        check_undefined_grad=False)


@reported
def check_once_differentiable(function: Any, case: Case) -> None:
    """A ``@once_differentiable`` backward raises on double backward instead of returning garbage."""
    call, inputs = differentiable_call(function, make_args(function, case, compares=False))
    outputs = call(*inputs)
    # The grad_outputs must require grad: only then does once_differentiable attach
    # the node that raises on the second differentiation.
    grad_outputs = tuple(torch.randn_like(out).requires_grad_(True) for out in outputs)
    grads = torch.autograd.grad(outputs, inputs, grad_outputs, create_graph=True, allow_unused=True)
    differentiable = [g for g in grads if g is not None and g.requires_grad]
    assert differentiable, "backward is marked @once_differentiable but double backward found no graph to raise from"
    # backward(), not grad(inputs): the raising node hangs off detached copies of
    # the gradients, which a grad() restricted to the inputs would prune.
    with pytest.raises(RuntimeError, match="once_differentiable"):
        torch.autograd.backward(sum(g.sum() for g in differentiable))


@reported
def check_forward_ad(function: Any, case: Case, atol: float = ATOL, rtol: float = RTOL) -> None:
    """jvp agrees with finite differences (forward-mode AD)."""
    _run_gradcheck("gradcheck(check_forward_ad=True)",
                   "jvp differs from finite differences of forward (gradcheck, check_forward_ad=True)",
                   function, case, torch.autograd.gradcheck, atol=atol, rtol=rtol, check_forward_ad=True,
                   check_backward_ad=False, check_undefined_grad=False)


@reported
def check_undefined_grad(function: Any, case: Case, atol: float = ATOL, rtol: float = RTOL) -> None:
    """backward treats undefined (``None``) output gradients as zeros."""
    _run_gradcheck("gradcheck(check_undefined_grad=True)",
                   "backward mishandles undefined (None) output gradients (gradcheck, check_undefined_grad=True)",
                   function, case, torch.autograd.gradcheck, atol=atol, rtol=rtol, check_undefined_grad=True)
