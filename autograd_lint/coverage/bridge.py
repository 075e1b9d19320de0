"""The thread bridge: give the threads that run backward code coverage's tracer.

coverage.py's default cores trace per thread.  A thread started by
:mod:`threading` gets the tracer through ``threading.settrace``; a thread made
in C++ (the autograd engine's device threads, its pool threads for reentrant
backward deeper than 60 levels, or any library's native threads) never gets
one, so the Python code the engine calls there is reported as never run.

The bridge wraps every place where the engine enters Python code that it
did not receive from a traced caller -- the backward node's ``apply``,
``apply_boxed`` and ``apply_jvp``, and the hooks users register -- and, on a
thread that has no trace function, installs the one ``threading.gettrace()``
returns.  While coverage measures, that is coverage's own per-thread
installer, so the rest of the call is traced by coverage's own tracer, with
its branch and context handling unchanged.  With no coverage running, or with
coverage's ``sysmon`` core (which traces every thread already and leaves
``threading.gettrace()`` empty), there is nothing to install and the wrapper
only calls through.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Sequence

# Called with (backward node, entry name) on every engine entry, after the
# thread has been given the tracer; the report and the compile recorder listen.
NodeListener = Callable[[Any, str], None]

# BackwardCFunction methods the engine calls to run a custom Function's user
# code: apply (plain), apply_boxed (boxed_grads_call, AOT's CompiledFunction,
# torch 2.13+) and apply_jvp (forward-mode AD).  Those absent from the
# installed torch are skipped.
NODE_ENTRIES = ("apply", "apply_boxed", "apply_jvp")

# (module, class or None, function): registration functions whose hook
# argument the engine later calls on whatever thread runs the node.
HOOK_REGISTRATIONS: tuple[tuple[str, str | None, str], ...] = (
    ("torch._tensor", "Tensor", "register_hook"),
    ("torch._tensor", "Tensor", "register_post_accumulate_grad_hook"),
    ("torch.nn.modules.module", "Module", "register_full_backward_hook"),
    ("torch.nn.modules.module", "Module", "register_full_backward_pre_hook"),
    ("torch.nn.modules.module", "Module", "register_backward_hook"),
    ("torch.nn.modules.module", None, "register_module_full_backward_hook"),
    ("torch.nn.modules.module", None, "register_module_full_backward_pre_hook"),
    ("torch.nn.modules.module", None, "register_module_backward_hook"),
)

_listeners: list[NodeListener] = []
_installed = False


def ensure_thread_traced() -> None:
    """Give the current thread the tracer new threads get, if it has no trace function."""
    if sys.gettrace() is None:
        hook = threading.gettrace()
        if hook is not None:
            # Takes effect from the next frame on: the user code we call next.
            sys.settrace(hook)


def add_listener(listener: NodeListener) -> None:
    """Call ``listener(node, entry)`` each time the engine enters a custom Function's node."""
    if listener not in _listeners:
        _listeners.append(listener)


def remove_listener(listener: NodeListener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def _wrap_node_entry(original: Callable[..., Any], entry: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def node_entry(self: Any, *args: Any) -> Any:
        if sys.gettrace() is None:
            ensure_thread_traced()
        for listener in _listeners:
            listener(self, entry)
        return original(self, *args)

    return node_entry


def traced_hook(hook: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a user hook so that it runs traced on whatever thread calls it."""

    @functools.wraps(hook)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if sys.gettrace() is None:
            ensure_thread_traced()
        return hook(*args, **kwargs)

    return traced


def _wrap_registration(original: Callable[..., Any], hook_index: int) -> Callable[..., Any]:
    @functools.wraps(original)
    def register(*args: Any, **kwargs: Any) -> Any:
        if "hook" in kwargs:
            kwargs["hook"] = traced_hook(kwargs["hook"])
        elif len(args) > hook_index:
            args = (*args[:hook_index], traced_hook(args[hook_index]), *args[hook_index + 1:])
        return original(*args, **kwargs)

    return register


def install() -> None:
    """Patch torch's engine entries and hook registrations; idempotent.

    Imports torch: call it only where torch is wanted (see
    :func:`install_when_torch_imported`).
    """
    global _installed
    if _installed:
        return
    from torch.autograd.function import BackwardCFunction

    for entry in NODE_ENTRIES:
        original = BackwardCFunction.__dict__.get(entry)
        if original is not None:
            setattr(BackwardCFunction, entry, _wrap_node_entry(original, entry))
    for module_name, class_name, function_name in HOOK_REGISTRATIONS:
        owner: Any = importlib.import_module(module_name)
        if class_name is not None:
            owner = getattr(owner, class_name)
        original = getattr(owner, function_name, None)
        if original is not None:
            # Methods take (self, hook, ...); module-level functions (hook, ...).
            setattr(owner, function_name, _wrap_registration(original, int(class_name is not None)))
    _installed = True


def install_when_torch_imported() -> None:
    """:func:`install` now if torch is imported, else right after ``import torch`` ends."""
    call_after_import("torch", install)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs callbacks once a module has finished executing, without importing it early."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.callbacks: list[Callable[[], None]] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        callbacks = self.callbacks

        def exec_then_call_back(module: ModuleType) -> None:
            exec_module(module)
            for callback in callbacks:
                callback()

        # The loader object belongs to this spec alone, so the instance
        # attribute changes this one import and nothing else.
        loader.exec_module = exec_then_call_back  # type: ignore[method-assign]
        return spec


def call_after_import(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback`` now if module ``name`` is imported, else once its import ends."""
    if name in sys.modules:
        callback()
        return
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name:
            finder.callbacks.append(callback)
            return
    finder = _AfterImport(name)
    finder.callbacks.append(callback)
    sys.meta_path.insert(0, finder)
