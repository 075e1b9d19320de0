"""Which checks a Function gets, decided from its spec alone.

Each check is one generated test method calling one function of :mod:`.harness`.
"""

from __future__ import annotations

import enum

from autograd_lint.gentests.inputs import FunctionInputs, TensorInput
from autograd_lint.gentests.surrogate import Surrogate
from autograd_lint.model.spec import FunctionSpec


class Check(enum.Enum):
    """A generated test: the value is the test method's name without ``test_``."""

    GRADCHECK = "gradcheck"
    NON_CONTIGUOUS = "gradcheck_non_contiguous"
    GRADGRADCHECK = "gradgradcheck"
    ONCE_DIFFERENTIABLE = "double_backward_raises"
    FORWARD_AD = "forward_ad"
    VMAP = "vmap"
    UNDEFINED_GRAD = "undefined_grad"
    NON_TENSOR_GRADS = "non_tensor_grads_are_none"
    SUBCLASS_GRADIENTS = "subclass_gradients"
    SURROGATE_GRADIENTS = "surrogate_gradients"
    SURROGATE_REFERENCE = "surrogate_reference"
    COMPILE_PARITY = "compile_parity"
    LOW_PRECISION = "low_precision"

    @property
    def harness_function(self) -> str:
        return _HARNESS_FUNCTIONS[self]

    @property
    def runs_gradcheck(self) -> bool:
        """Whether the check compares with finite differences, so that a declared tolerance applies."""
        return self in _GRADCHECK_FAMILY


_HARNESS_FUNCTIONS = {
    Check.GRADCHECK: "check_gradcheck",
    Check.NON_CONTIGUOUS: "check_gradcheck_non_contiguous",
    Check.GRADGRADCHECK: "check_gradgradcheck",
    Check.ONCE_DIFFERENTIABLE: "check_once_differentiable",
    Check.FORWARD_AD: "check_forward_ad",
    Check.VMAP: "check_vmap",
    Check.UNDEFINED_GRAD: "check_undefined_grad",
    Check.NON_TENSOR_GRADS: "check_non_tensor_grads_are_none",
    Check.SUBCLASS_GRADIENTS: "check_subclass_gradients",
    Check.SURROGATE_GRADIENTS: "check_surrogate_gradients",
    Check.SURROGATE_REFERENCE: "check_surrogate_reference",
    Check.COMPILE_PARITY: "check_compile_parity",
    Check.LOW_PRECISION: "check_low_precision",
}

_GRADCHECK_FAMILY = frozenset({Check.GRADCHECK, Check.NON_CONTIGUOUS, Check.GRADGRADCHECK, Check.FORWARD_AD,
                               Check.UNDEFINED_GRAD, Check.VMAP})


def disables_grad_materialisation(spec: FunctionSpec) -> bool:
    """Whether a method calls ``ctx.set_materialize_grads(False)``."""
    return any(
        call.args and call.args[0].text == "False"
        for method in spec.effective_methods.values()
        for call in method.calls("set_materialize_grads")
    )


def _may_pass_a_matrix(inputs: FunctionInputs) -> bool:
    """Whether a case may have a floating tensor input of 2 or more dimensions, none of size 1.

    Only such an input can be passed non-contiguous with its shape kept (transposed
    memory layout); a searched shape may turn out to be one.
    """
    return any(
        isinstance(arg, TensorInput) and arg.is_differentiable and arg.subclass is None
        and (arg.shape is None or (len(arg.shape) >= 2 and min(arg.shape[-2:]) > 1))
        for case in inputs.cases for arg in case.args
    )


def marks_inputs_dirty(spec: FunctionSpec) -> bool:
    """Whether forward or ``setup_context`` calls ``ctx.mark_dirty``: forward modifies an input in place.

    Its tests call it on clones of the arguments, as torch's own OpInfos do
    (``NumpyExp_.apply(x.clone())``): autograd refuses to modify a leaf that
    requires grad, and finite differences need the input unchanged between calls.
    """
    return any(spec.method(name) is not None and spec.method(name).calls("mark_dirty")  # type: ignore[union-attr]
               for name in ("forward", "setup_context"))


def checks_for(
    spec: FunctionSpec, inputs: FunctionInputs, surrogate: Surrogate | None = None, compile_parity: bool = False,
    low_precision: bool = False, random_forward: bool = False,
) -> tuple[Check, ...]:
    """The checks of ``spec``, in a fixed order; () when it has no backward.

    ``compile_parity`` (``gen-tests --compile-parity``) adds eager vs compiled outputs and gradients.

    A declared low-precision kernel (``low_precision``) can't run in float64, where
    every other check runs: it gets the comparison with its reference alone.

    A surrogate-gradient Function gets no check that compares backward with the
    derivative of forward (gradcheck, gradgradcheck, forward AD, undefined
    gradients): they must fail on it.  It gets the checks that still hold.

    A Function whose forward draws random numbers (``random_forward``) keeps them
    (they skip at run time when forward's outputs differ under two seeds) and gets
    the gradient contract too, which holds whatever forward draws.
    """
    backward = spec.backward_method
    if backward is None:
        return ()
    if low_precision:
        return (Check.LOW_PRECISION,)
    if surrogate is not None:
        # An undeclared one keeps gradcheck, as an expected failure (see .render).
        checks = [Check.GRADCHECK] if surrogate.inferred is not None else []
        checks.append(Check.SURROGATE_GRADIENTS)
        if surrogate.reference is not None:
            checks.append(Check.SURROGATE_REFERENCE)
        if backward.is_once_differentiable:
            checks.append(Check.ONCE_DIFFERENTIABLE)
    else:
        checks = [Check.GRADCHECK]
        if _may_pass_a_matrix(inputs):
            checks.append(Check.NON_CONTIGUOUS)
        checks.append(Check.ONCE_DIFFERENTIABLE if backward.is_once_differentiable else Check.GRADGRADCHECK)
        if spec.method("jvp") is not None:
            checks.append(Check.FORWARD_AD)
        if random_forward:
            checks.append(Check.SURROGATE_GRADIENTS)
    if spec.method("vmap") is not None or spec.attribute_is_true("generate_vmap_rule"):
        checks.append(Check.VMAP)
    if surrogate is None and disables_grad_materialisation(spec):
        checks.append(Check.UNDEFINED_GRAD)
    if any(case.has_non_tensor for case in inputs.cases):
        checks.append(Check.NON_TENSOR_GRADS)
    if any(isinstance(arg, TensorInput) and arg.subclass is not None for case in inputs.cases for arg in case.args):
        # gradcheck can't perturb a subclass argument: what its gradient must satisfy is checked instead.
        checks.append(Check.SUBCLASS_GRADIENTS)
    if compile_parity:
        checks.append(Check.COMPILE_PARITY)
    return tuple(checks)
