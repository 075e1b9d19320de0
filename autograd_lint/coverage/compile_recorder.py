"""The torch.compile recorder: evidence that code Dynamo traced really ran.

Under ``torch.compile`` no Python frame of the user's function runs: Dynamo
reads its bytecode symbolically and runs an FX graph instead, so coverage
sees nothing.  The recorder notes every source line Dynamo's instruction
translators start (and the arcs between them, in coverage's convention), per
compilation attempt, split into forward code and code reached from a
Function's ``backward``/``vjp``.  It adds the forward part to its store only
when the compiled graph is really called, and the backward part only when a
backward node that belongs to that graph really runs.  An attempt Dynamo
abandons, a forward that is never backpropagated, and export-only traces are
never added: the recorder under-reports rather than invents.

All of this leans on private torch internals (listed in :data:`PATCHED`), so
it is gated on the torch version, proves itself with :func:`.compile_self_test.run` before
it records anything, and turns itself off when that fails.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Callable, Iterable

from autograd_lint.coverage import bridge

# The torch releases this recorder was verified against (inclusive, major.minor).
TORCH_VERSIONS = ((2, 13), (2, 13))
# Setting this environment variable to "force" skips the version gate (the
# self-test still runs); "0" switches the recorder off.
ENV_SWITCH = "AUTOGRAD_COV_COMPILE"
# The private torch attributes the recorder wraps, for the docs and the warning.
PATCHED = (
    "torch._dynamo.symbolic_convert.InstructionTranslatorBase.starts_line",
    "torch._dynamo.symbolic_convert.InstructionTranslatorBase.run",
    "torch._dynamo.output_graph.OutputGraph.call_user_compiler",
    "torch.autograd.function.FunctionMeta.__init__",
)
BACKWARD_METHODS = frozenset({"backward", "vjp"})
FUNCTION_METHODS = frozenset({"forward", "setup_context", "backward", "vjp", "jvp"})
FORWARD, BACKWARD = "forward", "backward"

Arc = tuple[int, int]
# Called with (Function class, phase) each time compiled code that traced that
# Function's phase really runs; the per-Function report listens.
RunListener = Callable[[type, str], None]


@dataclass
class Evidence:
    """What one Dynamo compilation attempt traced: arcs per phase per file, and Functions."""

    arcs: dict[str, dict[str, set[Arc]]] = field(
        default_factory=lambda: {FORWARD: {}, BACKWARD: {}}
    )
    functions: dict[str, set[type]] = field(default_factory=lambda: {FORWARD: set(), BACKWARD: set()})
    # (label, phase) pairs already added to the store.
    committed: set[tuple[str, str]] = field(default_factory=set)


@dataclass
class _Frame:
    """Per-translator state: the code it traces, its phase, the last line it started."""

    code: CodeType
    phase: str
    arcs: set[Arc]
    last: int


class Recorder:
    """Collects evidence while Dynamo compiles and keeps what runtime confirmed.

    ``store`` maps a label (the test's node id, or ``""`` outside a test) to
    ``{filename: arcs}``.  Lines are the positive ends of the arcs.
    """

    def __init__(self) -> None:
        self.label = ""
        self.store: dict[str, dict[str, set[Arc]]] = {}
        self.listeners: list[RunListener] = []

    def ran(self, evidence: Evidence, phase: str) -> None:
        """The compiled code of ``evidence`` really ran ``phase``: keep its arcs."""
        key = (self.label, phase)
        if key not in evidence.committed:
            evidence.committed.add(key)
            files = self.store.setdefault(self.label, {})
            for filename, arcs in evidence.arcs[phase].items():
                files.setdefault(filename, set()).update(arcs)
        for function in evidence.functions[phase]:
            for listener in self.listeners:
                listener(function, phase)


def arcs_to_lines(arcs: Iterable[Arc]) -> set[int]:
    return {line for arc in arcs for line in arc if line > 0}


# The recorder that patched torch code reports to; None while switched off.
_active: Recorder | None = None
_installed = False
_torch_dir = ""
# Dynamo's OutputGraph is unhashable, so the evidence of a compilation
# attempt rides on it (and the per-translator state on each translator) as an
# attribute of this name, and dies with it.
_ATTRIBUTE = "_autograd_cov"
# Function classes created while a graph compiled or ran (AOT's
# CompiledFunction, the eager backend's ApplyTemplate) -> that graph's evidence.
_evidence_by_class: "weakref.WeakKeyDictionary[type, Evidence]" = weakref.WeakKeyDictionary()
# The code objects of Function methods -> (class, method name); None for other code.
_function_methods: dict[CodeType, tuple[type, str] | None] = {}
# Backend compilations in progress on any thread: the engine runs fake-tensor
# backward nodes while AOT traces, possibly on another thread, and those are
# not evidence.
_compiling = 0
_local = threading.local()


def version_supported(version: str) -> bool:
    """Whether ``torch.__version__`` is inside :data:`TORCH_VERSIONS`."""
    parts = version.split("+")[0].split(".")
    try:
        major_minor = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        return False
    return TORCH_VERSIONS[0] <= major_minor <= TORCH_VERSIONS[1]


def _function_method(code: CodeType) -> tuple[type, str] | None:
    """Which Function method ``code`` is the body of, if any (cached)."""
    if code in _function_methods:
        return _function_methods[code]
    found = None
    if code.co_name in FUNCTION_METHODS:
        import torch

        pending: list[type] = [torch.autograd.Function]
        while pending and found is None:
            cls = pending.pop()
            pending.extend(cls.__subclasses__())
            method = cls.__dict__.get(code.co_name)
            function = getattr(method, "__func__", method)
            while function is not None and getattr(function, "__code__", None) is not code:
                function = getattr(function, "__wrapped__", None)
            if function is not None:
                found = (cls, code.co_name)
    _function_methods[code] = found
    return found


def _frame(tx: Any) -> _Frame | None:
    """The recorder's state for translator ``tx``; None for torch's own code."""
    frame: _Frame | None = getattr(tx, _ATTRIBUTE, None)
    if frame is None:
        code = tx.f_code
        if code.co_filename.startswith(_torch_dir):
            return None
        evidence = getattr(tx.output, _ATTRIBUTE, None)
        if evidence is None:
            evidence = Evidence()
            setattr(tx.output, _ATTRIBUTE, evidence)
        parent_frame = getattr(getattr(tx, "parent", None), _ATTRIBUTE, None)
        method = _function_method(code)
        if method is not None and method[1] in BACKWARD_METHODS:
            phase = BACKWARD
        elif parent_frame is not None:
            phase = parent_frame.phase
        else:
            phase = FORWARD
        if method is not None and method[1] != "setup_context":
            evidence.functions[BACKWARD if method[1] in BACKWARD_METHODS else FORWARD].add(method[0])
        arcs = evidence.arcs[phase].setdefault(code.co_filename, set())
        frame = _Frame(code, phase, arcs, -code.co_firstlineno)
        setattr(tx, _ATTRIBUTE, frame)
    return frame


def _wrap_starts_line(original: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
    def starts_line(self: Any, lineno: int) -> None:
        if _active is not None and lineno != self.lineno:
            frame = _frame(self)
            # The function's own first line starts its prologue (RESUME,
            # MAKE_CELL): coverage never sees a line event for it.
            if frame is not None and lineno != frame.code.co_firstlineno:
                frame.arcs.add((frame.last, lineno))
                frame.last = lineno
        original(self, lineno)

    return starts_line


def _wrap_run(original: Callable[[Any], None]) -> Callable[[Any], None]:
    def run(self: Any) -> None:
        original(self)
        frame = getattr(self, _ATTRIBUTE, None)
        instruction = getattr(self, "current_instruction", None)
        # A run that ends on a return is the traced function returning; one
        # that ends anywhere else stopped at a graph break.
        if frame is not None and instruction is not None and instruction.opname.startswith("RETURN"):
            frame.arcs.add((frame.last, -frame.code.co_firstlineno))

    return run


def _wrap_call_user_compiler(original: Callable[..., Any]) -> Callable[..., Any]:
    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        global _compiling
        evidence = getattr(self, _ATTRIBUTE, None)
        if _active is None or evidence is None:
            return original(self, gm, example_inputs)
        _compiling += 1
        previous = getattr(_local, "graph", None)
        _local.graph = evidence
        try:
            compiled = original(self, gm, example_inputs)
        finally:
            _local.graph = previous
            _compiling -= 1
        return _confirming(compiled, evidence)

    return call_user_compiler


def _confirming(compiled: Callable[..., Any], evidence: Evidence) -> Callable[..., Any]:
    """Wrap a backend's compiled graph so that calling it confirms the forward evidence."""

    def run_compiled(*args: Any, **kwargs: Any) -> Any:
        recorder = _active
        if recorder is not None and _compiling == 0:
            recorder.ran(evidence, FORWARD)
        previous = getattr(_local, "graph", None)
        _local.graph = evidence
        try:
            return compiled(*args, **kwargs)
        finally:
            _local.graph = previous

    # Dynamo calls a graph with the boxed convention when it says so.
    if getattr(compiled, "_boxed_call", False):
        run_compiled._boxed_call = True  # type: ignore[attr-defined]
    return run_compiled


def _wrap_function_meta_init(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(cls: type, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> None:
        original(cls, name, bases, attrs)
        evidence = getattr(_local, "graph", None)
        if evidence is not None:
            _evidence_by_class[cls] = evidence

    return __init__


def _on_backward_node(node: Any, entry: str) -> None:
    """Bridge listener: a backward node of a compiled graph's Function ran for real."""
    recorder = _active
    if recorder is None or entry == "apply_jvp" or _compiling:
        return
    evidence = _evidence_by_class.get(node._forward_cls)
    if evidence is not None:
        recorder.ran(evidence, BACKWARD)


def install() -> None:
    """Patch the private torch functions in :data:`PATCHED`; idempotent."""
    global _installed, _torch_dir
    if _installed:
        return
    import torch
    from torch._dynamo.output_graph import OutputGraph
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase
    from torch.autograd.function import FunctionMeta

    _torch_dir = os.path.dirname(torch.__file__) + os.sep
    InstructionTranslatorBase.starts_line = _wrap_starts_line(  # type: ignore[method-assign]
        InstructionTranslatorBase.starts_line
    )
    InstructionTranslatorBase.run = _wrap_run(InstructionTranslatorBase.run)  # type: ignore[method-assign]
    OutputGraph.call_user_compiler = _wrap_call_user_compiler(  # type: ignore[method-assign]
        OutputGraph.call_user_compiler
    )
    FunctionMeta.__init__ = _wrap_function_meta_init(FunctionMeta.__init__)  # type: ignore[method-assign]
    bridge.install()
    bridge.add_listener(_on_backward_node)
    _installed = True


def activate(recorder: Recorder | None) -> None:
    """Make ``recorder`` the one that receives evidence (None switches recording off)."""
    global _active
    _active = recorder


def start_at_first_compile(
    recorder: Recorder, failed: Callable[[str], None], self_test: Callable[[], str | None]
) -> None:
    """Install, self-test and activate ``recorder`` when ``torch.compile`` is first called.

    ``torch.compile`` only wraps its target, so nothing is being compiled
    there and the self-test can compile.  ``self_test()`` returns None when the
    recorder works, else what went wrong (:func:`.compile_self_test.run`, handed
    in: it uses this module, which does not use it back).  ``failed(why)`` is
    called instead of activating when torch internals changed or the self-test fails.
    """
    import torch

    original = torch.compile

    @functools.wraps(original)
    def compile(*args: Any, **kwargs: Any) -> Any:
        torch.compile = original
        try:
            install()
        except (ImportError, AttributeError) as error:
            failed(f"torch internals changed ({error})")
        else:
            failure = self_test()
            if failure is None:
                activate(recorder)
            else:
                failed(f"its self-test failed ({failure})")
        return original(*args, **kwargs)

    torch.compile = compile
