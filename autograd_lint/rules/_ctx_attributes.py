"""What a tensor kept on a ctx attribute is, and how backward reads it: the facts that
AGL003 (inputs with a gradient, outputs) and AGL032 (computed tensors) report from.

Everything here is asked of the semantic model (:mod:`autograd_lint.model.semantic`):
the stored values (flows to ctx attributes), where their tensors come from
(:meth:`MethodModel.sources`), how the readers use the attribute
(:meth:`MethodModel.reads_data`), and which inputs backward gives a gradient
(:func:`gradient_given`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Iterator

import libcst as cst

from autograd_lint.model.semantic import Binding, Flow, How, MethodModel, Sink, Sources
from autograd_lint.model.spec import FunctionSpec, Kind, MethodSpec, ParamKind
from autograd_lint.rules._common import ctx_writers, gradient_given
from autograd_lint.rules.base import FunctionContext

# ctx methods that receive ctx from the engine and may release, fill or read ctx attributes.
READERS = ("backward", "vjp", "jvp")
# Kinds worth a look: a floating tensor, or one that is None on some paths.  Integer
# and bool tensors (masks, indices, ids) kept on ctx are deliberate and harmless.
_REPORTED = (Kind.TENSOR, Kind.OPTIONAL_TENSOR)


class Held(enum.Enum):
    """What the tensor on the attribute is."""

    OUTPUT = "a forward output (or a view of one)"
    DETACHED_OUTPUT = "a detached forward output"
    GRADED_INPUT = "a forward input (or a view or detached alias of one) backward may give a gradient"
    INPUT = "a forward input backward gives no gradient, or of which that is unknown"
    COMPUTED = "a tensor computed in the method, neither an input nor an output"
    UNKNOWN = "nothing known"


class Reads(enum.Enum):
    """How backward, vjp and jvp read the attribute."""

    DATA = "data"
    METADATA = "metadata only"
    NONE = "not at all"
    UNKNOWN = "unknown"  # a reader can't be read, or hands ctx to other code


@dataclass(frozen=True)
class Kept:
    """One tensor kept on a ctx attribute (the whole value, or one element of a literal)."""

    method: MethodSpec
    model: MethodModel
    store: Flow  # the whole `ctx.<attribute> = value`
    tensor: Flow  # the store, or the element flow of the tensor in a list/tuple/dict literal
    attribute: str
    held: Held
    reads: Reads
    sources: Sources  # where the tensor comes from (views passed included)
    # For a slice or item of forward's ``*args``: the input positions it holds that backward
    # gives a gradient (the evidence that they are tensors); empty otherwise.
    star_inputs: tuple[int, ...] = ()

    @property
    def in_container(self) -> bool:
        return self.tensor is not self.store


def kept_tensors(ctx: FunctionContext) -> Iterator[Kept]:
    """Every tensor that forward (combined style) or setup_context, written in this class,
    keeps on a ctx attribute, but for attributes a reader releases or fills (buffers and
    caches managed by hand) and those in ``allowed_ctx_tensor_attributes``.  Nothing when
    some reader's code is not at hand."""
    function = ctx.function
    allowed = ctx.settings.allowed_ctx_tensor_attributes
    exempt: set[str] | None = None
    for method in ctx_writers(function):
        if not ctx.own(method) or method.semantic is None or method.ctx_name is None:
            continue
        model = method.semantic
        if ctx.unit(method) is None:
            continue
        roles: _Roles | None = None
        for store, tensor in _stored_tensors(model, method.ctx_name):
            attribute = store.detail or ""
            if attribute in allowed:
                continue
            if exempt is None:
                exempt = _managed_attributes(function)
                if exempt is None:
                    return
            if attribute in exempt:
                continue
            if roles is None:
                roles = _Roles(function, method, model)
            sources = model.sources(tensor.expr)
            held = roles.held(sources)
            element = _element_position(store, tensor)
            yield Kept(method, model, store, tensor, attribute, held, _reads(function, attribute, element), sources)
        for store, first, graded in _star_stores(function, method, model):
            attribute = store.detail or ""
            if attribute in allowed:
                continue
            if exempt is None:
                exempt = _managed_attributes(function)
                if exempt is None:
                    return
            if attribute in exempt:
                continue
            reads = _best(_reads(function, attribute, None if first is None else p - first) for p in graded)
            sources = model.sources(store.expr)
            yield Kept(method, model, store, store, attribute, Held.GRADED_INPUT, reads, sources, graded)


