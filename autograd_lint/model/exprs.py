"""What an expression evaluates to (tensor, non-tensor, None), as far as syntax can tell.

Rules only act on certainty: a rule about tensors fires on :attr:`Kind.TENSOR`, a
rule about non-tensors on :attr:`Kind.NON_TENSOR`, and everything that syntax
cannot decide is :attr:`Kind.UNKNOWN`.  The vocabularies below are deliberately
small: a method that numpy arrays or Python objects also have (``sum``, ``max``,
``copy``) does not make its receiver a tensor.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Iterable, Mapping

import libcst as cst

from autograd_lint.model.imports import ImportMap
from autograd_lint.model.spec import Kind

_EMPTY_MODULE = cst.Module(body=[])


def node_code(node: cst.CSTNode) -> str:
    """The source text of ``node`` as written (libcst renders it within an empty module)."""
    return _EMPTY_MODULE.code_for_node(node)


# Methods that only tensors have, or that only return tensors from a tensor.
TENSOR_METHODS = frozenset(
    """
    clone detach contiguous view view_as reshape_as expand expand_as to float double half
    bfloat16 cuda cpu type_as exp log sigmoid tanh relu softmax log_softmax matmul mm bmm
    addmm unsqueeze squeeze_ permute transpose t narrow select index_select masked_fill
    new_empty new_zeros new_ones new_full new_tensor flatten unflatten repeat_interleave
    sign abs neg sqrt rsqrt pow mul div add sub clamp gather scatter where reciprocal sin cos
    sum mean prod std var norm amax amin cumsum cumprod logsumexp square
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
# torch functions that return a tuple (or a named tuple) of tensors, not one tensor.
TUPLE_RETURNING = frozenset(
    """
    meshgrid broadcast_tensors atleast_1d atleast_2d atleast_3d sort topk max min median nanmedian
    mode kthvalue cummax cummin aminmax std_mean var_mean unique unique_consecutive frexp
    histogram histogramdd geqrf qr svd slogdet lu lu_unpack lstsq triangular_solve eig eigh
    where nonzero gradient adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d
    max_pool1d max_pool2d max_pool3d fractional_max_pool2d fractional_max_pool3d
    multi_head_attention_forward native_batch_norm native_layer_norm native_group_norm
    batch_norm_stats batch_norm_gather_stats batch_norm_gather_stats_with_counts
    cholesky_ex inv_ex solve_ex lu_factor lu_factor_ex ldl_factor ldl_factor_ex lstm gru
    rnn_tanh rnn_relu lstm_cell embedding_bag native_dropout batch_norm_backward_reduce
    cudnn_batch_norm miopen_batch_norm fake_quantize_per_tensor_affine_cachemask
    fake_quantize_per_channel_affine_cachemask choose_qparams_optimized
    """.split()
)
# Name parts that mark the rest of the split/chunk family (unsafe_split, split_copy, ...).
TUPLE_RETURNING_PARTS = ("split", "chunk", "unbind", "with_indices")
TORCH_TENSOR_NAMESPACES = frozenset(
    {"torch.nn.functional", "torch.linalg", "torch.fft", "torch.special"}
)
# ctx attributes that hold the saved tensors (``saved_variables`` is the deprecated name).
SAVED_ATTRIBUTES = frozenset({"saved_tensors", "saved_variables"})
NON_TENSOR_ANNOTATIONS = frozenset(
    "int float bool str tuple list dict set complex bytes torch.dtype torch.device dtype device "
    "Callable typing.Callable Tuple List Dict Sequence typing.Tuple typing.List typing.Dict "
    "torch.Size Size Iterable Mapping collections.abc.Callable collections.abc.Sequence "
    "torch.distributed.ProcessGroup ProcessGroup torch.Generator Generator".split()
)
# Methods of a tensor that give an integer or bool tensor.
INDEX_TENSOR_METHODS = frozenset(
    "long int bool short byte char argmax argmin argsort nonzero eq ne lt le gt ge "
    "isnan isinf isfinite logical_and logical_or logical_not logical_xor".split()
)
# torch functions that give an integer or bool tensor.
INDEX_TENSOR_FUNCTIONS = frozenset(
    "argmax argmin argsort nonzero eq ne lt le gt ge isnan isinf isfinite logical_and logical_or "
    "logical_not logical_xor randint randperm bucketize searchsorted".split()
)
INDEX_DTYPES = frozenset(
    "long int int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool short".split()
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


def join(kinds: "Iterable[Kind]") -> Kind:
    """The kind of a value that is one of ``kinds`` (one per path, or per union member)."""
    found = set(kinds)
    if not found:
        return Kind.UNKNOWN
    if len(found) == 1:
        return found.pop()
    if Kind.UNKNOWN in found:
        return Kind.UNKNOWN
    if found <= {Kind.TENSOR, Kind.INDEX_TENSOR}:
        return Kind.TENSOR
    if found <= {Kind.INDEX_TENSOR, Kind.OPTIONAL_INDEX_TENSOR, Kind.NONE}:
        return Kind.OPTIONAL_INDEX_TENSOR
    if found <= {Kind.TENSOR, Kind.INDEX_TENSOR, Kind.OPTIONAL_TENSOR, Kind.OPTIONAL_INDEX_TENSOR, Kind.NONE}:
        return Kind.OPTIONAL_TENSOR
    if found <= {Kind.NON_TENSOR, Kind.NONE}:
        return Kind.NON_TENSOR
    return Kind.UNKNOWN


def without_none(kind: Kind) -> Kind:
    """What is left of ``kind`` on the path where the value is not None."""
    if kind is Kind.OPTIONAL_INDEX_TENSOR:
        return Kind.INDEX_TENSOR
    return Kind.TENSOR if kind is Kind.OPTIONAL_TENSOR else kind


# Annotations naming torch.Tensor itself, its legacy typed aliases, and Parameter.
_TENSOR_TYPES = frozenset(
    "torch.Tensor torch.FloatTensor torch.DoubleTensor torch.HalfTensor torch.BFloat16Tensor "
    "torch.nn.Parameter torch.nn.parameter.Parameter torch.cuda.FloatTensor torch.cuda.HalfTensor".split()
)
_INDEX_TENSOR_TYPES = frozenset(
    "torch.LongTensor torch.IntTensor torch.BoolTensor torch.ByteTensor torch.ShortTensor "
    "torch.CharTensor torch.cuda.LongTensor torch.cuda.IntTensor torch.cuda.BoolTensor".split()
)
_UNION_HEADS = frozenset({"Union", "typing.Union"})
_OPTIONAL_HEADS = frozenset({"Optional", "typing.Optional"})


def annotation_kind(annotation: str | cst.BaseExpression | None, imports: ImportMap | None = None) -> Kind:
    """The kind an annotation promises, reading it as a type.

    ``Optional[Tensor]`` is an optional tensor; ``Union[int, Tensor]`` and
    ``int | Tensor`` are unions (neither a tensor nor a non-tensor); a class whose
    name merely contains ``Tensor`` (``DTensorSpec``, ``TensorList``) is unknown.
    A bare ``Tensor`` counts as ``torch.Tensor`` unless an import binds it elsewhere.
    """
    if annotation is None:
        return Kind.UNKNOWN
    if isinstance(annotation, str):
        return _annotation_text_kind(annotation, imports)
    return _type_kind(annotation, imports)


@lru_cache(maxsize=4096)
def _parsed_annotation(text: str) -> cst.BaseExpression | None:
    try:
        return cst.parse_expression(text.strip())
    except cst.ParserSyntaxError:
        return None


def _annotation_text_kind(text: str, imports: ImportMap | None) -> Kind:
    node = _parsed_annotation(text)
    return Kind.UNKNOWN if node is None else _type_kind(node, imports)


def _type_name(node: cst.BaseExpression, imports: ImportMap | None) -> str | None:
    name = dotted_name(node)
    if name is None:
        return None
    resolved = imports.resolve(name) if imports is not None else None
    if resolved is None and name == "Tensor":
        return "torch.Tensor"  # `from torch import Tensor` under TYPE_CHECKING, or a stub
    return resolved or name


def _type_kind(node: cst.BaseExpression, imports: ImportMap | None) -> Kind:
    if isinstance(node, cst.SimpleString):
        return _annotation_text_kind(node.evaluated_value if isinstance(node.evaluated_value, str) else "", imports)
    if is_none(node):
        return Kind.NONE
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        return join((_type_kind(node.left, imports), _type_kind(node.right, imports)))
    if isinstance(node, cst.Subscript):
        head = _type_name(node.value, imports) or ""
        members = [
            e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)
        ]
        short_head = head.rsplit(".", 1)[-1]
        if head in _UNION_HEADS or short_head == "Union":
            return join(_type_kind(m, imports) for m in members)
        if head in _OPTIONAL_HEADS or short_head == "Optional":
            return join([*(_type_kind(m, imports) for m in members), Kind.NONE])
        if short_head in ("Annotated",) and members:
            return _type_kind(members[0], imports)
        return Kind.NON_TENSOR if short_head in NON_TENSOR_ANNOTATIONS or head in NON_TENSOR_ANNOTATIONS else Kind.UNKNOWN
    name = _type_name(node, imports)
    if name is None:
        return Kind.UNKNOWN
    if name in _TENSOR_TYPES:
        return Kind.TENSOR
    if name in _INDEX_TENSOR_TYPES:
        return Kind.INDEX_TENSOR
    if name in NON_TENSOR_ANNOTATIONS or name.removeprefix("builtins.") in NON_TENSOR_ANNOTATIONS:
        return Kind.NON_TENSOR
    if name.startswith("typing.") and name.rsplit(".", 1)[-1] in NON_TENSOR_ANNOTATIONS:
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


