"""Small helpers that several rules share: message wording and facts about a Function's calls."""

from __future__ import annotations

from autograd_lint.spec import CTX_METHODS, FunctionSpec, MethodSpec


def plural(count: int, word: str) -> str:
    """``1 input``, ``2 inputs``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def short(text: str, limit: int) -> str:
    """``text`` on one line, cut to at most ``limit`` characters (ending in ``...`` when cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def takes_ctx(function: FunctionSpec, name: str) -> bool:
    """Whether the method ``name`` of ``function`` receives ctx as its first parameter:
    setup_context, backward, vjp, jvp..., and forward in combined style."""
    return name in CTX_METHODS or (name == "forward" and function.is_split_style is False)


def ctx_writers(function: FunctionSpec) -> list[MethodSpec]:
    """The methods that fill forward's ctx (ctx APIs, ctx attributes), where they exist:
    setup_context, and forward in combined style."""
    writers = [function.method("setup_context")]
    if function.is_split_style is False:
        writers.append(function.method("forward"))
    return [method for method in writers if method is not None]


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
