"""Reading arguments from source: literal values and tensor constructor calls.

``torch.randn(3, 4, dtype=torch.float64)`` becomes a :class:`.inputs.TensorInput`
of shape ``(3, 4)``; ``2``, ``"sum"``, ``(1, 2)``, ``None`` or ``torch.float32``
become a :class:`.inputs.ValueInput` holding their source.  Anything else (a name,
an arithmetic expression, a call of user code) is not a literal: the caller
drops the call site or the default.  Nothing is evaluated and nothing is imported.
"""

from __future__ import annotations

import libcst as cst

from autograd_lint.gentests.inputs import Input, TensorInput, ValueInput
from autograd_lint.model.exprs import node_code
from autograd_lint.model.spec import FunctionSpec


DTYPES = frozenset({
    "float16", "half", "bfloat16", "float32", "float", "float64", "double",
    "complex64", "cfloat", "complex128", "cdouble", "uint8", "int8", "int16", "short",
    "int32", "int", "int64", "long", "bool",
})
_DTYPE_ALIASES = {
    "half": "float16", "float": "float32", "double": "float64", "cfloat": "complex64",
    "cdouble": "complex128", "short": "int16", "int": "int32", "long": "int64",
}
# Constructors whose positional arguments are the sizes (varargs or one sequence).
_SIZE_CONSTRUCTORS = frozenset({"randn", "rand", "zeros", "ones", "empty"})
_CONVERSION_METHODS = {"double": "float64", "float": "float32", "half": "float16", "long": "int64",
                       "int": "int32", "bool": "bool"}




def _torch_attribute(node: cst.BaseExpression, torch_names: frozenset[str]) -> str | None:
    """``x`` for ``torch.x`` (through any alias of torch), else None."""
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value in torch_names
    ):
        return node.attr.value
    return None


def dtype_name(node: cst.BaseExpression, torch_names: frozenset[str]) -> str | None:
    """The canonical dtype name of ``torch.float32``-like expressions."""
    name = _torch_attribute(node, torch_names)
    if name is None or name not in DTYPES:
        return None
    return _DTYPE_ALIASES.get(name, name)


def value_source(node: cst.BaseExpression, torch_names: frozenset[str]) -> str | None:
    """The source of a literal non-tensor value, or None when ``node`` is not one."""
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
        return node_code(node)
    if isinstance(node, cst.ConcatenatedString):
        return node_code(node) if not any(isinstance(p, cst.FormattedString) for p in (node.left, node.right)) else None
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return node.value
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        operand = value_source(node.expression, torch_names)
        if operand is None or not isinstance(node.expression, (cst.Integer, cst.Float, cst.Imaginary)):
            return None
        return node_code(node.operator) + operand
    if isinstance(node, (cst.Tuple, cst.List)):
        items = []
        for element in node.elements:
            if not isinstance(element, cst.Element):
                return None
            item = value_source(element.value, torch_names)
            if item is None:
                return None
            items.append(item)
        if isinstance(node, cst.List):
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    dtype = dtype_name(node, torch_names)
    if dtype is not None:
        return f"torch.{dtype}"
    return None


def _int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


def _sizes(args: list[cst.Arg]) -> tuple[int, ...] | None:
    """Sizes given as ``f(3, 4)`` or ``f((3, 4))``."""
    if len(args) == 1 and isinstance(args[0].value, (cst.Tuple, cst.List)):
        elements = args[0].value.elements
        values = [_int(e.value) if isinstance(e, cst.Element) else None for e in elements]
    else:
        values = [_int(arg.value) for arg in args]
    if any(v is None for v in values):
        return None
    return tuple(v for v in values if v is not None)


def _nested_shape(node: cst.BaseExpression) -> tuple[tuple[int, ...], set[str]] | None:
    """Shape and element kinds ("int", "float", "bool") of a nested list literal."""
    if isinstance(node, (cst.List, cst.Tuple)):
        shapes = []
        kinds: set[str] = set()
        for element in node.elements:
            if not isinstance(element, cst.Element):
                return None
            inner = _nested_shape(element.value)
            if inner is None:
                return None
            shapes.append(inner[0])
            kinds |= inner[1]
        if len(set(shapes)) > 1:
            return None
        return (len(node.elements),) + (shapes[0] if shapes else ()), kinds
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _nested_shape(node.expression)
    if isinstance(node, cst.Integer):
        return (), {"int"}
    if isinstance(node, cst.Float):
        return (), {"float"}
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return (), {"bool"}
    return None


