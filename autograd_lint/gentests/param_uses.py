"""How forward uses each of its parameters, where that decides the kind of input to make.

Read from the source of ``forward`` (and ``setup_context``) alone; nothing here imports torch.

* ``"integer"``: the parameter is read as a Python number through a tensor method
  (``p.item()``, ``p.tolist()``) or ``int(p)``, in forward or, saved for backward
  (``ctx.save_for_backward(x, dim)``, ``x, dim = ctx.saved_tensors``), in backward:
  a 0-d integer tensor (a dimension, a count, an index passed as a tensor);
* ``"tensor"``: the parameter is used through other tensor attributes
  (``p.to(...)``, ``p.shape``, ``p.float()``) or indexed with a slice or ``None``
  (``p[:, :, None]``): a tensor, never a number.

:func:`parameter_ranks` reads, from the same source, the least number of
dimensions forward's use of a tensor parameter implies, :func:`parameter_sizes`
the sizes of single dimensions it fixes (see there).
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
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names \
                and _indexes_like_a_tensor(node.slice):
            uses.setdefault(node.value.id, TENSOR)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" \
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


def _indexes_like_a_tensor(index: ast.expr) -> bool:
    """An index only a tensor (or array) takes: a tuple with a slice, ``None`` or ``...`` (``p[:, None]``)."""
    if not isinstance(index, ast.Tuple):
        return False
    return any(isinstance(element, ast.Slice) or (isinstance(element, ast.Constant) and element.value in (None, ...))
               for element in index.elts)


# Methods whose first positional argument is a dimension of the tensor they are called on.
_DIMENSION_METHODS = frozenset({"size", "unbind", "select", "narrow", "transpose", "movedim", "split", "chunk",
                                "softmax", "log_softmax", "cumsum", "flip", "sum", "mean", "amax", "amin",
                                "argmax", "argmin", "unflatten"})


def parameter_ranks(spec: FunctionSpec, lines: Sequence[str]) -> dict[str, int]:
    """The least number of dimensions forward's (and ``setup_context``'s) use implies for each parameter.

    Evidence, each about the value the parameter holds before its name is first
    assigned again (``x = x[:, :, None]`` changes it): an index of ``k`` elements
    besides ``None`` and ``...`` (``p[:, 0, :]``: 3); ``a, b, c, d = p.shape``
    (4); ``p.shape[k]``, ``p.shape[-k:]``, ``p.size(k)``, ``p.unbind(k)`` and other
    methods taking a dimension first; a call with ``p`` as first argument and a
    literal ``dim=k`` (``torch.unbind(p, dim=2)``, a helper called with ``dim=3``):
    ``k + 1``, or ``k`` for ``-k``.  The search makes such a tensor with at least that
    many dimensions first (a batch of images for 4): a guess it still falls back from.
    """
    params = spec.forward_inputs
    if params is None:
        return {}
    names = {param.name for param in params}
    ranks: dict[str, int] = {}
    for method_name in ("forward", "setup_context"):
        method = spec.method(method_name)
        tree = method_ast(method, lines) if method is not None else None
        if tree is None:
            continue
        for name, rank in _rank_evidence(tree, names).items():
            ranks[name] = max(rank, ranks.get(name, 0))
    return ranks


def _rank_evidence(tree: ast.FunctionDef, names: set[str]) -> dict[str, int]:
    reassigned = _first_assignments(tree, names)
    found: dict[str, int] = {}

    def note(name_node: ast.expr, rank: int | None) -> None:
        if not isinstance(name_node, ast.Name) or name_node.id not in names or not rank or rank < 1:
            return
        if name_node.lineno > reassigned.get(name_node.id, name_node.lineno):
            return  # a later value of the name, not the argument
        found[name_node.id] = max(rank, found.get(name_node.id, 0))

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) \
                and not any(_is_constant(e, ...) for e in node.slice.elts):
            note(node.value, sum(1 for e in node.slice.elts if not _is_constant(e, None)))
        elif isinstance(node, ast.Subscript) and _is_shape(node.value):
            note(node.value.value, _rank_of_index(node.slice))  # type: ignore[attr-defined]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) \
                and (_is_shape(node.value) or _is_call_of(node.value, "size", 0)) \
                and not any(isinstance(e, ast.Starred) for e in node.targets[0].elts):
            owner = node.value.value if isinstance(node.value, ast.Attribute) else node.value.func.value  # type: ignore[attr-defined]
            note(owner, len(node.targets[0].elts))
        elif isinstance(node, ast.Call):
            dim = next((k.value for k in node.keywords if k.arg in ("dim", "axis")), None)
            if isinstance(node.func, ast.Attribute) and node.func.attr in _DIMENSION_METHODS and node.args \
                    and dim is None:
                dim = node.args[0]
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id in names:
                note(node.func.value, _rank_of_index(dim) if dim is not None else None)
            elif node.args and dim is not None and any(k.arg in ("dim", "axis") for k in node.keywords):
                note(node.args[0], _rank_of_index(dim))
    return found


def parameter_sizes(spec: FunctionSpec, lines: Sequence[str]) -> dict[str, tuple[tuple[int, int], ...]]:
    """Sizes of single dimensions forward's (and ``setup_context``'s) source fixes, as (dim, size) pairs.

    Evidence: the parts of a tensor parameter unbound along a literal dimension and
    unpacked into ``n`` names (``lh, hl, hh = torch.unbind(highs, dim=2)``,
    ``re, im = x.unbind(-1)``): that dimension has ``n`` elements, else the
    unpacking raises.  Read, as ranks are, before the name is assigned again.
    """
    params = spec.forward_inputs
    if params is None:
        return {}
    names = {param.name for param in params}
    sizes: dict[str, dict[int, int]] = {}
    for method_name in ("forward", "setup_context"):
        method = spec.method(method_name)
        tree = method_ast(method, lines) if method is not None else None
        reassigned = _first_assignments(tree, names) if tree is not None else {}
        for node in ast.walk(tree) if tree is not None else ():
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
                    and not any(isinstance(e, ast.Starred) for e in node.targets[0].elts)):
                continue
            unbound = _unbound(node.value)
            if unbound is None or unbound[0].id not in names \
                    or unbound[0].lineno > reassigned.get(unbound[0].id, unbound[0].lineno):
                continue
            sizes.setdefault(unbound[0].id, {})[unbound[1]] = len(node.targets[0].elts)
    return {name: tuple(sorted(found.items())) for name, found in sizes.items()}


def _unbound(value: ast.expr) -> tuple[ast.Name, int] | None:
    """(tensor, literal dim) of ``torch.unbind(p, dim=k)``, ``p.unbind(k)`` and the like, or None."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute) or value.func.attr != "unbind":
        return None
    dims = [k.value for k in value.keywords if k.arg == "dim"]
    owner: ast.expr = value.func.value
    positional = list(value.args)
    if isinstance(owner, ast.Name) and owner.id == "torch":
        if not positional:
            return None
        owner = positional.pop(0)
    dim_node = dims[0] if dims else positional[0] if positional else ast.Constant(0)
    rank = _rank_of_index(dim_node)
    if not isinstance(owner, ast.Name) or rank is None:
        return None
    negative = isinstance(dim_node, ast.UnaryOp) and isinstance(dim_node.op, ast.USub)
    return owner, -rank if negative else rank - 1


def _first_assignments(tree: ast.FunctionDef, names: set[str]) -> dict[str, int]:
    """The line where each of ``names`` is first assigned again in ``tree``."""
    first: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in names:
            first[node.id] = min(node.lineno, first.get(node.id, node.lineno))
    return first


def _is_constant(node: ast.expr, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _is_shape(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name)


def _is_call_of(node: ast.expr, method: str, arguments: int) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method \
        and isinstance(node.func.value, ast.Name) and len(node.args) == arguments and not node.keywords


def _rank_of_index(index: ast.expr) -> int | None:
    """The least rank in which ``index`` (a literal dimension, or a slice ``-k:``) exists, or None."""
    if isinstance(index, ast.Slice):
        index = index.lower if index.lower is not None and index.upper is None else None  # type: ignore[assignment]
        if index is None:
            return None
    value: object = None
    if isinstance(index, ast.Constant):
        value = index.value
    elif isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) and isinstance(index.operand, ast.Constant):
        value = -index.operand.value if isinstance(index.operand.value, int) else None
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value + 1 if value >= 0 else -value
