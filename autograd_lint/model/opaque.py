"""Calls of a method body into code that autograd cannot see through.

A Triton kernel launch (``kernel[grid](...)``), a cuTile launch (``cuda.tile.launch``),
a function of a compiled extension module (a module named ``*_cuda``, ``*_C``,
``*_ext``, ``*_cpp``, or bound by ``torch.utils.cpp_extension.load(...)`` in the module) or of a module inside a ``triton`` package of the project
(``from pkg.ops.triton.conv import conv_bwd``), and a function of this module whose
``def`` launches a Triton kernel: what such a call writes or returns has no autograd
history, whatever its arguments had.

Decided from the text alone: a call that none of these shapes fits (a helper from
another module, ``torch.ops.<namespace>.<op>``, whose autograd registration is not
visible) is not opaque here, only not known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from autograd_lint.model.analysis import _def_uses
from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.semantic import How, MethodModel

# Module names of compiled extensions (`fused_layer_norm_cuda`, `amp_C`, `my_ext`).
_EXTENSION_MODULE = re.compile(r"(?:_cuda|_C|_ext|_cpp|_cuda_ext)$")
_CUTILE_LAUNCH = frozenset({"cuda.tile.launch"})
# A Triton launch in a `def` block's text: `name[grid](`, `name[(n,)](`, `name[lambda ...](`.
_BRACKETED = r"(?:[^\[\]\n]|\[[^\[\]\n]*\])*"  # one level of nested brackets: `[(x.shape[0],)]`
_TRITON_LAUNCH_TEXT = re.compile(
    rf"\w\[[ \t]*(?:grid\b|\(|lambda\b){_BRACKETED}\][ \t]*\(|kernel\w*\[{_BRACKETED}\][ \t]*\("
)


# What a call of a compiled extension module's function is (OpaqueCall.what).
EXTENSION_FUNCTION = "a function of a compiled extension module"


@dataclass(frozen=True)
class OpaqueCall:
    """A call into code autograd can't differentiate: the call, the callee as written
    (``kernel[grid]``, ``ext.ln_bwd``), and what it is (``a Triton kernel launch``)."""

    call: cst.Call
    callee: str
    what: str


def is_triton_launch(call: cst.Call) -> bool:
    """``kernel[grid](...)``: a subscripted name called, where the subscript is a grid
    (a tuple, a lambda, a call, a name containing ``grid``) or the name is a kernel's.
    ``layers[i](x)`` (a list of callables) is not one."""
    func = call.func
    if not isinstance(func, cst.Subscript) or len(func.slice) != 1:
        return False
    name = dotted_name(func.value)
    if name is None:
        return False
    index = func.slice[0].slice
    if not isinstance(index, cst.Index):
        return False
    value = index.value
    if isinstance(value, (cst.Tuple, cst.Lambda, cst.Call)):
        return True
    if isinstance(value, cst.Name) and "grid" in value.value.lower():
        return True
    return "kernel" in name.rsplit(".", 1)[-1].lower()


def opaque_call(model: MethodModel, call: cst.Call, module_text: str | None = None) -> OpaqueCall | None:
    """What ``call`` (a call of ``model``'s body) is, when autograd can't see through it.

    ``module_text`` (the file's text) lets a call of a function this module defines be
    followed into that ``def``; without it such a call is not known to be opaque."""
    if is_triton_launch(call):
        assert isinstance(call.func, cst.Subscript)
        callee = dotted_name(call.func.value) or "kernel"
        return OpaqueCall(call, f"{callee}[...]", "a Triton kernel launch")
    name = dotted_name(call.func)
    if name is None:
        return None
    head = name.split(".", 1)[0]
    local = [b for b in model.bindings_of(head) if b.how is not How.NARROWING]
    if local and any(b.how is not How.IMPORT for b in local):
        return None  # a local value: what it holds is not known
    qualified = model.imports.resolve(name)
    if qualified is None or qualified.startswith("builtins."):
        if not local and "." not in name and module_text is not None and _def_uses(module_text, name, _TRITON_LAUNCH_TEXT):
            return OpaqueCall(call, name, "a function of this module that launches a Triton kernel")
        if not local and "." in name and module_text is not None and _is_loaded_extension(model, module_text, head):
            return OpaqueCall(call, name, EXTENSION_FUNCTION)
        return None
    if qualified in _CUTILE_LAUNCH:
        return OpaqueCall(call, name, "a cuTile kernel launch")
    parts = qualified.split(".")
    modules = parts[:-1]
    if parts[0] == "torch":
        return None  # torch._C and the like: torch's own differentiable bindings
    if any(_EXTENSION_MODULE.search(part) for part in modules):
        return OpaqueCall(call, name, EXTENSION_FUNCTION)
    if "triton" in modules[1:]:
        module = ".".join(modules)
        return OpaqueCall(call, name, f"a function of the Triton module `{module}`")
    return None


# What makes a function of this module more than torch code: a Triton or cuTile launch,
# a compiled extension's function, a torch.ops call (its autograd registration is not
# visible), numpy or a tensor's host copy.
_NOT_TORCH_TEXT = re.compile(
    _TRITON_LAUNCH_TEXT.pattern
    + r"|\b\w+(?:_cuda|_C|_ext|_cpp)\.\w+\s*\(|\btorch\.ops\.|\bnp\.|\bnumpy\b|\.numpy\(|\.item\(|\.tolist\(|"
    r"\.data_ptr\(|\blaunch\(|\bctypes\b|\bcupy\b"
)
_TORCH_TEXT = re.compile(r"\btorch\.|\.(?:sum|mean|mul|matmul|exp|log|sqrt|pow|reshape|view|expand|clamp)\(|[-+*/@]")


def is_torch_helper(model: MethodModel, call: cst.Call, module_text: str | None) -> bool:
    """Whether ``call`` calls a function this module defines (``def name`` in its
    text, ``name`` not bound in the body) whose ``def`` reads as torch code: tensor
    math, and nothing of what :func:`opaque_call` or a host round trip looks for.
    Autograd sees through such a helper as through the backward's own torch code."""
    if module_text is None or not isinstance(call.func, cst.Name):
        return False
    name = call.func.value
    if model.bindings_of(name) or not re.search(rf"^def[ \t]+{re.escape(name)}\b", module_text, re.MULTILINE):
        return False
    return _def_uses(module_text, name, _TORCH_TEXT) and not _def_uses(module_text, name, _NOT_TORCH_TEXT)


_LOADERS = frozenset({"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"})


def _is_loaded_extension(model: MethodModel, module_text: str, name: str) -> bool:
    """Whether the module binds ``name`` only by ``name = load(...)`` (or ``load_inline``)
    of ``torch.utils.cpp_extension``: a compiled extension built at import."""
    bound = re.findall(rf"^[ \t]*{re.escape(name)}[ \t]*=[ \t]*([\w.]+)\(", module_text, re.MULTILINE)
    return bool(bound) and all(model.imports.resolve(callee) in _LOADERS for callee in bound)


def opaque_calls(model: MethodModel, module_text: str | None = None) -> list[OpaqueCall]:
    """The opaque calls of ``model``'s body, in walk order."""
    found = []
    for _, call in model.calls:
        opaque = opaque_call(model, call, module_text)
        if opaque is not None:
            found.append(opaque)
    return found
