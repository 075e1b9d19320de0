"""The time limit of one check (``AUTOGRAD_LINT_CHECK_SECONDS``), kept between calls of forward."""

from __future__ import annotations

import functools
import os
import time
from typing import Any, Callable

import pytest


# Seconds one check may take (environment, 0 = no limit).  A
# recorded case can be large (50x50 matrices, a 500-step SDE): a gradgradcheck of it
# runs for hours, and a suite that never ends gives no verdict at all.
CHECK_SECONDS_VARIABLE = "AUTOGRAD_LINT_CHECK_SECONDS"
DEFAULT_CHECK_SECONDS = 300.0


class OverBudget(BaseException):
    """Raised at a call of forward past the deadline.

    A BaseException, so that the checks' ``except Exception`` let it by.
    """


def _check_seconds() -> float:
    text = os.environ.get(CHECK_SECONDS_VARIABLE, "").strip()
    try:
        return max(float(text), 0.0) if text else DEFAULT_CHECK_SECONDS
    except ValueError:
        return DEFAULT_CHECK_SECONDS


# The monotonic time the running check must end by; None outside a check or without a limit.
_deadline: list[float | None] = [None]


def stop_if_over_budget() -> None:
    """Called before each call of forward: where a check can be stopped without harm.

    Not a timer signal: an exception raised asynchronously can land inside an
    import torch makes lazily (sympy), leaving that module half-imported and every
    later test failing with no bug behind it.  Every gradcheck-family check calls
    forward again and again (each finite difference), so the limit is still kept to
    within one forward and backward.
    """
    deadline = _deadline[0]
    if deadline is not None and time.monotonic() > deadline:
        raise OverBudget


# In the reason of every check cut off by the limit: the suite's summary counts them by it.
CUT_OFF = "did not finish within"


def within_time_budget(check: Callable[..., None]) -> Callable[..., None]:
    """``check`` (any check: search, comparison and probes alike), skipped with the reason when it
    outlasts :data:`CHECK_SECONDS_VARIABLE`.

    A check cut short says its verdict is unknown; it never counts as a failure,
    which would claim a bug nobody saw.  A check run inside another keeps the
    outer deadline.
    """
    name = check.__name__.removeprefix("check_")

    @functools.wraps(check)
    def budgeted(function: Any, *args: Any, **kwargs: Any) -> None:
        seconds = _check_seconds()
        previous = _deadline[0]
        if previous is None:
            _deadline[0] = time.monotonic() + seconds if seconds else None
        try:
            check(function, *args, **kwargs)
        except OverBudget:
            if previous is not None:
                raise  # the enclosing check's limit: it reports
            subject = getattr(function, "function", function)
            pytest.skip(f"{getattr(subject, '__qualname__', subject)}: {name} {CUT_OFF} {seconds:g} s on this case; "
                        f"its verdict is unknown (a large recorded case: record a smaller call, or set "
                        f"{CHECK_SECONDS_VARIABLE} to more seconds, 0 for no limit)")
        finally:
            _deadline[0] = previous

    return budgeted
