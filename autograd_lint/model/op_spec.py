"""What a file's custom ops are, as plain values: the ops, their registrations, the functions handed over.

Built by :mod:`autograd_lint.model.custom_ops` from libcst trees, and kept apart
from it so that reading them back (from worker processes, or from the result
cache) does not import libcst.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from autograd_lint.model.spec import MethodSpec, Param, ParamKind, Position

if TYPE_CHECKING:
    import libcst as cst

    from autograd_lint.model.extract import ParsedUnit


@dataclass
class OpFunction:
    """A function handed to a registration: a ``def`` (described as a method) or a ``lambda``."""

    name: str
    position: Position
    method: MethodSpec | None = None  # for a ``def``
    node: cst.FunctionDef | cst.Lambda | None = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["node"] = None
        return state


@dataclass
class Registration:
    """One registration on an op: what kind, which op (by key), and the functions handed over."""

    kind: str  # "autograd", "fake", "kernel", "other"
    target: str  # an op key: "ns::name", or the qualified name of the op's Python object
    position: Position
    path: str
    function: OpFunction | None = None  # backward, fake kernel or kernel
    setup_context: OpFunction | None = None
    # The setup_context argument is there but could not be followed (an attribute, a call).
    setup_context_unknown: bool = False
    function_unknown: bool = False


@dataclass
class CustomOpSpec:
    """One operator defined with ``torch.library.custom_op`` or ``triton_op``."""

    op_name: str | None  # "ns::name", None when not a string literal
    python_name: str  # the name the op object is bound to in its module
    module: str | None
    path: str
    position: Position  # the ``def`` (decorator form) or the call
    factory: str  # "custom_op" or "triton_op"
    params: tuple[Param, ...]
    return_annotation: str | None
    # The names in a literal ``mutates_args``; "unknown" for the string; None when not literal.
    mutates_args: tuple[str, ...] | str | None
    mutates_position: Position | None
    has_schema: bool
    tags: tuple[str, ...]
    body: MethodSpec | None  # the implementation, when its ``def`` is in the file
    registrations: list[Registration] = field(default_factory=list)
    # Bound at module level, so that ``module.python_name`` imports it.
    top_level: bool = True

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.python_name}" if self.module else self.python_name

    @property
    def keys(self) -> tuple[str, ...]:
        """The names a registration may use for this op."""
        return tuple(k for k in (self.op_name, self.qualified_name) if k)

    @property
    def display(self) -> str:
        return self.op_name or self.python_name

    @property
    def positional(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_positional)

    @property
    def keyword_only(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind is ParamKind.KEYWORD_ONLY)

    @property
    def is_functional(self) -> bool | None:
        """False when ``mutates_args`` names something or is "unknown"; None when not literal."""
        if self.mutates_args is None:
            return None
        return self.mutates_args == ()

    @property
    def has_generated_fake(self) -> bool:
        """An op that mutates arguments and returns None gets a fake kernel from PyTorch
        (measured on torch 2.13: torch.compile of one without register_fake works)."""
        return self.return_annotation == "None" and self.is_functional is False

    def registered(self, kind: str) -> list[Registration]:
        return [r for r in self.registrations if r.kind == kind]


@dataclass(frozen=True)
class RunCustomOps:
    """What the other files of a run define and register (built by discovery between rounds)."""

    ops: tuple[CustomOpSpec, ...] = ()
    registrations: tuple[Registration, ...] = ()
    # Some file registers on an op it names in a way that can't be followed.
    has_unresolved_registration: bool = False


@dataclass
class CustomOpModule:
    """The custom ops a file defines, what it registers, and the parsed module they came from."""

    ops: list[CustomOpSpec] = field(default_factory=list)
    # Registrations whose op is not defined in this file (keys of other files' ops, or
    # ops of the Library API, or unknown).
    foreign: list[Registration] = field(default_factory=list)
    # Op names defined with the Library API (``lib.define("name(...)")``, ``torch.library.define``).
    defined_names: set[str] = field(default_factory=set)
    # A registration whose op could not be named (a variable holding the name, say):
    # absence of a registration must then not be concluded for any op of the file.
    has_unresolved_registration: bool = False
    # The foreign registrations whose op another file of the run defines.
    linked: list[tuple[CustomOpSpec, Registration]] = field(default_factory=list)
    # True once the other files of the run are known, so that a registration absent
    # from every file of the run can be called absent (never under flake8).
    whole_run: bool = False
    # (kind, target) of every registration in the run, this file's included (with ``whole_run``).
    run_targets: frozenset[tuple[str, str]] = frozenset()
    unit: ParsedUnit | None = field(default=None, compare=False, repr=False)

    def registrations_here(self) -> Iterator[tuple[CustomOpSpec, Registration]]:
        """Each registration written in this file, with the op it registers on."""
        path = self.unit.path if self.unit is not None else None
        for op in self.ops:
            for registration in op.registrations:
                if registration.path == path:
                    yield op, registration
        yield from self.linked

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["unit"] = None
        return state
