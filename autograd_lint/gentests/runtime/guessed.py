"""Searched inputs that backward never differentiates: values the harness guessed for a
filter bank, a mask or another constant of the Function.

A backward can be right only for the values its callers pass: pytorch-wavelets'
``ScatLayerj1_rot_f`` filters the output gradient with the analysis filters
themselves ("Don't need to do time reverse as these filters are symmetric"), which
is the adjoint only for symmetric filters, the only ones the library builds.  On
the random filters the search draws, gradcheck fails without a bug.  A failure is
therefore asked again with those inputs made mirror-symmetric (the same values
averaged with their reversal along every dimension, then, for square ones, with
their transpose, then with one channel: a filter bank is (1, 1, L), not the data's
shape the search gave it); when it then passes, the
verdict depends on a property of values the harness made up, and the check is
skipped, asking for real inputs.  A backward wrong for every filter still fails
(pytorch-wavelets' ``AFB1D``, whose padded modes fail on symmetric filters too).
The same holds for a matrix applied in backward where its transpose belongs: right
only for a symmetric one, so that structure is tried too.
"""

from __future__ import annotations

from typing import Any

import torch

from autograd_lint.gentests.inputs import TensorInput
from autograd_lint.gentests.runtime.cases import Case


def guessed_constants(case: Case, args: tuple[Any, ...]) -> list[int]:
    """Positions of floating tensors of 2 or more elements that the search drew and that never require grad."""
    if case.pickled is not None or len(case.args) != len(args):
        return []
    return [i for i, (spec, arg) in enumerate(zip(case.args, args))
            if isinstance(spec, TensorInput) and spec.shape is None and isinstance(arg, torch.Tensor)
            and arg.is_floating_point() and not arg.requires_grad and arg.numel() > 1]


def _mirrored(arg: torch.Tensor) -> torch.Tensor:
    return (arg + arg.flip(list(range(arg.dim())))) / 2


def _transposed(arg: torch.Tensor) -> torch.Tensor:
    return (arg + arg.mT) / 2 if arg.dim() >= 2 and arg.shape[-1] == arg.shape[-2] else arg


def _one_channel(arg: torch.Tensor) -> torch.Tensor:
    if arg.dim() < 2 or arg.shape[:-1].numel() == 1:
        return arg
    return arg.reshape(-1, arg.shape[-1])[:1].reshape((1,) * (arg.dim() - 1) + (arg.shape[-1],))


# The structures tried, each named as the failure's skip says it: a constant that is its
# own reversal (a filter correlated where the adjoint convolves), its own transpose (a
# matrix applied where the adjoint applies its transpose), one of a single channel (the
# search gave it the data's shape, (2, 3, 4); pytorch-wavelets' AFB1D and SFB1D take
# (1, 1, L) filters, pass on random ones in periodization mode and fail on the guess).
STRUCTURES = (("mirror-symmetric ((x + x.flip(every dim)) / 2)", _mirrored),
              ("symmetric in their last two dimensions ((x + x.mT) / 2)", _transposed),
              ("of one channel (every dimension but the last of size 1: x[0, ..., 0, :])", _one_channel))


def structured(args: tuple[Any, ...], positions: list[int]) -> list[tuple[str, tuple[Any, ...]]]:
    """``args`` with the tensors at ``positions`` made each structure of :data:`STRUCTURES` that changes them."""
    variants = []
    for name, make in STRUCTURES:
        changed = {i: make(args[i]) for i in positions}
        if any(changed[i].shape != args[i].shape or not torch.equal(changed[i], args[i]) for i in positions):
            variants.append((name, tuple(changed.get(i, arg) for i, arg in enumerate(args))))
    return variants
