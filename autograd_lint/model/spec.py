"""The analysis model: what an autograd.Function *is*, as plain values.

A :class:`FunctionSpec` describes one ``torch.autograd.Function`` subclass found in
source code: its methods, their parameters and decorators, the ``ctx`` API calls
they make, what they return and the class attributes that change how PyTorch calls
them.  Rules (``autograd_lint.rules``), ``gen-tests`` and the coverage report read
these values; none of them re-discovers Functions on its own.

Specs are picklable so that files can be analysed in worker processes and a
Function's spec can serve as the base of a subclass found in another file.  The
libcst nodes of methods are kept only in the process that parsed them (see
:attr:`MethodSpec.node`), for the rules that need control flow.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping

# Defined with the text scans, which need them before any spec is made (and this module imported).
from autograd_lint.model.locate import FUNCTION_BASES, FUNCTION_METHODS  # noqa: F401

if TYPE_CHECKING:
    import libcst as cst

    from autograd_lint.model.semantic import MethodModel

# Methods that receive ctx as their first positional parameter.
CTX_METHODS = frozenset({"setup_context", "backward", "vjp", "jvp"})


class ParamKind(enum.Enum):
    """How a parameter binds arguments, as in :class:`inspect.Parameter`."""

    POSITIONAL_ONLY = "positional-only"
    POSITIONAL = "positional-or-keyword"
    VAR_POSITIONAL = "*args"
    KEYWORD_ONLY = "keyword-only"
    VAR_KEYWORD = "**kwargs"


class Kind(enum.Enum):
    """What an expression evaluates to, as far as syntax can tell."""

    TENSOR = "tensor"
    # An integer or bool tensor (masks, indices, ids): a tensor that never needs a gradient.
    INDEX_TENSOR = "integer or bool tensor"
    # A tensor on some paths and None on the others.
    OPTIONAL_TENSOR = "tensor or None"
    # An integer or bool tensor on some paths and None on the others (`Optional[torch.LongTensor]`).
    OPTIONAL_INDEX_TENSOR = "integer or bool tensor or None"
    NON_TENSOR = "non-tensor"
    NONE = "None"
    UNKNOWN = "unknown"

    @property
    def is_tensor(self) -> bool:
        """Certainly a tensor (floating point or integer/bool)."""
        return self in (Kind.TENSOR, Kind.INDEX_TENSOR)

    @property
    def may_be_tensor(self) -> bool:
        """A tensor on some path, or not known not to be one."""
        return self not in (Kind.NON_TENSOR, Kind.NONE)


@dataclass(frozen=True)
class Position:
    """A place in a file: 1-based line, 0-based column (as :mod:`ast` counts)."""

    line: int
    column: int


@dataclass(frozen=True)
class Expr:
    """A summarised expression: its source text, its kind and, for a bare name, the name."""

    text: str
    kind: Kind
    name: str | None = None
    position: Position | None = None


@dataclass(frozen=True)
class Param:
    """One parameter of a method."""

    name: str
    kind: ParamKind
    annotation: str | None = None
    default: Expr | None = None

    @property
    def is_positional(self) -> bool:
        return self.kind in (ParamKind.POSITIONAL_ONLY, ParamKind.POSITIONAL)

    @property
    def is_required_positional(self) -> bool:
        return self.is_positional and self.default is None


@dataclass(frozen=True)
class Decorator:
    """A decorator, with the qualified name it resolves to (``None`` if it does not resolve)."""

    text: str
    qualified_name: str | None
    is_call: bool
    keywords: tuple[str, ...] = ()
    position: Position | None = None


@dataclass(frozen=True)
class Return:
    """One ``return`` statement of a method (nested ``def``/``lambda``/``class`` excluded).

    ``elements`` is set when the value is a tuple literal without a starred element
    (or a local name bound exactly once to one); ``value`` is ``None`` for a bare
    ``return``.
    """

    position: Position
    value: Expr | None
    elements: tuple[Expr, ...] | None = None
    # "tuple", "list", "listcomp", "genexp", "dict", "set", "call:list", "name", "none", "other"
    shape: str = "other"


@dataclass(frozen=True)
class CtxCall:
    """A call ``ctx.<api>(...)`` on the method's ctx parameter."""

    api: str
    args: tuple[Expr, ...]
    has_starred: bool
    position: Position


@dataclass(frozen=True)
class CtxWrite:
    """An assignment to ``ctx.<attribute>``.

    ``elements`` holds the summarised elements when the value is a list or tuple
    literal without a starred element.
    """

    attribute: str
    value: Expr
    position: Position
    elements: tuple[Expr, ...] | None = None


@dataclass(frozen=True)
class CtxRead:
    """A load of ``ctx.<attribute>`` (``saved_tensors``, ``needs_input_grad``, ...).

    ``targets`` holds the names a ``a, b = ctx.saved_tensors`` statement unpacks into
    (``None`` when the read is not the whole right-hand side of an assignment);
    ``index`` holds the integer literal of ``ctx.needs_input_grad[k]``.
    """

    attribute: str
    position: Position
    targets: tuple[str, ...] | None = None
    target_is_sequence: bool = False
    index: int | None = None
    in_loop: bool = False


