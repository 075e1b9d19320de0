"""How forward uses each of its parameters, where that decides the kind of input to make.

Read from the source of ``forward`` (and ``setup_context``) alone; nothing here imports torch.

* ``"integer"``: the parameter is read as a Python number through a tensor method
  (``p.item()``, ``p.tolist()``) or ``int(p)``, in forward or, saved for backward
  (``ctx.save_for_backward(x, dim)``, ``x, dim = ctx.saved_tensors``), in backward:
  a 0-d integer tensor (a dimension, a count, an index passed as a tensor);
* ``"tensor"``: the parameter is used through other tensor attributes
  (``p.to(...)``, ``p.shape``, ``p.float()``): a tensor, never a number.
"""

from __future__ import annotations

import ast
from typing import Sequence

from autograd_lint.gentests.not_derivative import method_ast
from autograd_lint.model.spec import FunctionSpec

INTEGER = "integer"
TENSOR = "tensor"

_AS_NUMBER = frozenset({"item", "tolist"})


def parameter_uses(spec: FunctionSpec, lines: Sequence[str]) -> dict[str, str]:
    """The use of each forward input that decides its kind (see the module docstring); others absent."""
    params = spec.forward_inputs
    if params is None:
        return {}
    names = {param.name for param in params}
    uses: dict[str, str] = {}
    for method_name in ("forward", "setup_context"):
        method = spec.method(method_name)
        tree = method_ast(method, lines) if method is not None else None
        if tree is None:
            continue
        for name, use in _direct_uses(tree, names).items():
            if use == INTEGER or name not in uses:
                uses[name] = use
    for name, use in _uses_through_saved_tensors(spec, lines, names).items():
        if use == INTEGER or name not in uses:
            uses[name] = use
    return uses


def _direct_uses(tree: ast.FunctionDef, names: set[str]) -> dict[str, str]:
    uses: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in names:
            uses[node.args[0].id] = INTEGER
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            if node.attr in _AS_NUMBER:
                uses[node.value.id] = INTEGER
            else:
                uses.setdefault(node.value.id, TENSOR)
    return uses


def _uses_through_saved_tensors(spec: FunctionSpec, lines: Sequence[str], names: set[str]) -> dict[str, str]:
    """Uses in backward of the parameters forward saves (``ctx.save_for_backward(x, dim)`` in forward,
    ``x, dim = ctx.saved_tensors`` then ``dim.item()`` in backward), by forward's names."""
    saved: list[str | None] = []
    for method_name in ("forward", "setup_context"):
        method = spec.method(method_name)
        tree = method_ast(method, lines) if method is not None else None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "save_for_backward":
                saved = [arg.id if isinstance(arg, ast.Name) and arg.id in names else None for arg in node.args]
    backward = spec.backward_method
    tree = method_ast(backward, lines) if backward is not None and saved else None
    if tree is None:
        return {}
    renamed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Attribute) \
                and node.value.attr in ("saved_tensors", "saved_variables") \
                and isinstance(node.targets[0], (ast.Tuple, ast.List)):
            for target, original in zip(node.targets[0].elts, saved):
                if isinstance(target, ast.Name) and original is not None:
                    renamed[target.id] = original
    found = _direct_uses(tree, set(renamed))
    return {renamed[name]: use for name, use in found.items() if use == INTEGER}
