"""What an expression evaluates to (tensor, non-tensor, None), as far as syntax can tell.

Rules only act on certainty: a rule about tensors fires on :attr:`Kind.TENSOR`, a
rule about non-tensors on :attr:`Kind.NON_TENSOR`, and everything that syntax
cannot decide is :attr:`Kind.UNKNOWN`.  The vocabularies below are deliberately
small: a method that numpy arrays or Python objects also have (``sum``, ``max``,
``copy``) does not make its receiver a tensor.
"""

from __future__ import annotations

from typing import Mapping

import libcst as cst

from autograd_lint.model.imports import ImportMap
from autograd_lint.model.spec import Kind

# Methods that only tensors have, or that only return tensors from a tensor.
TENSOR_METHODS = frozenset(
    """
    clone detach contiguous view view_as reshape_as expand expand_as to float double half
    bfloat16 cuda cpu type_as exp log sigmoid tanh relu softmax log_softmax matmul mm bmm
    addmm unsqueeze squeeze_ permute transpose t narrow select index_select masked_fill
    new_empty new_zeros new_ones new_full new_tensor flatten unflatten repeat_interleave
    sign abs neg sqrt rsqrt pow mul div add sub clamp gather scatter where reciprocal sin cos
    """.split()
)
# Methods whose receiver is certainly a tensor (numpy has none of them).
TENSOR_ONLY_METHODS = frozenset(
    """
    clone detach contiguous view view_as expand expand_as type_as dim numel is_contiguous
    new_empty new_zeros new_ones new_full new_tensor data_ptr untyped_storage element_size
    masked_fill index_select unsqueeze narrow half bfloat16 cuda requires_grad_ size
    """.split()
)
# Tensor methods that return their receiver itself when there is nothing to do
# (already contiguous, already that dtype or device): checked on torch 2.13.
SELF_RETURNING_METHODS = frozenset(
    "contiguous to float double half bfloat16 type type_as cpu cuda flatten".split()
)
# Calls on a tensor that give plain Python values.
NON_TENSOR_METHODS = frozenset(
    "size dim numel item tolist stride data_ptr element_size is_contiguous get_device "
    "storage_offset nelement ndimension is_floating_point is_complex".split()
)
NON_TENSOR_ATTRIBUTES = frozenset(
    "shape dtype device ndim is_cuda is_sparse is_leaf requires_grad layout is_meta".split()
)
# (``max``, ``min``, ``sum``, ``abs``, ``round`` and ``getattr`` are left out: on
# tensors they give tensors.)
NON_TENSOR_BUILTINS = frozenset(
    "int float bool str len tuple list dict set range isinstance type "
    "hash id repr sorted enumerate zip frozenset hasattr callable".split()
)
# torch.<name> calls that do not return a tensor (or return state that is kept on
# purpose, such as RNG state).
TORCH_NON_TENSOR_CALLS = frozenset(
    "finfo iinfo Size device dtype Generator Stream Event no_grad enable_grad inference_mode "
    "set_grad_enabled autocast get_rng_state set_rng_state manual_seed seed initial_seed "
    "compile jit typename numel result_type promote_types can_cast broadcast_shapes".split()
)
TORCH_TENSOR_NAMESPACES = frozenset(
    {"torch.nn.functional", "torch.linalg", "torch.fft", "torch.special"}
)
# ctx attributes that hold the saved tensors (``saved_variables`` is the deprecated name).
SAVED_ATTRIBUTES = frozenset({"saved_tensors", "saved_variables"})
NON_TENSOR_ANNOTATIONS = frozenset(
    "int float bool str tuple list dict set complex bytes torch.dtype torch.device dtype device "
    "Callable typing.Callable Tuple List Dict Sequence typing.Tuple typing.List typing.Dict "
    "torch.Size Size".split()
)


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of attributes over a name, else ``None``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted_name(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


def ctx_attribute(node: cst.BaseExpression, ctx_name: str | None) -> str | None:
    """``attr`` when ``node`` is ``<ctx_name>.attr``, else ``None``."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == ctx_name:
        return node.attr.value
    return None


def annotation_kind(annotation: str | None) -> Kind:
    """The kind a parameter annotation promises."""
    if annotation is None:
        return Kind.UNKNOWN
    text = annotation.replace(" ", "").strip("'\"")
    if "Tensor" in text:
        return Kind.TENSOR
    head = text.split("[", 1)[0]
    if head in NON_TENSOR_ANNOTATIONS:
        return Kind.NON_TENSOR
    return Kind.UNKNOWN


def is_literal(node: cst.BaseExpression) -> bool:
    """A number, string, bool or ``None`` literal (signs allowed)."""
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
        return True
    if isinstance(node, (cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return True
    if isinstance(node, cst.UnaryOperation):
        return is_literal(node.expression)
    return False


def is_none(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


CONTAINERS = (
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)


class Classifier:
    """Classifies expressions of one method, given what is known about its names."""

    def __init__(self, imports: ImportMap, names: Mapping[str, Kind]) -> None:
        self.imports = imports
        self.names = names

    def kind(self, node: cst.BaseExpression) -> Kind:
        if is_none(node):
            return Kind.NONE
        if is_literal(node) or isinstance(node, CONTAINERS) or isinstance(node, cst.Lambda):
            return Kind.NON_TENSOR
        if isinstance(node, cst.Name):
            return self.names.get(node.value, Kind.UNKNOWN)
        if isinstance(node, cst.Attribute):
            return self._attribute(node)
        if isinstance(node, cst.Call):
            return self._call(node)
        if isinstance(node, cst.BinaryOperation):
            return self._combine(self.kind(node.left), self.kind(node.right), node.operator)
        if isinstance(node, cst.UnaryOperation):
            if isinstance(node.operator, cst.Not):
                return Kind.NON_TENSOR
            return self.kind(node.expression)
        if isinstance(node, cst.Subscript):
            return self._subscript(node)
        if isinstance(node, cst.Comparison) or isinstance(node, cst.BooleanOperation):
            return Kind.UNKNOWN  # tensor comparisons give tensors
        return Kind.UNKNOWN

    def _subscript(self, node: cst.Subscript) -> Kind:
        base = self.kind(node.value)
        if base is Kind.TENSOR:
            return Kind.TENSOR
        # An element of a list or tuple may be a tensor; an element of a shape,
        # size or stride is an int.
        value = node.value
        if isinstance(value, cst.Attribute) and value.attr.value == "shape":
            return Kind.NON_TENSOR
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("size", "stride")
            and base is Kind.NON_TENSOR
        ):
            return Kind.NON_TENSOR
        return Kind.UNKNOWN

    def _attribute(self, node: cst.Attribute) -> Kind:
        attr = node.attr.value
        if attr in NON_TENSOR_ATTRIBUTES:
            return Kind.NON_TENSOR
        if attr in ("T", "mT", "H", "mH", "real", "imag") and self.kind(node.value) is Kind.TENSOR:
            return Kind.TENSOR
        return Kind.UNKNOWN

    def _call(self, node: cst.Call) -> Kind:
        func = node.func
        name = dotted_name(func)
        if isinstance(func, cst.Name):
            if func.value in NON_TENSOR_BUILTINS and func.value not in self.names:
                return Kind.NON_TENSOR
            return Kind.UNKNOWN
        if not isinstance(func, cst.Attribute):
            return Kind.UNKNOWN
        qualified = self.imports.resolve(name) if name else None
        if qualified is not None and (qualified == "torch" or qualified.startswith("torch.")):
            return self._torch_call(qualified)
        if qualified is not None:
            return Kind.UNKNOWN  # numpy, math, another module's function
        method = func.attr.value
        receiver = self.kind(func.value)
        if receiver is Kind.NON_TENSOR:
            return Kind.UNKNOWN
        if method in NON_TENSOR_METHODS and receiver is Kind.TENSOR:
            return Kind.NON_TENSOR
        if method in ("size", "dim", "numel", "item", "tolist", "stride", "data_ptr"):
            return Kind.NON_TENSOR
        if method in TENSOR_METHODS and (receiver is Kind.TENSOR or method in TENSOR_ONLY_METHODS):
            return Kind.TENSOR
        return Kind.UNKNOWN

    @staticmethod
    def _torch_call(qualified: str) -> Kind:
        namespace, _, function = qualified.rpartition(".")
        if namespace == "torch":
            if function in TORCH_NON_TENSOR_CALLS or function.startswith(("is_", "get_", "set_", "_")):
                return Kind.UNKNOWN
            if function[:1].isupper():
                return Kind.UNKNOWN  # classes: torch.Size, torch.Generator, ...
            return Kind.TENSOR
        if namespace in TORCH_TENSOR_NAMESPACES and not function.startswith("_"):
            return Kind.TENSOR
        return Kind.UNKNOWN

    @staticmethod
    def _combine(left: Kind, right: Kind, operator: cst.BaseBinaryOp) -> Kind:
        if isinstance(operator, cst.MatrixMultiply):
            return Kind.TENSOR
        if Kind.TENSOR in (left, right) and Kind.NONE not in (left, right):
            return Kind.TENSOR
        if left is Kind.NON_TENSOR and right is Kind.NON_TENSOR:
            return Kind.NON_TENSOR
        return Kind.UNKNOWN
