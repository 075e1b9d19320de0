"""Recorded calls whose arguments are not all tensors and literals, kept as a pickle.

A Function called with objects (a ``LinearOperator`` representation tree, an SDE
module, a callable, a sparse tensor, a list of tensors) cannot be described by
shapes and literals, and its objects often share tensors with the positional
arguments (an ODE function whose parameters are also passed as ``*adjoint_params``).
The recorder therefore pickles the whole positional argument tuple in one go,
``cloudpickle`` where it is installed (lambdas, classes and functions of test
modules by value), else :mod:`pickle`.  Every tensor in it, at any depth, is
reduced to its values, so that the pickle does not depend on torch's storage
format and a replay can rebuild each tensor in float64: a tensor that appears
twice (a parameter inside a module and in ``args``) is rebuilt once, and gradcheck's
in-place perturbation of an argument reaches the object that holds it.

A tensor subclass is kept as that subclass, built again from its plain tensors
(each reduced to values like any other, so that float64 promotion and sharing
reach them too), by the first of these that applies (:func:`_subclass_reduction`):

1. a torch subclass that refuses pickling, rebuilt from its constructor's
   arguments (:data:`CONSTRUCTED_SUBCLASSES`: ``ExpandedWeight``);
2. ``__tensor_flatten__``/``__tensor_unflatten__`` (DTensor), when the outer size
   is plain integers (a jagged nested tensor's holds a nested int, which an
   unflatten in another process can't be given);
3. a Python subclass over a tensor's own storage (no ``__torch_dispatch__``):
   its values as a plain tensor, re-typed, with its Python attributes, as
   ``Tensor.__reduce_ex__`` does with raw storage;
4. a wrapper subclass's own ``__reduce_ex__`` (a wrapper has no storage: it
   rebuilds from its metadata and the Python state holding its tensors,
   ``MaskedTensor``'s data and mask, a jagged nested tensor's values and offsets).

Dtype arguments inside are promoted with the tensors (:func:`rebuild_dtype`), so
a ``MaskedTensor`` wrapper and its data agree; integer and bool tensors (offsets,
masks) keep their dtype.  A subclass whose pickling raises (its ``__torch_function__``
refuses ``__reduce_ex__``, and it is not in the table) raises :class:`NotPicklable` with the reason.

The text stored in the recording is ``base64(zlib(pickle))``.  Loading it runs
the code a pickle names, like any pickle: a recording is trusted input, written
by your own test run.  This module imports torch only inside its functions.

Two references are kept by what they refer to: a ``weakref.ref`` (DDP hands its
``_DDPSink`` a weak reference to itself) is rebuilt as a reference that keeps its
target alive as long as the arguments (nothing else holds the unpickled
target), and the default ``torch.distributed`` process group (FSDP's state holds
it) as the default group of the replay, which runs under one of its own (see
``harness.recorded_process_group``).  A dead reference, or another group, can't
be rebuilt.
"""

from __future__ import annotations

import base64
import contextlib
import io
import pickle
import weakref
import zlib
from typing import Any, Iterator

# Compressed pickles larger than this are not kept: the call is counted as unrecordable.
MAX_PICKLED_BYTES = 256 * 1024

_PROMOTE = [False]  # set while the harness loads a recording: floating tensors become float64


class NotPicklable(Exception):
    """The arguments hold something a replay could not rebuild."""


def is_tensor_subclass(torch: Any, value: Any) -> bool:
    """Whether ``value`` is a tensor of a subclass (``MaskedTensor``, DTensor...): not a plain tensor or Parameter."""
    return isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter)


def _tensor_state(torch: Any, value: Any) -> tuple[Any, ...]:
    if value.layout == torch.sparse_coo:
        coalesced = value.detach().coalesce()
        return ("sparse_coo", str(value.dtype).removeprefix("torch."), list(value.shape),
                bool(value.requires_grad), coalesced.indices().tolist(), coalesced.values().tolist())
    if value.layout != torch.strided or value.is_meta or value.is_quantized or value.is_nested:
        raise NotPicklable(f"a tensor of layout {value.layout}")
    kind = "parameter" if isinstance(value, torch.nn.Parameter) else "tensor"
    return (kind, str(value.dtype).removeprefix("torch."), list(value.shape), bool(value.requires_grad),
            value.detach().to("cpu").reshape(-1).tolist(), str(value.device))