def _constructor(call: cst.Call, torch_names: frozenset[str]) -> TensorInput | None:
    """A tensor made by ``torch.randn(...)``, ``torch.tensor([...])`` and friends."""
    name = _torch_attribute(call.func, torch_names)
    if name is None:
        return None
    positional = [a for a in call.args if a.keyword is None and a.star == ""]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if len(positional) + len(keywords) != len(call.args):
        return None
    shape: tuple[int, ...] | None
    dtype = "float32"
    if name in _SIZE_CONSTRUCTORS:
        sizes = positional or ([cst.Arg(keywords["size"])] if "size" in keywords else [])
        shape = _sizes(sizes) if sizes else None
    elif name == "full" and len(positional) == 2:
        shape = _sizes(positional[:1])
    elif name == "eye" and positional:
        shape = _sizes(positional * 2 if len(positional) == 1 else positional)
    elif name == "randint" and len(positional) in (2, 3):
        shape = _sizes(positional[-1:])
        dtype = "int64"
    elif name == "arange" and len(positional) == 1 and _int(positional[0].value) is not None:
        shape = (_int(positional[0].value) or 0,)
        dtype = "int64"
    elif name == "linspace" and len(positional) == 3 and _int(positional[2].value) is not None:
        shape = (_int(positional[2].value) or 0,)
    elif name == "tensor" and len(positional) == 1:
        nested = _nested_shape(positional[0].value)
        if nested is None:
            return None
        shape, kinds = nested
        dtype = "float32" if "float" in kinds else "bool" if kinds == {"bool"} else "int64"
    else:
        return None
    if shape is None:
        return None
    device = "cpu"
    requires_grad = False
    for keyword, value in keywords.items():
        if keyword == "dtype":
            found = dtype_name(value, torch_names)
            if found is None:
                return None
            dtype = found
        elif keyword == "device":
            if not isinstance(value, cst.SimpleString):
                return None
            device = str(value.evaluated_value)
        elif keyword == "requires_grad":
            if not (isinstance(value, cst.Name) and value.value in ("True", "False")):
                return None
            requires_grad = value.value == "True"
        elif keyword not in ("size", "generator", "layout", "pin_memory"):
            return None
    return TensorInput(shape, dtype, device, requires_grad)


def tensor_input(node: cst.BaseExpression, torch_names: frozenset[str]) -> TensorInput | None:
    """The tensor an expression builds, following ``.requires_grad_()``, ``.double()``, ``.cuda()``."""
    if not isinstance(node, cst.Call):
        return None
    if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call) \
            and _torch_attribute(node.func, torch_names) is None:
        base = tensor_input(node.func.value, torch_names)
        if base is None:
            return None
        method = node.func.attr.value
        args = node.args
        if method == "requires_grad_" and (not args or node_code(args[0].value) == "True"):
            return TensorInput(base.shape, base.dtype, base.device, True)
        if method in _CONVERSION_METHODS and not args:
            return TensorInput(base.shape, _CONVERSION_METHODS[method], base.device, base.requires_grad)
        if method == "cuda" and not args:
            return TensorInput(base.shape, base.dtype, "cuda", base.requires_grad)
        if method == "to" and len(args) == 1:
            dtype = dtype_name(args[0].value, torch_names)
            if dtype is not None:
                return TensorInput(base.shape, dtype, base.device, base.requires_grad)
            if isinstance(args[0].value, cst.SimpleString):
                return TensorInput(base.shape, base.dtype, str(args[0].value.evaluated_value), base.requires_grad)
        return None
    return _constructor(node, torch_names)


def input_of(node: cst.BaseExpression, torch_names: frozenset[str]) -> Input | None:
    """A call argument as an input, or None when it is neither a literal nor a known tensor."""
    tensor = tensor_input(node, torch_names)
    if tensor is not None:
        return tensor
    source = value_source(node, torch_names)
    return ValueInput(source) if source is not None else None


def default_sources(spec: FunctionSpec) -> dict[str, str | None]:
    """Forward parameter name -> source of its default when that is a literal, else None."""
    sources: dict[str, str | None] = {}
    for param in spec.forward_inputs or ():
        if param.default is None:
            continue
        try:
            node = cst.parse_expression(param.default.text)
        except cst.ParserSyntaxError:
            sources[param.name] = None
            continue
        sources[param.name] = value_source(node, frozenset({"torch"}))
    return sources
