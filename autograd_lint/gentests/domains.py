"""The value domains a Function's forward needs, from evidence in its source.

Searched and drawn inputs are tried in the domains of :data:`harness.DOMAINS`, in
order, until forward returns finite outputs and backward runs.  That finds a
domain when forward *rejects* the others (``cholesky`` raises on a random matrix,
``log`` of a negative number is NaN), but not when forward accepts inputs where
its derivative is not what backward computes: ``eigh`` reads only the lower
triangle of any matrix, so on a random one gradcheck's perturbation of the upper
triangle has no effect while backward returns a symmetric gradient, and the test
fails without a bug.  Evidence in forward puts the domain it needs first:

* symmetric positive definite: ``cholesky`` and its variants, ``eigh``,
  ``eigvalsh``, ``symeig``, ``lobpcg``;
* positive: ``log``, ``log2``, ``log10``, ``sqrt``, ``rsqrt``, ``lgamma``,
  ``digamma``, ``polygamma``, ``mvlgamma``;
* in (0, 1): ``acos``, ``asin``, ``atanh`` (and their ``arc`` names), ``logit``, ``erfinv``.

A call counts wherever it is in forward (``torch.log(x)``, ``x.log()``,
``torch.linalg.cholesky(a)``), whatever it is called on: a domain that is
stronger than needed still gives valid inputs.  Nothing here imports torch.
"""

from __future__ import annotations

import ast
from typing import Sequence

from autograd_lint.gentests.not_derivative import method_ast
from autograd_lint.model.spec import FunctionSpec

# In order of precedence: a symmetric positive-definite matrix is also positive on its diagonal.
EVIDENCE: tuple[tuple[str, frozenset[str]], ...] = (
    ("positive_definite", frozenset({"cholesky", "cholesky_ex", "cholesky_solve", "cholesky_inverse", "eigh",
                                     "eigvalsh", "symeig", "lobpcg"})),
    ("positive", frozenset({"log", "log2", "log10", "sqrt", "rsqrt", "lgamma", "digamma", "polygamma",
                            "mvlgamma"})),
    ("unit", frozenset({"acos", "asin", "atanh", "arccos", "arcsin", "arctanh", "logit", "erfinv"})),
)


def _called_names(function: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
            elif isinstance(node.func, ast.Name):
                names.add(node.func.id)
    return names


def preferred_domains(spec: FunctionSpec, lines: Sequence[str]) -> tuple[str, ...]:
    """The domains forward's calls ask for, strongest first; () without evidence."""
    forward = spec.method("forward")
    # An inherited forward from another file: ``lines`` are not its source.
    tree = method_ast(forward, lines) if forward is not None and forward.path == spec.path else None
    if tree is None:
        return ()
    called = _called_names(tree)
    return tuple(domain for domain, names in EVIDENCE if called & names)
