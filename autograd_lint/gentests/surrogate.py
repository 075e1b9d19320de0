"""Surrogate-gradient Functions: backward is deliberately not the derivative of forward.

A gradient-reversal layer (forward the identity, backward ``-alpha * grad``), a
straight-through estimator (forward ``round``, backward the identity), gradient
clipping and fake quantization must fail ``gradcheck``: that is what they are
for.  Declared as such, they get the checks that still hold instead (see
:mod:`.checks`).  A declaration is either a comment on the class::

    # autograd-lint: surrogate-gradient reference=lambda x, alpha: -alpha * x
    class GradientReversal(torch.autograd.Function):

(``surrogate-gradient sampled`` for a backward whose gradient is a random sample:
no deterministic backward is asked of it)

(on the lines just above the ``class`` line, among its decorators, or at the end
of it), or an entry of ``[tool.autograd-lint] surrogate-gradients``, which maps
a Function's qualified name to its reference (``""`` for none).  The optional
reference is a Python expression for a function taking ``apply``'s arguments
whose *autograd* gradient is what backward means to return: a lambda, or the
dotted name of a function the tests can import.

Nothing here imports torch.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from autograd_lint.model.spec import FunctionSpec

_DECLARATION = re.compile(
    r"#\s*autograd-lint:\s*surrogate-gradient\b(?:\s+sampled\b)?(?:\s+reference=(?P<reference>.*?))?\s*$")
# ``sampled``: backward's gradient is a random sample, so no determinism is asked of it.
_SAMPLED = re.compile(r"#\s*autograd-lint:\s*surrogate-gradient\s+sampled\b")
_DOTTED_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")


@dataclass(frozen=True)
class Surrogate:
    """A declared surrogate gradient; ``reference`` is the source of the reference function, if any."""

    reference: str | None
    # Not declared: recognised by :mod:`.not_derivative`, which says why.
    inferred: str | None = None
    # backward draws random numbers (:func:`.not_derivative.sampled_gradient`): no determinism is asked of it.
    sampled: bool = False

    @property
    def reference_is_import(self) -> bool:
        """Whether the reference is a dotted name to import rather than an expression to inline."""
        return self.reference is not None and is_import(self.reference)


def is_import(reference: str) -> bool:
    """Whether a declared reference is a dotted name to import rather than an expression to inline."""
    return _DOTTED_NAME.match(reference) is not None


class DeclarationError(Exception):
    """A declaration gen-tests cannot use: a reference that is not an expression, a bad :mod:`.tolerance`."""


def check_reference(reference: str, where: str, declaration: str = "surrogate-gradient") -> str | None:
    """``reference`` stripped, None when empty.

    Raises :class:`DeclarationError` naming ``where`` and the ``declaration`` when it is not an expression.
    """
    text = reference.strip()
    if not text:
        return None
    try:
        ast.parse(text, mode="eval")
    except SyntaxError as error:
        message = f"{where}: {declaration} reference is not a Python expression: {error.msg}"
        raise DeclarationError(message) from None
    return text


def comment_lines(spec: FunctionSpec, lines: Sequence[str]) -> list[tuple[int, str]]:
    """The ``class`` line and the comment and decorator lines directly above it, as (line number, text)."""
    header = spec.position.line
    found = [(header, lines[header - 1])] if 0 < header <= len(lines) else []
    number = header - 1
    while number >= 1:
        text = lines[number - 1].strip()
        if not (text.startswith("#") or text.startswith("@")):
            break
        found.append((number, text))
        number -= 1
    return found


def declaration(spec: FunctionSpec, lines: Sequence[str], configured: Mapping[str, str], comment: re.Pattern[str],
                key: str) -> tuple[str, str] | None:
    """The text of a gen-tests declaration of ``spec`` and where it was written, or None.

    A configured entry of ``[tool.autograd-lint] <key>`` wins over a comment on the
    class matching ``comment``, whose first group is the text (absent: empty).
    """
    if spec.full_name in configured:
        return configured[spec.full_name], f"[tool.autograd-lint] {key} {spec.full_name!r}"
    for number, text in comment_lines(spec, lines):
        match = comment.search(text)
        if match is not None:
            return match.group(1) or "", f"{spec.path}:{number}"
    return None


def declared_surrogate(spec: FunctionSpec, lines: Sequence[str], configured: Mapping[str, str]) -> Surrogate | None:
    """How ``spec`` is declared a surrogate (its source ``lines``, the configured entries), or None.

    Raises :class:`DeclarationError` for a reference that does not parse.
    """
    found = declaration(spec, lines, configured, _DECLARATION, "surrogate-gradients")
    if found is None:
        return None
    sampled = any(_SAMPLED.search(text) for _, text in comment_lines(spec, lines))
    return Surrogate(check_reference(*found), sampled=sampled)
