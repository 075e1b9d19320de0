"""Keep the plugin's own code out of Dynamo's way: Dynamo runs its frames as it runs torch's.

The plugin replaces functions torch lives in files Dynamo skips:
``Function.apply``, ``BackwardCFunction._get_user_fn``, the hook
registrations, and calls hooks through its own wrappers.  After a graph
break, Dynamo runs the rest of a compiled function natively and tries to
compile every new frame it meets there; a frame of one of those wrappers is
not in a skipped file, so Dynamo traced it, and tracing ``super().apply``
failed (``AsPythonConstantNotImplementedError: AutogradFunctionVariable() is
not a constant``) where torch's own ``apply`` is simply run.

:func:`skip_when_dynamo_imported` gives every code object of the plugin's
run-time modules, nested functions included, the frame strategy torch gives
its own files: run this frame natively, and treat the frames it calls as
usual (``torch._dynamo.eval_frame.skip_code``, what
``torch._dynamo.decorators.skip`` does).  Dynamo installs its frame callback
only after it is imported, so marking the code then is in time.
"""

from __future__ import annotations

import importlib
import inspect
from types import CodeType, ModuleType
from typing import Callable, Iterator

from autograd_lint.coverage.after_import import call_after_import

# The modules whose code runs in the user's frames: wrappers, counters,
# listeners and the compile recorder's hooks.
RUNTIME_MODULES = (
    "autograd_lint.coverage.after_import",
    "autograd_lint.coverage.bridge",
    "autograd_lint.coverage.report",
    "autograd_lint.coverage.compile_recorder",
)
# Whether the plugin's code has been marked; False if torch has no skip_code.
marked = False


def code_objects(module: ModuleType) -> Iterator[CodeType]:
    """Every code object defined in ``module``: its functions, methods and the functions nested in them.

    The wrappers the plugin installs are closures, so their code objects are
    constants of the functions that make them.
    """
    values: list[object] = []
    for value in vars(module).values():
        if inspect.isclass(value) and value.__module__ == module.__name__:
            values += [getattr(member, "__func__", member) for member in vars(value).values()]
        else:
            values.append(value)
    pending = [v.__code__ for v in values if inspect.isfunction(v) and v.__module__ == module.__name__]
    seen: set[CodeType] = set()
    while pending:
        code = pending.pop()
        if code not in seen:
            seen.add(code)
            yield code
            pending.extend(c for c in code.co_consts if isinstance(c, CodeType))


def _mark() -> None:
    global marked
    try:
        from torch._dynamo.eval_frame import skip_code
    except ImportError:
        return
    mark: Callable[[CodeType], None] = skip_code
    for name in RUNTIME_MODULES:
        for code in code_objects(importlib.import_module(name)):
            mark(code)
    marked = True


def skip_when_dynamo_imported() -> None:
    """Mark the plugin's code as skipped for Dynamo now if Dynamo is imported, else once it is."""
    call_after_import("torch._dynamo", _mark)
