"""The lines of a failure message that say on which inputs, and where to reproduce it."""

from __future__ import annotations

import functools
import os
import traceback
from typing import Any, Callable

import pytest
import torch

from autograd_lint.gentests.runtime.arguments import SEED
from autograd_lint.gentests.runtime.budget import within_time_budget
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


def case_id() -> str:
    """The id of the running test's case (``search-?``, ``recorded-0``), from pytest's current test, or ''."""
    node = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    return node[node.index("[") + 1:-1] if node.endswith("]") and "[" in node else ""


def header(function: Any, check: str, seed: int = SEED) -> str:
    """The first line of every failure: which Function, which check, which case, which seed."""
    subject = getattr(function, "function", function)  # in_place()/low-precision wrappers name their Function
    return (f"FAILED {getattr(subject, '__qualname__', subject)} · {check} · case {case_id() or '?'} · seed {seed}")


# Causes the harness can name for an error raised where no check worded it.
_NO_INPUT_FIXES = "no input fixes this: backward must return one gradient (or None) per input of forward"


def cause_of(error: BaseException) -> str:
    """One line on what ``error`` means for the Function, where the harness can tell; else ''."""
    text = str(error)
    if "incorrect number of gradients" in text or "returned an incorrect number" in text:
        return f"cause: backward returned the wrong number of gradients; {_NO_INPUT_FIXES}"
    if "did not match" in text and ("Double" in text or "Float" in text or "Half" in text):
        return ("cause: forward returns a lower-precision dtype than its float64 inputs (it casts, e.g. .float()); "
                "torch's gradcheck compares float64 with float32 when it words its error")
    return ""


def reported(check: Callable[..., None]) -> Callable[..., None]:
    """``check`` within the time limit (:func:`.budget.within_time_budget`), with every failure opening
    on :func:`header`, and no bare error: one raised inside
    the check (by the Function, by torch, by the harness) fails the test with the header, the error
    and where it was raised, and the cause when :func:`cause_of` knows it.

    The check starts from torch's CPU generator seeded with the header's seed (in a
    forked state): what it draws itself (a backward that samples, probed twice) is the
    same whichever tests ran before, so the same suite gives the same outcome every run.
    """
    name = check.__name__.removeprefix("check_")
    budgeted = within_time_budget(check)

    @functools.wraps(check)
    def run(function: Any, case: Any, *args: Any, **kwargs: Any) -> None:
        seed = kwargs.get("seed", SEED)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                budgeted(function, case, *args, **kwargs)
        except pytest.xfail.Exception:
            raise
        except pytest.fail.Exception as failure:
            if str(failure.msg).startswith("FAILED "):
                raise
            # Chained to what the check chained (the Function's own error), as the check itself would be.
            raise pytest.fail.Exception(f"{header(function, name, seed)}\n{failure.msg}",
                                        pytrace=False) from (failure.__cause__ or failure)
        except AssertionError as error:  # the check's own verdict: its message says what was compared
            raise pytest.fail.Exception(f"{header(function, name, seed)}\n{error}", pytrace=False) from error
        except Exception as error:  # noqa: BLE001 - worded here instead of surfacing bare
            cause = cause_of(error)
            first = (str(error).strip().splitlines() or [""])[0]
            raise pytest.fail.Exception(
                f"{header(function, name, seed)}\nthe check raised {type(error).__name__}: {first}{raised_at(error)}"
                + (f"\n{cause}" if cause else ""), pytrace=False) from error

    return run