def target_of(kept: Kept) -> cst.CSTNode:
    """The ``ctx.<attribute>`` target of the assignment (where a report points)."""
    node = kept.store.node
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, cst.AnnAssign):
        targets = [node.target]
    for target in targets:
        for candidate in [target, *(e.value for e in getattr(target, "elements", ()))]:
            if isinstance(candidate, cst.Attribute) and candidate.attr.value == kept.attribute:
                return candidate
    return node


def held_text(ctx: FunctionContext, kept: Kept, noun: str = "tensor") -> str:
    """```tensor `x` ```, ```a container holding tensor `x` ```, `` `x` (a tensor or None)``."""
    unit = ctx.unit(kept.method)
    assert unit is not None
    text = unit.code(kept.tensor.expr)
    held = f"{noun} `{text}`"
    if kept.model.kind(kept.tensor.expr) is Kind.OPTIONAL_TENSOR:
        held = f"`{text}` (a {noun} or None)" if noun == "tensor" else f"{noun} `{text}` (or None)"
    if kept.in_container:
        held = f"a container holding {held}"
    if kept.star_inputs:
        inputs = ", ".join(str(p) for p in kept.star_inputs)
        plural = "s" if len(kept.star_inputs) > 1 else ""
        held = f"`{text}` (from `*args`: forward's input{plural} {inputs}, which backward gives a gradient)"
    return held


def _best(reads: Iterable[Reads]) -> Reads:
    """Data beats unknown beats metadata beats nothing (as in :func:`_reads`)."""
    order = (Reads.DATA, Reads.UNKNOWN, Reads.METADATA, Reads.NONE)
    found = set(reads)
    return next((r for r in order if r in found), Reads.NONE)


def _star_stores(
    function: FunctionSpec, method: MethodSpec, model: MethodModel
) -> Iterator[tuple[Flow, int | None, tuple[int, ...]]]:
    """``ctx.<attr> = args[i]`` / ``args[a:b]`` / ``tuple(args[a:b])`` / ``list(...)`` (or a
    local bound only to one of those) in a combined-style forward taking ``*args``: (the
    store, the input position of the slice's first item or None for one item, the input
    positions held that backward gives a gradient).  The evidence that those items are
    tensors is backward's gradient at their position, as for named inputs
    (``model.extract._graded_inputs``); only when the class derives from torch's Function
    directly, so that the style, and so each item's position, is certain."""
    if method.name != "forward" or function.method("setup_context") is not None:
        return
    if function.base_specs or not function.complete or method.ctx_name is None:
        return
    star = next((p.name for p in method.params if p.kind is ParamKind.VAR_POSITIONAL), None)
    if star is None:
        return
    named = len(method.positional) - 1  # forward's inputs before *args
    for store in model.flows_to(Sink.CTX_ATTRIBUTE):
        if store.owner != method.ctx_name or store.index is not None:
            continue
        if model.kind(store.expr) in _REPORTED:
            continue  # a tensor by its own kind: reported through _stored_tensors
        found = model.param_items(store.expr, star)
        if found is None:
            continue
        start, stop, single = found
        graded: list[int] = []
        offset = start
        while stop is None or offset < stop:
            given = gradient_given(function, named + offset)
            if given is None:
                break  # past the end of some return (or undecided): nothing beyond is known
            if given:
                graded.append(named + offset)
            offset += 1
        if graded:
            yield store, None if single else named + start, tuple(graded)


def _element_position(store: Flow, tensor: Flow) -> int | None:
    """The position of ``tensor`` in the list or tuple literal ``store`` keeps, as backward
    sees it; None for the whole value, a dict, or a literal with a starred element (whose
    later positions are unknown)."""
    literal = store.expr
    if tensor is store or not isinstance(literal, (cst.List, cst.Tuple)):
        return None
    if any(isinstance(e, cst.StarredElement) for e in literal.elements):
        return None
    return tensor.index


