"""The thread bridge: give the threads that run backward code coverage's tracer.

coverage.py's default cores trace per thread.  A thread started by
:mod:`threading` gets the tracer through ``threading.settrace``; a thread made
in C++ (the autograd engine's device threads, its pool threads for reentrant
backward deeper than 60 levels, or any library's native threads) never gets
one, so the Python code the engine calls there is reported as never run.

The bridge hooks every place where the engine enters Python code that it
did not receive from a traced caller -- the backward node's ``apply`` and
``apply_boxed`` (through the ``_get_user_fn`` both call), ``apply_jvp``, and
the hooks users register -- and, on a thread that has no trace function,
installs the one ``threading.gettrace()`` returns.  While coverage measures, that is coverage's own per-thread
installer, so the rest of the call is traced by coverage's own tracer, with
its branch and context handling unchanged.  With no coverage running, or with
coverage's ``sysmon`` core (which traces every thread already and leaves
``threading.gettrace()`` empty), there is nothing to install and the wrapper
only calls through.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from typing import Any, Callable

from autograd_lint.coverage.after_import import call_after_import

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
_gettrace = sys.gettrace
# The per-thread counters the node entries feed (see :func:`set_counters`), or None.
_counters: Any = None
# torch.is_grad_enabled, bound by install().
_is_grad_enabled: Any = None
# What torch 2.13's BackwardCFunction._get_user_fn refers to, in order: the fast
# entry below replaces it only while it still reads exactly these names.
GET_USER_FN_NAMES = ("_forward_cls", "backward", "vjp", "Function", "RuntimeError")
# How the node entries were hooked: "get_user_fn" (no extra frame per backward
# node) or "wrappers" (a wrapper around apply and apply_boxed); "" before install().
node_hook = ""


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


def set_counters(counters: Any) -> None:
    """Count node entries into ``counters``, a :class:`threading.local` (None: stop counting).

    On each thread it must have ``defaultdict(int)`` attributes ``backward``,
    ``double_backward`` and ``jvp`` mapping a Function class to its runs on that thread.  Counting is done
    inline in the entries, not by a listener, because under coverage every extra
    Python frame costs a trace call.
    """
    global _counters
    _counters = counters


# The hot paths below run once per backward node (and per hook call) for the
# whole test suite, under coverage's tracer, where every Python frame costs a
# trace-function call: each does a few attribute loads and dict updates inline
# and calls no helper of ours unless the thread has no trace function.


def _node_entry_get_user_fn(base_backward: Any, base_vjp: Any) -> Callable[[Any], Any]:
    """Replacement for ``BackwardCFunction._get_user_fn``, which ``apply``/``apply_boxed`` call.

    Same result and error as torch's, plus the bridge's work, in the same frame:
    entering a backward node costs no extra Python frame.
    """

    def _get_user_fn(self: Any) -> Any:
        if _gettrace() is None:
            # Seeds the thread before the user function is called.
            ensure_thread_traced()
        cls = self._forward_cls
        if _counters is not None:
            _counters.backward[cls] += 1
            if _is_grad_enabled():
                _counters.double_backward[cls] += 1
        if _listeners:
            for listener in _listeners:
                listener(self, "apply")
        backward_fn = cls.backward
        vjp_fn = cls.vjp
        if backward_fn is not base_backward and vjp_fn is not base_vjp:
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom "
                "Function is not allowed. You should only implement one "
                "of them."
            )
        return vjp_fn if vjp_fn is not base_vjp else backward_fn

    return _get_user_fn


def _wrap_node_entry(original: Callable[..., Any], entry: str) -> Callable[..., Any]:
    jvp = entry == "apply_jvp"

    @functools.wraps(original)
    def node_entry(self: Any, *args: Any) -> Any:
        if _gettrace() is None:
            ensure_thread_traced()
        counters = _counters
        if counters is not None:
            cls = self._forward_cls
            if jvp:
                counters.jvp[cls] += 1
            else:
                counters.backward[cls] += 1
                if _is_grad_enabled():
                    counters.double_backward[cls] += 1
        for listener in _listeners:
            listener(self, entry)
        return original(self, *args)

    return node_entry


def traced_hook(hook: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a user hook so that it runs traced on whatever thread calls it.

    Hooks are often registered inside the forward, once per call, so this
    copies the hook's identity itself rather than through ``functools.wraps``
    (two more Python frames per registration).  The wrapper is a plain
    function with the hook's ``__name__`` (which torch reads on every hook
    call), ``__qualname__``, ``__module__`` and ``__doc__``, and
    ``__wrapped__`` is the hook.
    """

    def traced(*args: Any, **kwargs: Any) -> Any:
        if _gettrace() is None:
            ensure_thread_traced()
        return hook(*args, **kwargs)

    try:
        traced.__name__ = hook.__name__
        traced.__qualname__ = hook.__qualname__
        traced.__module__ = hook.__module__
        traced.__doc__ = hook.__doc__
    except AttributeError:  # a callable object: keep what it has
        pass
    traced.__wrapped__ = hook  # type: ignore[attr-defined]
    return traced


