"""Low-precision kernels: Functions that can't run in float64, checked against a reference.

A Triton or CUDA kernel usually runs in float32, float16 or bfloat16 only, and
often on one device: gradcheck, which needs float64, cannot check it.  Declared,
its test compares the Function in its own dtype with a reference implementation
(plain PyTorch, taking ``apply``'s arguments) the way kernel libraries test
themselves: outputs and gradients of the Function must be within ``k`` times the
error of the reference itself run in the same dtype, both measured against the
reference run in float64.  A declaration is a comment on the class::

    # autograd-lint: low-precision dtype=bfloat16 device=cuda reference=mypkg.reference.rms_norm
    class RMSNorm(torch.autograd.Function):

or an entry of ``[tool.autograd-lint] low-precision``, which maps a Function's
qualified name to the same options.  ``dtype`` and ``reference`` are required
(``reference`` last: the rest of the line, a dotted name to import or an
expression such as a lambda); ``device`` defaults to ``cpu``; ``k`` to
:data:`DEFAULT_K`.

Nothing here imports torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from autograd_lint.gentests.surrogate import DeclarationError, check_reference, declaration, is_import
from autograd_lint.model.spec import FunctionSpec

# flash-attention's tests allow twice the reference's own error; 3 leaves room for a
# different but valid order of accumulation.
DEFAULT_K = 3.0
DTYPES = ("float32", "float16", "bfloat16")
_DECLARATION = re.compile(r"#\s*autograd-lint:\s*low-precision(?=\s|$)(?P<options>.*)$")
_DEVICE = re.compile(r"^(cpu|cuda|xpu|mps)(:\d+)?$")


@dataclass(frozen=True)
class LowPrecision:
    """A declared low-precision kernel: its dtype and device, the reference's source, the factor ``k``."""

    dtype: str
    reference: str
    device: str = "cpu"
    k: float = DEFAULT_K

    @property
    def reference_is_import(self) -> bool:
        """Whether the reference is a dotted name to import rather than an expression to inline."""
        return is_import(self.reference)

    def arguments(self, reference_source: str) -> str:
        """The keyword arguments a generated test passes to the harness, after a comma."""
        return f", reference={reference_source}, dtype={self.dtype!r}, device={self.device!r}, k={self.k!r}"


def parse_low_precision(text: str, where: str) -> LowPrecision:
    """``text`` (``dtype=bfloat16 device=cuda k=3 reference=...``) as a :class:`LowPrecision`.

    Raises :class:`DeclarationError` naming ``where`` for an unknown option or value,
    an option given twice, or a missing ``dtype`` or ``reference``.
    """
    head, found, reference_text = text.partition("reference=")
    values: dict[str, str] = {}
    for item in re.split(r"[\s,]+", re.sub(r"\s*=\s*", "=", head).strip()):
        if not item:
            continue
        name, _, value = item.partition("=")
        if name not in ("dtype", "device", "k") or name in values:
            problem = "is given twice" if name in values else "is not one of dtype=, device=, k=, reference="
            raise DeclarationError(f"{where}: low-precision option {item!r} {problem}")
        values[name] = value
    dtype = values.get("dtype")
    if dtype not in DTYPES:
        raise DeclarationError(f"{where}: low-precision needs dtype= one of {', '.join(DTYPES)}"
                               + (f", not {dtype!r}" if dtype else ""))
    device = values.get("device", "cpu")
    if not _DEVICE.match(device):
        raise DeclarationError(f"{where}: low-precision device {device!r} is not cpu, cuda, cuda:N, xpu or mps")
    try:
        k = float(values.get("k", DEFAULT_K))
    except ValueError:
        k = math.nan
    if not (math.isfinite(k) and k >= 1):
        raise DeclarationError(f"{where}: low-precision k={values.get('k')!r} is not a number >= 1")
    reference = check_reference(reference_text, where, "low-precision") if found else None
    if reference is None:
        raise DeclarationError(f"{where}: low-precision needs reference= (last): a function taking apply's "
                               "arguments, as a dotted name or an expression")
    return LowPrecision(dtype, reference, device, k)


def declared_low_precision(spec: FunctionSpec, lines: Sequence[str],
                           configured: Mapping[str, str]) -> LowPrecision | None:
    """The low-precision declaration of ``spec`` (its source ``lines``, the configured entries), or None.

    A configured entry wins over a comment, as for surrogate gradients.  Raises
    :class:`DeclarationError` for a declaration that does not parse.
    """
    found = declaration(spec, lines, configured, _DECLARATION, "low-precision")
    return None if found is None else parse_low_precision(*found)