def _stored_tensors(model: MethodModel, ctx_name: str) -> Iterator[tuple[Flow, Flow]]:
    """(the store, the tensor it holds) for each ``ctx.<attr> = ...`` whose value, or an
    element of whose list/tuple/dict literal, is certainly a floating tensor (or None)."""
    stores = [f for f in model.flows_to(Sink.CTX_ATTRIBUTE) if f.owner == ctx_name]
    returned_containers = _returned_by_element(model)
    for store in stores:
        if store.index is not None:
            continue
        if model.kind(store.expr) in _REPORTED or (
            isinstance(store.expr, cst.Name) and model.reaching(store.expr)
            and model.reaching(store.expr) <= returned_containers
        ):
            yield store, store
            continue
        element = next(
            (
                f
                for f in stores
                if f.node is store.node and f.detail == store.detail and f.index is not None
                and model.kind(f.expr) in _REPORTED
            ),
            None,
        )
        if element is not None:
            yield store, element


def _returned_by_element(model: MethodModel) -> set[Binding]:
    """Containers whose element forward returns (``outputs = ext.forward(x); return
    outputs[0]``): keeping the container on ctx keeps that output, of whatever kind the
    container's elements are not otherwise known to be."""
    found: set[Binding] = set()
    for flow in model.flows_to(Sink.RETURN):
        expr = flow.expr
        if (
            isinstance(expr, cst.Subscript)
            and isinstance(expr.value, cst.Name)
            and len(expr.slice) == 1
            and isinstance(expr.slice[0].slice, cst.Index)
            and isinstance(expr.slice[0].slice.value, cst.Integer)
        ):
            found |= model.reaching(expr.value)
    return found


def _released_or_filled(method: MethodSpec) -> set[str] | None:
    """ctx attributes that ``method`` deletes, resets to ``None``, clears or writes in place.

    Such attributes are not leaks but buffers or caches managed by hand (catalogue
    §5 trap 11); a write through a local read from the attribute
    (``buf = ctx.buf; buf.copy_(g)``) counts too.  ``None`` when the method's code
    is not at hand.
    """
    model = method.semantic
    ctx_name = method.ctx_name
    if model is None or ctx_name is None:
        return None
    found = {attr for owner, attr, _ in model.deleted_attributes if owner == ctx_name}
    for flow in model.flows_to(Sink.CTX_ATTRIBUTE):
        if flow.owner == ctx_name and flow.index is None and model.kind(flow.expr) is Kind.NONE:
            found.add(flow.detail or "")
    for write in model.inplace_writes:
        target = write.target.value if isinstance(write.target, cst.Subscript) else write.target
        held = model.attribute_of(target)
        if held is not None and held[0] == ctx_name:
            found.add(held[1])
    return found


def _managed_attributes(function: FunctionSpec) -> set[str] | None:
    """Attributes the readers release or fill; ``None`` when some reader can't be read."""
    managed: set[str] = set()
    for name in READERS:
        reader = function.method(name)
        if reader is None:
            continue
        found = _released_or_filled(reader)
        if found is None:
            return None
        managed |= found
    return managed


def _reads(function: FunctionSpec, attribute: str, element: int | None) -> Reads:
    """How the readers use ``ctx.<attribute>`` (its ``element``-th item, for a list or
    tuple literal): data beats unknown beats metadata beats nothing."""
    readers = [m for m in (function.method(name) for name in READERS) if m is not None]
    if not readers:
        return Reads.UNKNOWN
    loads = escapes = False
    for reader in readers:
        model, ctx_name = reader.semantic, reader.ctx_name
        if model is None or ctx_name is None:
            return Reads.UNKNOWN
        for load in model.attribute_loads(ctx_name, (attribute,)):
            loads = True
            if model.reads_data(load, element):
                return Reads.DATA
        escapes = escapes or model.escapes(ctx_name)
    if escapes:
        return Reads.UNKNOWN
    return Reads.METADATA if loads else Reads.NONE