# How a classifier learns a name's kind: the kind where that use reads it, or
# None when the method does not bind the name (a global or a builtin).
NameKinds = Callable[[cst.Name], "Kind | None"]


def mapping_lookup(names: Mapping[str, Kind]) -> NameKinds:
    """A lookup that gives every use of a name the one kind ``names`` holds for it."""
    return lambda node: names.get(node.value)


class Classifier:
    """Classifies expressions of one method, given what is known about its names.

    ``names`` is either a mapping from name to kind (one kind for every use) or a
    lookup per use (:class:`autograd_lint.model.semantic.MethodModel` gives the
    kind of the bindings that reach each use).
    """

    def __init__(self, imports: ImportMap, names: Mapping[str, Kind] | NameKinds) -> None:
        self.imports = imports
        self.lookup: NameKinds = mapping_lookup(names) if isinstance(names, Mapping) else names

    def kind(self, node: cst.BaseExpression) -> Kind:
        if is_none(node):
            return Kind.NONE
        if is_literal(node) or isinstance(node, CONTAINERS) or isinstance(node, cst.Lambda):
            return Kind.NON_TENSOR
        if isinstance(node, cst.Name):
            return self.lookup(node) or Kind.UNKNOWN
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
        if isinstance(node, cst.Comparison):
            # A comparison of tensors is a bool tensor; of anything else, unknown.
            sides = [node.left, *(c.comparator for c in node.comparisons)]
            plain = all(
                isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) is False for c in node.comparisons
            )
            if plain and any(self.kind(side).is_tensor for side in sides):
                return Kind.INDEX_TENSOR
            return Kind.UNKNOWN
        if isinstance(node, cst.IfExp):
            from_arms = join((self.kind(node.body), self.kind(node.orelse)))
            return from_arms
        return Kind.UNKNOWN

    def _subscript(self, node: cst.Subscript) -> Kind:
        base = self.kind(node.value)
        if base.is_tensor:
            return base
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
        if attr in ("T", "mT", "H", "mH", "real", "imag", "data"):
            receiver = self.kind(node.value)
            return receiver if receiver.is_tensor else Kind.UNKNOWN
        if attr == "indices" and isinstance(node.value, cst.Call):
            return Kind.INDEX_TENSOR if self.kind(node.value) is not Kind.NON_TENSOR else Kind.UNKNOWN
        return Kind.UNKNOWN

    def _call(self, node: cst.Call) -> Kind:
        func = node.func
        name = dotted_name(func)
        if isinstance(func, cst.Name):
            if func.value in NON_TENSOR_BUILTINS and self.lookup(func) is None:
                return Kind.NON_TENSOR
            return Kind.UNKNOWN
        if not isinstance(func, cst.Attribute):
            return Kind.UNKNOWN
        qualified = self.imports.resolve(name) if name else None
        if qualified in _INDEX_TENSOR_TYPES:
            return Kind.INDEX_TENSOR  # torch.cuda.IntTensor(...), torch.LongTensor(...)
        if qualified is not None and (qualified == "torch" or qualified.startswith("torch.")):
            kind = self._torch_call(qualified)
            function = qualified.rsplit(".", 1)[-1]
            if kind is Kind.TENSOR and (function in INDEX_TENSOR_FUNCTIONS or self._index_dtype(node)):
                return Kind.INDEX_TENSOR
            if kind is Kind.TENSOR and function in _DTYPE_KEEPING_FUNCTIONS and not self._names_dtype(node):
                # `torch.zeros_like(ids)`, `torch.clone(mask)`: the dtype of the first argument.
                first = next((a.value for a in node.args if a.keyword is None and not a.star), None)
                if first is not None and self.kind(first) is Kind.INDEX_TENSOR:
                    return Kind.INDEX_TENSOR
            return kind
        if qualified is not None:
            return Kind.UNKNOWN  # numpy, math, another module's function
        method = func.attr.value
        receiver = self.kind(func.value)
        if receiver is Kind.NON_TENSOR:
            return Kind.UNKNOWN
        if method in NON_TENSOR_METHODS and receiver.is_tensor:
            return Kind.NON_TENSOR
        if method in ("dim", "numel", "item", "tolist", "stride", "data_ptr"):
            return Kind.NON_TENSOR
        if method == "size" and receiver.is_tensor:
            return Kind.NON_TENSOR
        if receiver.is_tensor and method in INDEX_TENSOR_METHODS:
            return Kind.INDEX_TENSOR
        if method in _INTEGER_CASTS and not node.args:
            return Kind.INDEX_TENSOR  # `.long()`: only tensors have it
        if receiver is Kind.INDEX_TENSOR and (
            (method in _DTYPE_KEEPING_METHODS and not self._names_dtype(node))
            or (method == "to" and self._moves_only(node))
        ):
            return Kind.INDEX_TENSOR  # ids.clone(), mask.masked_fill(...), ids.to(device)
        if method in TENSOR_METHODS and (receiver.is_tensor or method in TENSOR_ONLY_METHODS):
            if method in _DTYPE_TAKING_METHODS and self._index_dtype(node):
                return Kind.INDEX_TENSOR  # x.to(torch.long), x.new_zeros(n, dtype=torch.int32)
            return Kind.TENSOR
        return Kind.UNKNOWN

    def _names_dtype(self, node: cst.Call) -> bool:
        """Whether the call passes a ``dtype=`` keyword (it may change the dtype)."""
        return any(arg.keyword is not None and arg.keyword.value == "dtype" for arg in node.args)

    def _moves_only(self, node: cst.Call) -> bool:
        """Whether ``.to(...)`` only moves (a device string, ``x.device``, ``device=``,
        ``non_blocking=``, ``copy=``): the dtype stays.  ``.to(other)`` and ``.to(dtype)`` may
        change it."""
        for arg in node.args:
            if arg.keyword is not None:
                if arg.keyword.value not in ("device", "non_blocking", "copy", "memory_format"):
                    return False
                continue
            value = arg.value
            if isinstance(value, cst.SimpleString):
                continue
            if isinstance(value, cst.Attribute) and value.attr.value == "device":
                continue
            return False
        return True

    def _index_dtype(self, node: cst.Call) -> bool:
        """Whether the call names an integer or bool dtype (``dtype=torch.long``, ``.to(torch.int32)``)."""
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value != "dtype":
                continue
            name = dotted_name(arg.value)
            qualified = self.imports.resolve(name) if name else None
            if qualified is not None and qualified.startswith("torch.") and qualified[6:] in INDEX_DTYPES:
                return True
        return False

    @staticmethod
    def _torch_call(qualified: str) -> Kind:
        namespace, _, function = qualified.rpartition(".")
        if function in TUPLE_RETURNING or any(part in function for part in TUPLE_RETURNING_PARTS):
            return Kind.UNKNOWN  # a tuple of tensors (a single one for some arguments)
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
        if left is Kind.INDEX_TENSOR and right is Kind.INDEX_TENSOR and isinstance(
            operator, (cst.BitAnd, cst.BitOr, cst.BitXor)
        ):
            return Kind.INDEX_TENSOR
        if (left.is_tensor or right.is_tensor) and Kind.NONE not in (left, right):
            if Kind.INDEX_TENSOR in (left, right) and not (left is Kind.TENSOR or right is Kind.TENSOR):
                return Kind.UNKNOWN  # mask * 2 is an integer tensor, mask * 0.5 a float one
            return Kind.TENSOR
        if left is Kind.NON_TENSOR and right is Kind.NON_TENSOR:
            return Kind.NON_TENSOR
        return Kind.UNKNOWN


# Tensor methods that cast to an integer or bool dtype (numpy arrays have none of them).
_INTEGER_CASTS = frozenset("long int bool short byte char".split())
# Tensor methods that keep an integer tensor's dtype (unless given ``dtype=``), checked on
# torch 2.13 for int64 and bool receivers.
_DTYPE_KEEPING_METHODS = frozenset(
    "clone detach contiguous view view_as reshape reshape_as expand expand_as cuda cpu unsqueeze "
    "squeeze permute transpose t narrow select index_select flatten unflatten gather masked_fill "
    "masked_scatter index_fill scatter roll flip repeat repeat_interleave pin_memory "
    "new_empty new_zeros new_ones new_full".split()
)
# torch functions whose result has the dtype of their first argument (unless given ``dtype=``).
_DTYPE_KEEPING_FUNCTIONS = frozenset(
    "clone zeros_like ones_like empty_like full_like masked_fill index_fill roll flip".split()
)
# Tensor methods that take a dtype.
_DTYPE_TAKING_METHODS = frozenset("to new_empty new_zeros new_ones new_full new_tensor".split())
