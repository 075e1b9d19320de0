"""Questions about tensors the checks ask of arguments, outputs and gradients (plain or subclass, differentiable)."""

from __future__ import annotations

from typing import Any

import torch


def is_differentiable_dtype(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def is_plain(value: Any) -> bool:
    """A tensor gradcheck can perturb: a plain tensor, a ``Parameter``, a Python subclass over its own storage.

    A wrapper subclass (``MaskedTensor``, a jagged nested tensor, DTensor: their
    own ``__torch_dispatch__``) or one that refuses plain tensor operations
    (``ExpandedWeight``'s ``__torch_function__`` refuses even ``.requires_grad``)
    is passed as recorded and not differentiated: gradcheck perturbs its inputs'
    values in place and compares with finite differences, which masked-out
    entries, a nested tensor's offsets or an ``ExpandedWeight`` (whose gradient
    goes to ``orig_weight.grad_sample``, not to backward's result) don't allow.
    """
    if not isinstance(value, torch.Tensor):
        return False
    from autograd_lint.gentests.pickled import is_tensor_subclass

    if not is_tensor_subclass(torch, value):
        return True
    try:
        return not is_wrapper(value) and isinstance(value.requires_grad, bool)
    except RuntimeError:
        return False


def is_subclass(value: Any) -> bool:
    """A tensor argument passed as recorded, not perturbed (see :func:`is_plain`)."""
    return isinstance(value, torch.Tensor) and not is_plain(value)


def plain_parts(value: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors whose values ``value`` (an output, a gradient) holds: itself, or a subclass's inner ones.

    A subclass without ``__tensor_flatten__`` gives none: a ``MaskedTensor``'s
    masked-out entries hold no value, so its data can't be asked to be finite.
    """
    if is_plain(value):
        return [value]
    flatten = getattr(type(value), "__tensor_flatten__", None)
    if flatten is None:
        return []
    names, _ = flatten(value)
    inner = [getattr(value, name) for name in names]
    return [part for tensor in inner if isinstance(tensor, torch.Tensor) for part in plain_parts(tensor)]


def gradient_like(output: torch.Tensor) -> torch.Tensor:
    """An output gradient for ``output``: ones, or for a subclass its own detached values.

    A gradient must have the output's type, layout and shape; ``ones_like`` of a
    sparse tensor or sparse ``MaskedTensor`` raises (``fill_`` has no sparse
    kernel).  A sparse output gets ones where it specifies elements, in its own
    layout: what the engine passes for it in real use (``to_dense()``,
    ``torch.sparse.mm`` and an unused output alike give backward a sparse
    gradient).  A subclass gets its detached copy.
    """
    if not is_plain(output):
        return output.detach()
    if output.layout == torch.strided:
        return torch.ones_like(output)
    pattern = output.detach().coalesce() if output.layout == torch.sparse_coo else output.detach()
    return torch.ones(output.shape, dtype=output.dtype, device=output.device).sparse_mask(pattern)


def comparable(output: torch.Tensor) -> torch.Tensor:
    """``output`` as gradcheck compares it: a sparse one through ``to_dense()``.

    gradcheck refuses sparse outputs ("Please call to_dense(masked_grad=...) on the
    output of fn"); ``to_dense()``'s default, masked, backward hands the Function's
    backward the sparse gradient of the output's specified elements, as sparse
    operations do in real use.
    """
    return output.to_dense() if is_plain(output) and output.layout != torch.strided else output


def tensor_requires_grad(value: Any) -> bool:
    """Whether ``value`` is a tensor that requires grad; False for a subclass that refuses the question."""
    if not isinstance(value, torch.Tensor):
        return False
    try:
        return bool(value.requires_grad)
    except RuntimeError:  # ExpandedWeight's __torch_function__ handles only the ops it implements
        return False


def is_wrapper(value: torch.Tensor) -> bool:
    """A nested tensor, or a subclass with its own ``__torch_dispatch__`` (plain subclasses compare fine)."""
    return value.is_nested or type(value).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__


def outputs_of(result: Any) -> tuple[Any, ...]:
    return result if isinstance(result, tuple) else (result,)


def differentiable_outputs(result: Any) -> tuple[torch.Tensor, ...]:
    return tuple(
        out for out in outputs_of(result)
        if isinstance(out, torch.Tensor) and is_differentiable_dtype(out.dtype)
    )


def is_symmetric(value: torch.Tensor) -> bool:
    """A real matrix (or batch of them) equal to its transpose, larger than 1x1."""
    return (value.layout == torch.strided and value.dtype.is_floating_point and value.dim() >= 2
            and value.shape[-1] == value.shape[-2] > 1 and bool(torch.equal(value, value.mT)))


def all_finite(value: torch.Tensor) -> bool:
    """Whether every stored element of ``value`` is finite; a sparse tensor by its stored values.

    ``torch.isfinite`` has no sparse COO kernel (norse's ``LIFSparseAdjointFunction``
    returns one): its specified values are what can be infinite.
    """
    if value.layout == torch.sparse_coo:
        value = value.coalesce().values()
    elif value.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        value = value.values()
    return bool(torch.isfinite(value).all())