class _Roles:
    """Which bindings of a ctx writer are forward's inputs (by position) and outputs."""

    def __init__(self, function: FunctionSpec, method: MethodSpec, model: MethodModel) -> None:
        self.function = function
        self.method = method
        self.model = model
        self.split = method.name == "setup_context"
        positional = [p.name for p in method.positional]
        if self.split:
            self.inputs_param = positional[1] if len(positional) > 1 else None
            self.output_param = positional[2] if len(positional) > 2 else None
            self.positions: dict[str, int] = {}
        else:
            self.inputs_param = self.output_param = None
            self.positions = {name: i for i, name in enumerate(positional[1:])}
        returned_same: set[Binding] = set()
        returned_detached: set[Binding] = set()
        if not self.split:
            for flow in model.flows_to(Sink.RETURN):
                found = model.sources(flow.expr)
                returned_same |= found.same
                returned_detached |= found.detached
            # A container whose element is returned holds that output object.
            returned_same |= _returned_by_element(model)
        not_differentiable: set[Binding] = set()
        for flow in model.flows_to(Sink.CTX_API, "mark_non_differentiable"):
            not_differentiable |= model.sources(flow.expr).bindings
        # An input forward returns is not the output object (autograd hands out a new alias
        # of it), unless it is marked dirty: then the input itself becomes the output.
        dirty: set[Binding] = set()
        for flow in model.flows_to(Sink.CTX_API, "mark_dirty"):
            dirty |= model.sources(flow.expr).bindings
        inputs = {b for b in returned_same | returned_detached if b.how is How.PARAMETER and b not in dirty}
        self.returned_same = returned_same - not_differentiable - inputs
        self.returned_any = (returned_same | returned_detached) - not_differentiable - inputs

    def held(self, sources: Sources) -> Held:
        if any(self._is_output(b, same=True) for b in sources.same):
            return Held.OUTPUT
        if any(self._is_output(b, same=False) for b in sources.bindings):
            return Held.DETACHED_OUTPUT
        positions = [p for p in (self._input_position(b) for b in sources.bindings) if p is not None]
        if any(gradient_given(self.function, p) for p in positions):
            return Held.GRADED_INPUT
        if positions or any(self._from_outside(b) for b in sources.bindings):
            return Held.INPUT
        if sources.bindings or sources.made:
            return Held.COMPUTED
        return Held.UNKNOWN

    def _is_output(self, binding: Binding, same: bool) -> bool:
        if self.split:
            return self._element_of(binding, self.output_param) is not None
        return binding in (self.returned_same if same else self.returned_any)

    def _input_position(self, binding: Binding) -> int | None:
        if self.split:
            return self._element_of(binding, self.inputs_param)
        if binding.how is How.PARAMETER:
            return self.positions.get(binding.name)
        return None

    def _from_outside(self, binding: Binding) -> bool:
        """A parameter that is not an input position (``*args``, a keyword-only one), or
        setup_context's ``inputs``/``output`` as a whole: not computed here."""
        return binding.how is How.PARAMETER

    def _element_of(self, binding: Binding, param: str | None) -> int | None:
        """The index ``i`` when ``binding`` holds ``param[i]`` (``a, b = param``,
        ``a = param[0]``); 0 for ``param`` itself when it is setup_context's output."""
        if param is None:
            return None
        if binding.how is How.PARAMETER:
            return 0 if binding.name == param and param == self.output_param else None
        unpacked = self.model.unpacked(binding)
        if unpacked is not None:
            value, index = unpacked
            return index if self._is_param(value, param) else None
        value = binding.value
        if binding.how is How.ASSIGNMENT and isinstance(value, cst.Subscript) and self._is_param(value.value, param):
            if len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
                index = value.slice[0].slice.value
                if isinstance(index, cst.Integer):
                    return int(index.value)
        return None

    def _is_param(self, expr: cst.BaseExpression, param: str) -> bool:
        return self.model.is_param(expr, param)
