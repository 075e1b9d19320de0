"""How forward uses each of its parameters, where that decides the kind of input to make.

Read from the source of ``forward`` (and ``setup_context``) alone; nothing here imports torch.

* ``"integer"``: the parameter is read as a Python number through a tensor method
  (``p.item()``, ``p.tolist()``) or ``int(p)``: a 0-d integer tensor (a dimension,
  a count, an index passed as a tensor);
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