@dataclass
class MethodSpec:
    """One method of a Function class, as written in its ``def``."""

    name: str
    params: tuple[Param, ...]
    decorators: tuple[Decorator, ...]
    position: Position  # the ``def`` keyword
    first_line: int  # first decorator line, or the ``def`` line
    last_line: int
    defined_in: str  # qualified name of the class that defines it
    path: str
    returns: tuple[Return, ...] = ()
    ctx_calls: tuple[CtxCall, ...] = ()
    ctx_writes: tuple[CtxWrite, ...] = ()
    ctx_reads: tuple[CtxRead, ...] = ()
    # The kind of each positional parameter other than ctx (forward's first one is
    # included, as it is an input in split style), as the caller passes it: before
    # any rebinding in the body.
    param_kinds: dict[str, Kind] = field(default_factory=dict)
    # The libcst node; only in the process that parsed the file, never pickled.
    node: "cst.FunctionDef | None" = field(default=None, compare=False, repr=False)
    # The semantic model of the body (bindings, kinds, flows, in-place writes), built
    # once with the spec; like ``node``, only in the process that parsed the file.
    semantic: "MethodModel | None" = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["node"] = None
        state["semantic"] = None
        return state

    def has_decorator(self, *qualified_names: str) -> bool:
        return any(d.qualified_name in qualified_names for d in self.decorators)

    @property
    def is_staticmethod(self) -> bool:
        return self.has_decorator("builtins.staticmethod")

    @property
    def is_classmethod(self) -> bool:
        return self.has_decorator("builtins.classmethod")

    @property
    def is_once_differentiable(self) -> bool:
        return self.has_decorator(
            "torch.autograd.function.once_differentiable",
            "torch.autograd.once_differentiable",
        )

    @property
    def positional(self) -> tuple[Param, ...]:
        """The positional parameters that receive arguments (a classmethod's ``cls`` left out)."""
        positional = tuple(p for p in self.params if p.is_positional)
        return positional[1:] if self.is_classmethod else positional

    @property
    def has_var_positional(self) -> bool:
        return any(p.kind is ParamKind.VAR_POSITIONAL for p in self.params)

    @property
    def ctx_name(self) -> str | None:
        """The name of the first positional parameter after a classmethod's ``cls`` (ctx is
        found by position, not name)."""
        positional = self.positional
        return positional[0].name if positional else None

    def calls(self, api: str) -> list[CtxCall]:
        return [c for c in self.ctx_calls if c.api == api]

    def reads(self, attribute: str) -> list[CtxRead]:
        return [r for r in self.ctx_reads if r.attribute == attribute]


@dataclass
class FunctionSpec:
    """One ``torch.autograd.Function`` subclass.

    ``methods`` holds the methods the class itself defines; :meth:`method` finds the
    *effective* one, following in-run base classes.  ``complete`` is false when some
    base class could not be resolved (imported from outside the analysed files): a
    method that is not found may then exist there, and rules must not assume it is
    missing.
    """

    name: str
    qualname: str  # dotted within the module: "Outer.Inner", "make.<locals>.Fn"
    module: str | None
    path: str
    position: Position
    last_line: int
    bases: tuple[str, ...]  # resolved base names, as written when unresolved
    methods: dict[str, MethodSpec] = field(default_factory=dict)
    class_attributes: dict[str, Expr] = field(default_factory=dict)
    base_specs: tuple["FunctionSpec", ...] = ()
    complete: bool = True
    # Decorators of the class statement (a decorator may wrap or replace the class).
    decorators: tuple[str, ...] = ()

    @property
    def full_name(self) -> str:
        return f"{self.module}.{self.qualname}" if self.module else self.qualname

    def mro(self) -> Iterator["FunctionSpec"]:
        """This class, then its Function bases depth-first, left to right, each once."""
        seen: set[int] = set()
        stack = [self]
        while stack:
            spec = stack.pop(0)
            if id(spec) in seen:
                continue
            seen.add(id(spec))
            yield spec
            stack[0:0] = list(spec.base_specs)

    @property
    def knows_all_methods(self) -> bool:
        return all(spec.complete for spec in self.mro())

    def method(self, name: str) -> MethodSpec | None:
        """The effective method ``name``: defined here or in the nearest Function base."""
        for spec in self.mro():
            if name in spec.methods:
                return spec.methods[name]
        return None

    def attribute(self, name: str) -> Expr | None:
        for spec in self.mro():
            if name in spec.class_attributes:
                return spec.class_attributes[name]
        return None

    def attribute_is_true(self, name: str) -> bool:
        value = self.attribute(name)
        return value is not None and value.text == "True"

    @property
    def effective_methods(self) -> Mapping[str, MethodSpec]:
        found: dict[str, MethodSpec] = {}
        for name in FUNCTION_METHODS:
            method = self.method(name)
            if method is not None:
                found[name] = method
        return found

    @property
    def is_split_style(self) -> bool | None:
        """True with ``setup_context`` overridden, False without, None when unknowable."""
        if self.method("setup_context") is not None:
            return True
        return False if self.knows_all_methods else None

    @property
    def forward_inputs(self) -> tuple[Param, ...] | None:
        """The parameters that receive ``apply``'s arguments, or None when unknown.

        Unknown when forward is missing, has ``*args``, or the style can't be decided.
        """
        forward = self.method("forward")
        split = self.is_split_style
        if forward is None or split is None or forward.has_var_positional:
            return None
        positional = forward.positional
        return positional if split else positional[1:]

    @property
    def n_inputs(self) -> int | None:
        inputs = self.forward_inputs
        return None if inputs is None else len(inputs)

    @property
    def n_outputs(self) -> int | None:
        """How many outputs forward returns, when every ``return`` says the same."""
        forward = self.method("forward")
        if forward is None or not forward.returns:
            return None
        counts: set[int] = set()
        for ret in forward.returns:
            if ret.shape == "tuple" and ret.elements is not None:
                counts.add(len(ret.elements))
            elif ret.value is not None and ret.value.kind is Kind.TENSOR:
                counts.add(1)
            else:
                return None
        return counts.pop() if len(counts) == 1 else None

    @property
    def backward_method(self) -> MethodSpec | None:
        """The effective backward, or vjp (its alias) when backward is not defined."""
        return self.method("backward") or self.method("vjp")