def rebuild_tensor(state: tuple[Any, ...]) -> Any:
    """The tensor of :func:`_tensor_state`, in float64 (complex128) while the harness loads."""
    import torch

    kind, dtype_name, shape, requires_grad = state[:4]
    dtype = getattr(torch, dtype_name)
    if _PROMOTE[0]:
        dtype = torch.complex128 if dtype.is_complex else torch.float64 if dtype.is_floating_point else dtype
    if kind == "sparse_coo":
        indices = torch.tensor(state[4], dtype=torch.int64).reshape(len(shape), -1)
        values = torch.tensor(state[5], dtype=dtype)
        return torch.sparse_coo_tensor(indices, values, shape, check_invariants=True).coalesce()
    values = torch.tensor(state[4], dtype=dtype).reshape(shape)
    device = state[5]
    if device != "cpu":
        with contextlib.suppress(RuntimeError, AssertionError):
            values = values.to(device)
    differentiable = dtype.is_floating_point or dtype.is_complex
    if kind == "parameter":
        return torch.nn.Parameter(values, requires_grad=requires_grad and differentiable)
    return values.requires_grad_(requires_grad and differentiable)


# Tensor subclasses that refuse pickling (their ``__torch_function__`` rejects
# ``__reduce_ex__``), by ``module.qualname``: the attributes holding their
# constructor's positional arguments.  ``ExpandedWeight(orig_weight, batch_size,
# loss_reduction)`` (per-sample gradients) shares its values with ``orig_weight``:
# rebuilt by its constructor it still does (re-typed values would be a copy).
CONSTRUCTED_SUBCLASSES = {
    "torch.nn.utils._expanded_weights.expanded_weights_impl.ExpandedWeight":
        ("orig_weight", "batch_size", "loss_reduction"),
}


def _type_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _subclass_reduction(torch: Any, value: Any) -> tuple[Any, ...]:
    """How to pickle the tensor subclass ``value`` (see the module docstring), or NotPicklable."""
    kind = type(value)
    attributes = CONSTRUCTED_SUBCLASSES.get(_type_name(kind))
    if attributes is not None:
        return kind, tuple(getattr(value, name) for name in attributes)
    flatten = getattr(kind, "__tensor_flatten__", None)
    if flatten is not None and all(isinstance(size, int) for size in value.size()):
        names, context = flatten(value)
        inner = {name: getattr(value, name) for name in names}
        return rebuild_flattened, (kind, inner, context, tuple(value.size()), tuple(value.stride()),
                                   bool(value.requires_grad))
    if kind.__torch_dispatch__ is torch.Tensor.__torch_dispatch__:
        with torch._C.DisableTorchFunctionSubclass():  # its __torch_function__ may refuse plain tensor ops
            plain = value.as_subclass(torch.Tensor)
        return rebuild_retyped, (kind, _tensor_state(torch, plain), torch._utils._get_obj_state(value))
    try:
        # A wrapper has no storage: its own reduction rebuilds it from its metadata and Python state.
        return value.__reduce_ex__(4)
    except Exception as error:  # noqa: BLE001 - a subclass's __torch_function__ may refuse it
        raise NotPicklable(f"a tensor subclass {_type_name(kind)} that can't be pickled "
                           f"({type(error).__name__}: {error})") from None


def rebuild_retyped(kind: type, state: tuple[Any, ...], attributes: Any) -> Any:
    """The Python subclass ``kind`` over the tensor of ``state``, with its attributes restored."""
    import torch

    values = rebuild_tensor(state)
    retyped = torch._tensor._rebuild_from_type_v2(values.detach, kind, (), attributes)
    with torch._C.DisableTorchFunctionSubclass():
        return retyped.requires_grad_(values.requires_grad)


def rebuild_flattened(kind: type, inner: dict[str, Any], context: Any, size: tuple[int, ...],
                      stride: tuple[int, ...], requires_grad: bool = False) -> Any:
    """The subclass of ``kind.__tensor_flatten__`` (its inner tensors rebuilt first), requiring grad as recorded.

    ``__tensor_unflatten__`` serves tracing, where autograd metadata is set apart:
    DTensor's keeps ``requires_grad`` in its context, ``LocalTensor``'s drops it.
    """
    rebuilt = kind.__tensor_unflatten__(inner, context, size, stride)  # type: ignore[attr-defined]
    if requires_grad and not rebuilt.requires_grad and (rebuilt.dtype.is_floating_point or rebuilt.dtype.is_complex):
        rebuilt.requires_grad_()
    return rebuilt


