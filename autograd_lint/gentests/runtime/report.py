"""The lines of a failure message that say on which inputs, and where to reproduce it."""

from __future__ import annotations

import os
import traceback
from typing import Any

import torch

from autograd_lint.gentests.runtime.arguments import SEED
from autograd_lint.gentests.runtime.tensors import is_subclass, is_symmetric


def describe_inputs(args: tuple[Any, ...]) -> str:
    parts = []
    for index, arg in enumerate(args):
        if is_subclass(arg):
            parts.append(f"#{index}: {type(arg).__name__} {tuple(arg.shape)} {str(arg.dtype).removeprefix('torch.')} "
                         "(a tensor subclass, as recorded, not differentiated)")
        elif isinstance(arg, torch.Tensor):
            layout = "" if arg.layout != torch.strided or arg.is_contiguous() else ", non-contiguous"
            if arg.layout != torch.strided:
                layout += f", {str(arg.layout).removeprefix('torch.')}"
            elif arg.requires_grad and is_symmetric(arg):
                layout += ", symmetric (perturbed symmetrically)"
            grad = ", requires_grad" if arg.requires_grad else ""
            parts.append(f"#{index}: tensor {tuple(arg.shape)} {str(arg.dtype).removeprefix('torch.')}{layout}{grad}")
        else:
            parts.append(f"#{index}: {arg!r}")
    return "; ".join(parts)


def where_to_reproduce(seed: int = SEED) -> str:
    """The test to re-run and the seed, so that a failure can be reproduced."""
    node = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    return f"seed {seed}" + (f"; reproduce with: pytest '{node}'" if node else "")


def raised_at(error: BaseException) -> str:
    """`` (file:line, in name)`` of the innermost frame of ``error`` outside torch and the checks, or ''.

    An error raised by the Function's own Python code names the line to look at;
    one raised by autograd's engine (in C++) has no such frame.
    """
    library = os.path.dirname(torch.__file__ or "") + os.sep
    own = os.path.dirname(__file__) + os.sep  # the checks' own frames
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if not frame.filename.startswith((library, own))]
    return f" ({frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
