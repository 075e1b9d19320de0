"""Run-time support of the generated tests: the names the generated test modules import.

A stable facade over :mod:`autograd_lint.gentests.runtime`, where each concept has
its module: test modules that ``autograd-lint gen-tests`` wrote keep importing
``from autograd_lint.gentests.harness import ...`` however the runtime is laid out.
A generated test states *what* to check on *which* input case; everything that
needs torch (making tensors, finding a shape the forward accepts, calling
gradcheck) happens in the runtime, so that the generated files stay short and
readable.  The command (``autograd-lint gen-tests``) never imports this module.
"""

from __future__ import annotations

from autograd_lint.gentests.runtime.arguments import BATCH_SIZE, DOMAINS, SCALAR_CANDIDATES, SEED
from autograd_lint.gentests.runtime.budget import CHECK_SECONDS_VARIABLE, DEFAULT_CHECK_SECONDS
from autograd_lint.gentests.runtime.calls import FAST_MODE_THRESHOLD
from autograd_lint.gentests.runtime.cases import (
    Case,
    RecordedProcessGroup,
    ScalarInput,
    TensorInput,
    any_scalar,
    any_tensor,
    in_place,
    recorded,
    recorded_function,
    tensor,
)
from autograd_lint.gentests.runtime.contract import check_non_tensor_grads_are_none, check_subclass_gradients
from autograd_lint.gentests.runtime.environment import import_subject, recorded_process_group, requires_device
from autograd_lint.gentests.runtime.gradchecks import (
    check_forward_ad,
    check_gradcheck,
    check_gradcheck_non_contiguous,
    check_gradgradcheck,
    check_once_differentiable,
    check_undefined_grad,
)
from autograd_lint.gentests.runtime.low_precision import check_low_precision
from autograd_lint.gentests.runtime.parity import check_compile_parity, check_vmap
from autograd_lint.gentests.runtime.search import make_args
from autograd_lint.gentests.runtime.surrogate import (
    check_surrogate_gradients,
    check_surrogate_reference,
    load_reference,
)

__all__ = [
    "BATCH_SIZE", "CHECK_SECONDS_VARIABLE", "DEFAULT_CHECK_SECONDS", "DOMAINS", "FAST_MODE_THRESHOLD",
    "SCALAR_CANDIDATES", "SEED", "Case", "RecordedProcessGroup", "ScalarInput", "TensorInput", "any_scalar",
    "any_tensor", "check_compile_parity", "check_forward_ad", "check_gradcheck", "check_gradcheck_non_contiguous",
    "check_gradgradcheck", "check_low_precision", "check_non_tensor_grads_are_none", "check_once_differentiable",
    "check_subclass_gradients", "check_surrogate_gradients", "check_surrogate_reference", "check_undefined_grad",
    "check_vmap", "import_subject", "in_place", "load_reference", "make_args", "recorded", "recorded_function",
    "recorded_process_group", "requires_device", "tensor",
]
