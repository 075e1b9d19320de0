"""Small helpers that several rules share: message wording and facts about a Function's calls."""

from __future__ import annotations

from autograd_lint.spec import FunctionSpec


def argument_range(function: FunctionSpec) -> tuple[int, int] | None:
    """How many arguments ``apply`` can pass on to forward's inputs: (fewest, most).

    Split style binds forward's defaults (``bind_default_args``), so every input
    is passed; combined style passes what the caller wrote, so an input with a
    default may be left out.  ``None`` when the inputs are unknown.
    """
    inputs = function.forward_inputs
    if inputs is None:
        return None
    if function.is_split_style:
        return len(inputs), len(inputs)
    return sum(1 for p in inputs if p.default is None), len(inputs)