def rebuild_dtype(name: str) -> Any:
    """A recorded ``torch.dtype`` argument; a floating one is float64 while the harness loads.

    A dtype passed to a Function is the dtype it makes its tensors in: with the
    inputs promoted to float64, a float32 one would mix precisions.
    """
    import torch

    dtype = getattr(torch, name)
    if _PROMOTE[0] and (dtype.is_floating_point or dtype.is_complex):
        return torch.complex128 if dtype.is_complex else torch.float64
    return dtype


class HeldReference(weakref.ref):
    """A weak reference rebuilt from a recording, which holds its target: nothing else does."""

    __slots__ = ("target",)

    def __init__(self, target: Any) -> None:
        super().__init__(target)
        self.target = target


def rebuild_weak_reference(target: Any) -> HeldReference:
    return HeldReference(target)


def default_process_group() -> Any:
    """The default process group of the replay, in place of the recorded one."""
    from torch.distributed.distributed_c10d import _get_default_group

    return _get_default_group()


def _reference_reduction(torch: Any, obj: Any) -> tuple[Any, ...] | None:
    """How to pickle a weak reference or a process group (see the module docstring); None for anything else."""
    if isinstance(obj, weakref.ref):
        target = obj()
        if target is None:
            raise NotPicklable("a dead weak reference")
        return rebuild_weak_reference, (target,)
    distributed = torch.distributed
    if distributed.is_available() and isinstance(obj, distributed.ProcessGroup):
        if not distributed.is_initialized() or obj is not distributed.distributed_c10d._get_default_group():
            raise NotPicklable("a process group other than the default one")
        return default_process_group, ()
    return None


def _pickler_class() -> type:
    try:
        import cloudpickle

        base: type = cloudpickle.CloudPickler
    except ImportError:
        base = pickle.Pickler
    import torch

    class TensorValuePickler(base):  # type: ignore[misc, valid-type]
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, torch.Tensor):
                if is_tensor_subclass(torch, obj):
                    return _subclass_reduction(torch, obj)
                return rebuild_tensor, (_tensor_state(torch, obj),)
            if isinstance(obj, torch.dtype):
                return rebuild_dtype, (str(obj).removeprefix("torch."),)
            if isinstance(obj, (torch.Generator, torch.Stream if hasattr(torch, "Stream") else ())):
                raise NotPicklable(type(obj).__qualname__)
            reference = _reference_reduction(torch, obj)
            if reference is not None:
                return reference
            parent = getattr(super(), "reducer_override", None)
            return parent(obj) if parent is not None else NotImplemented

    return TensorValuePickler


def dumps(args: tuple[Any, ...]) -> str:
    """``args`` as the text a recording stores. Raises :class:`NotPicklable`."""
    buffer = io.BytesIO()
    try:
        _pickler_class()(buffer, protocol=4).dump(tuple(args))
    except NotPicklable:
        raise
    except Exception as error:  # noqa: BLE001 - pickling runs arbitrary __reduce__ code
        raise NotPicklable(f"{type(error).__name__}: {error}") from None
    compressed = zlib.compress(buffer.getvalue(), 9)
    if len(compressed) > MAX_PICKLED_BYTES:
        raise NotPicklable(f"{len(compressed)} bytes pickled, more than {MAX_PICKLED_BYTES}")
    return base64.b64encode(compressed).decode("ascii")


@contextlib.contextmanager
def _promoting() -> Iterator[None]:
    previous = _PROMOTE[0]
    _PROMOTE[0] = True
    try:
        yield
    finally:
        _PROMOTE[0] = previous


def loads(text: str, promote: bool = True) -> tuple[Any, ...]:
    """The arguments of :func:`dumps`; with ``promote`` their floating tensors are float64."""
    data = zlib.decompress(base64.b64decode(text))
    with _promoting() if promote else contextlib.nullcontext():
        return tuple(pickle.loads(data))  # noqa: S301 - a recording is the user's own, trusted file
