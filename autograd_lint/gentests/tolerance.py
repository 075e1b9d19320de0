"""Declared gradcheck tolerances: Functions whose forward is an approximation.

A forward computed by an iterative method (Lanczos, conjugate gradients,
bisection) differs from the exact function it approximates by more than
gradcheck's defaults (``atol=1e-5``, ``rtol=1e-3``) allow, while backward is the
exact derivative of that function: gradcheck fails without a bug.  Declared,
the Function's gradcheck-family tests use its tolerances instead.  Declarations
go where surrogate gradients are declared (:mod:`.surrogate`): a comment on the
class::

    # autograd-lint: gradcheck atol=1e-4 rtol=1e-2
    class Diagonalization(torch.autograd.Function):

or an entry of ``[tool.autograd-lint] gradcheck-tolerances``, which maps a
Function's qualified name to the same options (``"atol=1e-4, rtol=1e-2"``).
Either option may be left out (gradcheck's default is kept).

Nothing here imports torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from autograd_lint.gentests.surrogate import DeclarationError, declaration
from autograd_lint.model.spec import FunctionSpec

_DECLARATION = re.compile(r"#\s*autograd-lint:\s*gradcheck(?=\s|$)(?P<options>.*)$")
_OPTIONS = ("atol", "rtol")


@dataclass(frozen=True)
class Tolerance:
    """The declared ``atol`` and ``rtol`` of a Function's gradchecks; None keeps gradcheck's default."""

    atol: float | None = None
    rtol: float | None = None

    def arguments(self) -> str:
        """The keyword arguments a generated test passes to the harness, after a comma."""
        return "".join(f", {name}={value!r}" for name, value in (("atol", self.atol), ("rtol", self.rtol))
                       if value is not None)


def parse_tolerance(text: str, where: str) -> Tolerance:
    """``text`` (``atol=1e-4 rtol=1e-2``, commas or spaces between) as a :class:`Tolerance`.

    Raises :class:`DeclarationError` naming ``where`` for an unknown option, a value
    that is not a finite number >= 0, an option given twice, or no option at all.
    """
    values: dict[str, float] = {}
    for item in re.split(r"[\s,]+", re.sub(r"\s*=\s*", "=", text).strip()):
        if not item:
            continue
        name, _, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if name not in _OPTIONS or name in values or not (math.isfinite(number) and number >= 0):
            problem = "is given twice" if name in values else "is not atol=NUMBER or rtol=NUMBER (a number >= 0)"
            raise DeclarationError(f"{where}: gradcheck tolerance {item!r} {problem}")
        values[name] = number
    if not values:
        raise DeclarationError(f"{where}: gradcheck declaration without a tolerance (write atol=NUMBER, rtol=NUMBER)")
    return Tolerance(values.get("atol"), values.get("rtol"))


def declared_tolerance(spec: FunctionSpec, lines: Sequence[str], configured: Mapping[str, str]) -> Tolerance | None:
    """The gradcheck tolerance declared for ``spec`` (its source ``lines``, the configured entries), or None.

    A configured entry wins over a comment, as for surrogate gradients.  Raises
    :class:`DeclarationError` for a declaration that does not parse.
    """
    found = declaration(spec, lines, configured, _DECLARATION, "gradcheck-tolerances")
    return None if found is None else parse_tolerance(*found)