def _wrap_registration(original: Callable[..., Any], is_method: bool) -> Callable[..., Any]:
    hook_index = int(is_method)
    code = getattr(original, "__code__", None)
    if code is None or code.co_varnames[hook_index:hook_index + 1] != ("hook",):
        # Not laid out as expected: find the hook by keyword or position.
        @functools.wraps(original)
        def register_any(*args: Any, **kwargs: Any) -> Any:
            if "hook" in kwargs:
                kwargs["hook"] = traced_hook(kwargs["hook"])
            elif len(args) > hook_index:
                args = (*args[:hook_index], traced_hook(args[hook_index]), *args[hook_index + 1:])
            return original(*args, **kwargs)

        return register_any

    # The registration functions take ``hook`` first (after ``self``), and the
    # common call passes nothing else: call straight through.
    if is_method:

        @functools.wraps(original)
        def register_method(self: Any, hook: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            if args or kwargs:
                return original(self, traced_hook(hook), *args, **kwargs)
            return original(self, traced_hook(hook))

        return register_method

    @functools.wraps(original)
    def register(hook: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            return original(traced_hook(hook), *args, **kwargs)
        return original(traced_hook(hook))

    return register


def install() -> None:
    """Patch torch's engine entries and hook registrations; idempotent.

    Imports torch: call it only where torch is wanted (see
    :func:`install_when_torch_imported`).
    """
    global _installed, _is_grad_enabled, node_hook
    if _installed:
        return
    import torch
    from torch.autograd.function import BackwardCFunction, Function

    _is_grad_enabled = torch.is_grad_enabled
    get_user_fn = BackwardCFunction.__dict__.get("_get_user_fn")
    callers = [BackwardCFunction.__dict__.get(entry) for entry in ("apply", "apply_boxed")]
    if (
        get_user_fn is not None
        and get_user_fn.__code__.co_names == GET_USER_FN_NAMES
        and all(c is not None and "_get_user_fn" in c.__code__.co_names for c in callers)
    ):
        # Both plain entries go through _get_user_fn before calling user code.
        BackwardCFunction._get_user_fn = _node_entry_get_user_fn(Function.backward, Function.vjp)
        node_hook = "get_user_fn"
        wrapped: tuple[str, ...] = ("apply_jvp",)
    else:
        node_hook = "wrappers"
        wrapped = NODE_ENTRIES
    for entry in wrapped:
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
            setattr(owner, function_name, _wrap_registration(original, class_name is not None))
    _installed = True
    from autograd_lint.coverage import dynamo_skip

    dynamo_skip.skip_when_dynamo_imported()


def install_when_torch_imported() -> None:
    """:func:`install` now if torch is imported, else right after ``import torch`` ends."""
    call_after_import("torch", install)
