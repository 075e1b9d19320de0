"""The bridge's contract, without torch: a thread with no trace function gets threading's."""

from __future__ import annotations

import _thread
import sys
import threading
from types import FrameType
from typing import Any

from autograd_lint.coverage import bridge


def _tracer(frame: FrameType, event: str, arg: Any) -> None:
    return None


def _run_on_raw_thread(fn: Any) -> Any:
    """Run ``fn`` on a thread made by ``_thread`` (no threading bootstrap) and return its result."""
    done = threading.Event()
    result: list[Any] = []

    def work() -> None:
        try:
            result.append(fn())
        finally:
            done.set()

    _thread.start_new_thread(work, ())
    assert done.wait(10)
    return result[0]


def test_raw_thread_gets_the_threading_trace_function() -> None:
    def seed_and_look() -> Any:
        before = sys.gettrace()
        bridge.ensure_thread_traced()
        after = sys.gettrace()
        sys.settrace(None)
        return before, after

    previous = threading.gettrace()
    threading.settrace(_tracer)
    try:
        assert _run_on_raw_thread(seed_and_look) == (None, _tracer)
    finally:
        threading.settrace(previous)  # type: ignore[arg-type]


def test_nothing_is_installed_without_a_threading_trace_function() -> None:
    previous = threading.gettrace()
    threading.settrace(None)  # type: ignore[arg-type]
    try:
        assert _run_on_raw_thread(lambda: (bridge.ensure_thread_traced(), sys.gettrace())) == (None, None)
    finally:
        threading.settrace(previous)  # type: ignore[arg-type]


def test_traced_hook_keeps_the_hook_identity_visible() -> None:
    def hook(value: int) -> int:
        return value + 1

    wrapped = bridge.traced_hook(hook)
    assert wrapped(1) == 2
    assert wrapped.__wrapped__ is hook  # type: ignore[attr-defined]
    assert wrapped.__name__ == "hook"
