"""The semantic model of one method body: bindings, value kinds, flows and in-place writes.

Rules ask this model what a name is bound to instead of walking the body again,
as ruff's rules query its semantic model.  One :class:`MethodModel` is built per
method (:func:`build`), once, by the model's own builder
(:mod:`autograd_lint.model.extract`), and kept on :attr:`MethodSpec.semantic`.

The walk is flow-sensitive over structured control flow: each use of a name
learns which bindings reach it (through ``if``/``else``, loops run twice so a
rebinding at the end of a loop body reaches the uses at its top, ``try``,
``with``, ``match``, early ``return``/``raise``/``break``/``continue``).
``isinstance`` and ``is None`` tests narrow a name inside their branches (and
after an ``if`` whose other branch leaves).  Nested ``def``/``class``/``lambda``
bodies are not walked: they do not run where they are written; their uses of
the method's names are listed in :attr:`MethodModel.nested_uses`.

Kinds come from annotations read as types, literal defaults and, for a
parameter the annotation leaves open, usage evidence on the paths where the
parameter is not rebound (see :data:`EVIDENCE`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import libcst as cst

from autograd_lint.model import sequences, traverse
from autograd_lint.model.exprs import (
    SAVED_ATTRIBUTES,
    TENSOR_ONLY_METHODS,
    Classifier,
    annotation_kind,
    dotted_name,
    is_literal,
    is_none,
    join,
    node_code,
    without_none,
)
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.spec import Kind

# Methods that return a view of (or the very tensor of) their receiver.
ALIAS_METHODS = frozenset(
    "view view_as reshape contiguous squeeze unsqueeze t transpose expand flatten".split()
)
# torch.distributed collectives that write their first argument, a tensor, in place
# (all_gather, reduce_scatter and all_to_all write the tensors of a list instead).
COLLECTIVE_WRITES = frozenset(
    f"torch.distributed.{name}"
    for name in (
        "all_reduce broadcast reduce all_gather_into_tensor reduce_scatter_tensor all_to_all_single "
        "recv irecv scatter _all_gather_base _reduce_scatter_base".split()
    )
)
# Attributes that are views of their tensor (the transposes).
VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH"})
# What a tensor tells about itself without its data being read: attributes, and methods
# called on it (``new_zeros`` and the like take only its dtype and device).
METADATA_ATTRIBUTES = frozenset(
    "shape dtype device is_cuda ndim layout requires_grad is_sparse is_quantized is_leaf grad_fn".split()
)
METADATA_METHODS = frozenset(
    """
    size dim ndimension numel nelement stride is_contiguous get_device element_size
    new_zeros new_ones new_empty new_full data_ptr storage_offset is_floating_point is_complex
    """.split()
)
# torch functions that take only the shape, dtype and device of their first argument.
LIKE_FUNCTIONS = frozenset(
    "torch.zeros_like torch.ones_like torch.empty_like torch.full_like torch.rand_like torch.randn_like "
    "torch.randint_like".split()
)
# In-place methods that do not write tensor data.
HARMLESS_INPLACE = frozenset({"requires_grad_", "share_memory_", "retain_grad_"})
# In-place methods that change only a tensor's shape or strides, not its data.
SHAPE_ONLY_INPLACE = frozenset("unsqueeze_ squeeze_ transpose_ t_ swapdims_ swapaxes_ as_strided_".split())
# Usage that makes an unannotated parameter a tensor: a method only tensors have
# (``size`` is not one: process groups and many other objects have it), a read of
# ``.shape``/``.dtype``/``.device``, the first argument of a ``torch.*`` call that
# takes a tensor there, and an argument of a ctx API that only takes tensors.
EVIDENCE_METHODS = TENSOR_ONLY_METHODS - {"size"}
EVIDENCE_ATTRIBUTES = frozenset({"shape", "dtype", "device", "is_cuda", "grad", "grad_fn"})
TENSOR_ONLY_CTX_APIS = frozenset({"save_for_backward", "mark_dirty", "mark_non_differentiable", "save_for_forward"})
# torch functions whose first argument is not a tensor (sizes, lists, data, strings).
_NOT_TENSOR_FIRST = frozenset(
    """
    tensor as_tensor asarray from_numpy frombuffer zeros ones empty full arange range linspace logspace
    eye rand randn randint randperm normal empty_strided zeros_like_ cat concat concatenate stack hstack
    vstack dstack column_stack row_stack cartesian_prod block_diag broadcast_tensors einsum meshgrid
    chain_matmul atleast_1d atleast_2d atleast_3d tensordot_ manual_seed get_default_dtype
    """.split()
)


class How(enum.Enum):
    """How a binding binds its name."""

    PARAMETER = "parameter"
    ASSIGNMENT = "assignment"  # x = value, x: T = value
    UNPACKING = "unpacking"  # a, b = value; *rest = value (when the value is not a matching literal)
    AUGMENTED = "augmented assignment"  # x += value
    FOR = "for"
    WITH = "with"
    COMPREHENSION = "comprehension"
    WALRUS = "walrus"
    DELETE = "del"
    EXCEPT = "except"
    IMPORT = "import"
    DEFINITION = "def or class"
    GLOBAL = "global or nonlocal"
    MATCH = "match"
    NARROWING = "narrowing"  # not a rebinding: the same value, known better inside a branch


@dataclass(eq=False)
class Binding:
    """One place that binds a local name.

    ``value`` is the whole expression whose value the name then holds (for
    ``x = value`` and for the matching element of ``a, b = p, q``), else None.
    ``aliases`` are the bindings whose very object this one holds too: a view
    (``y = x.view(-1)``), ``x += 1`` on a tensor, a narrowing.
    """

    name: str
    how: How
    site: cst.CSTNode
    value: cst.BaseExpression | None = None
    kind: Kind = Kind.UNKNOWN
    aliases: tuple["Binding", ...] = ()

    def roots(self) -> frozenset["Binding"]:
        """The bindings that created this binding's object (itself, unless it aliases others)."""
        if not self.aliases:
            return frozenset({self})
        found: set[Binding] = set()
        seen: set[int] = set()
        stack = list(self.aliases)
        while stack:  # a loop makes cycles: `x += 1` in a loop aliases its own earlier run
            binding = stack.pop()
            if id(binding) in seen:
                continue
            seen.add(id(binding))
            if binding.aliases:
                stack.extend(binding.aliases)
            else:
                found.add(binding)
        return frozenset(found)

    @property
    def is_rebinding(self) -> bool:
        """Whether it gives the name another value (a narrowing does not)."""
        return self.how not in (How.PARAMETER, How.NARROWING)


class Sink(enum.Enum):
    """Where a value goes."""

    RETURN = "return"  # index: the position in a returned tuple literal (None: the whole value)
    CTX_API = "ctx API"  # detail: the API (save_for_backward, mark_dirty, ...); index: argument position
    CTX_ATTRIBUTE = "ctx attribute"  # detail: the attribute; owner: the name it is set on;
    # index: the element of a stored list/tuple/dict literal (None: the whole value)
    ARGUMENT = "call argument"  # detail: the callee's dotted name, if any; index: argument position


@dataclass(frozen=True, eq=False)
class Flow:
    """A value reaching a sink: the expression written there and the bindings it comes from."""

    sink: Sink
    node: cst.CSTNode  # the return, the call, or the assignment
    expr: cst.BaseExpression
    origins: frozenset[Binding]
    detail: str | None = None
    index: int | None = None
    owner: str | None = None  # for a ctx attribute: the name the attribute is set on

    @property
    def element(self) -> bool:
        """Whether ``expr`` is one element of a container stored whole (``ctx.a = [x, y]``)."""
        return self.index is not None and self.sink is Sink.CTX_ATTRIBUTE


@dataclass(frozen=True)
class HelperCall:
    """Where a write happens inside a function of the same module that the body calls:
    the function's name, and the file's line of the write in its body."""

    name: str
    line: int

    def describe(self, how: str) -> str:
        """How a message names the write ``how`` (``"mul_()"``) made in this helper."""
        return f"through `{self.name}` ({how} on line {self.line})"


@dataclass(frozen=True, eq=False)
class InplaceWrite:
    """An in-place write (to a tensor, or ``clear()`` of a container), and the bindings
    whose object it writes (empty when the target is not a local, e.g. ``ctx.buf``).

    The write reaches the bindings through views and ``.detach()`` of them too
    (``x.detach().apply_(f)``, ``x[:, 0].zero_()``, ``x.t().mul_(2)`` all write
    ``x``'s storage); ``through`` then names the first such step, as written
    (``.detach()``, ``[...]``, ``.t()``), else it is None.  A collective
    (``dist.all_reduce(x)``) writes its first argument.

    ``self_copy`` is true for ``t.copy_(t)`` (the data does not change).

    ``helper`` is set for a call of a function of the same module that writes the
    argument ``target`` in place (:mod:`autograd_lint.model.helpers`): ``node`` is then
    the call, and ``how`` the write as the helper's body makes it.
    """

    node: cst.CSTNode
    how: str  # "mul_()", "[...] =", "+=", "out=", "torch.relu_()", "torch.distributed.all_reduce()"
    target: cst.BaseExpression
    origins: frozenset[Binding]
    self_copy: bool = False
    through: str | None = None
    helper: HelperCall | None = None

    @property
    def names(self) -> frozenset[str]:
        return frozenset(b.name for b in self.origins)


@dataclass(frozen=True, eq=False)
class Unpacking:
    """``a, b = value``: an assignment whose ``target`` (a tuple or list) binds names by
    unpacking ``value`` (not a matching tuple literal, whose elements are assigned one by one)."""

    node: cst.Assign
    target: cst.Tuple | cst.List
    value: cst.BaseExpression

    @property
    def starred(self) -> bool:
        """Whether a starred name (``a, *rest = value``) takes any number of elements."""
        return any(isinstance(e, cst.StarredElement) for e in self.target.elements)

    @property
    def count(self) -> int:
        """How many names (or nested targets) the target has."""
        return len(self.target.elements)


@dataclass(frozen=True, eq=False)
class ReturnValue:
    """A ``return`` statement: its value and, when the value is a tuple literal without a
    starred element (or a name that only a tuple literal reaches), its elements; also
    for a tuple syntax can count though no literal spells it (:mod:`sequences`: tuple
    literals joined by ``+``/``*``, ``tuple(results)`` of a list built by appends), one
    value per position (a value other than ``None`` where some branch puts one)."""

    node: cst.Return
    value: cst.BaseExpression | None
    elements: tuple[cst.BaseExpression, ...] | None


_Env = dict[str, frozenset[Binding]]


@dataclass(eq=False)
class MethodModel:
    """What the body of one method binds, holds, passes on and writes in place."""

    node: cst.FunctionDef
    imports: ImportMap
    params: dict[str, Binding] = field(default_factory=dict)
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    # id(Name node) -> the bindings that reach that use.
    reaching_by_use: dict[int, frozenset[Binding]] = field(default_factory=dict)
    uses_by_binding: dict[Binding, list[cst.Name]] = field(default_factory=dict)
    nested_uses: dict[str, list[cst.Name]] = field(default_factory=dict)
    returns: list[ReturnValue] = field(default_factory=list)
    flows: list[Flow] = field(default_factory=list)
    inplace_writes: list[InplaceWrite] = field(default_factory=list)
    # `del owner.attribute`: (owner name, attribute, the del statement).
    deleted_attributes: list[tuple[str, str, cst.Del]] = field(default_factory=list)
    # Every call of the body, with the callee as written when it is a dotted name.
    calls: list[tuple[str | None, cst.Call]] = field(default_factory=list)
    # Loads of `owner.attribute` (not the targets of assignments or `del`), in walk order.
    attribute_reads: list[tuple[str, str, cst.Attribute]] = field(default_factory=list)
    # ids of the attribute loads that a comprehension evaluates once per item (its element,
    # conditions and inner iterables; not its outermost iterable).
    per_item_reads: set[int] = field(default_factory=set)
    # Every binding, each once, in the order the walk first made it (see :meth:`all_bindings`).
    ordered: list[Binding] = field(default_factory=list)
    # id(node) -> the node enclosing it; built when first asked (see :meth:`parent`).
    _parents: dict[int, cst.CSTNode] | None = field(default=None, repr=False)

    # -- names ------------------------------------------------------------------
    def reaching(self, use: cst.Name) -> frozenset[Binding]:
        """The bindings that reach ``use`` (empty for a global, a builtin, or a node not in the body)."""
        return self.reaching_by_use.get(id(use), frozenset())

    def bindings_of(self, name: str) -> list[Binding]:
        """Every binding of ``name``, the parameter first, then in text order."""
        return self.bindings.get(name, [])

    def all_bindings(self) -> list[Binding]:
        """Every binding of the body, each once, in the order the walk first makes it: the
        parameters, then the text order (a loop body's bindings once; a ``try``'s handlers
        before its ``else``), whatever their names.  Code after a ``return`` or ``raise`` in
        the same block is not walked, so binds nothing."""
        return self.ordered

    def is_rebound(self, name: str) -> bool:
        """Whether the body gives ``name`` another value anywhere (narrowings do not count)."""
        return any(b.is_rebinding for b in self.bindings_of(name))

    def uses(self, binding: Binding) -> list[cst.Name]:
        """The uses that ``binding`` reaches (directly or through a narrowing of it)."""
        return self.uses_by_binding.get(binding, [])

    def unnarrowed(self, bindings: Iterable[Binding]) -> list[Binding]:
        """``bindings`` with each narrowing replaced by the bindings it narrows (the same
        value), in the order found; narrowings in a loop that narrow each other are
        followed once."""
        found: dict[Binding, None] = {}
        for binding in bindings:
            for each in _with_narrowed(binding):
                if each.how is not How.NARROWING:
                    found.setdefault(each, None)
        return list(found)

    def is_bound(self, name: str) -> bool:
        return name in self.bindings

    def escapes(self, name: str, *, in_nested_scopes: bool = True, setattr_stores: bool = False) -> bool:
        """Whether code out of sight may act on what ``name`` holds: the body uses the name
        other than as ``name.<attribute>`` (passes it to a call, stores, returns or aliases
        it), rebinds or deletes it, or a nested ``def``/``class``/``lambda`` uses it (that
        code may run anywhere).  With ``in_nested_scopes`` false, ``name.<attribute>`` and a
        parameter of that name inside a nested scope are not counted; with
        ``setattr_stores``, neither is ``setattr(name, "literal", value)``, which is
        ``name.literal = value`` (a flow to :attr:`Sink.CTX_ATTRIBUTE`)."""
        if self.is_rebound(name):
            return True
        for use in self.nested_uses.get(name, ()):
            if in_nested_scopes:
                return True
            parent = self.parent(use)
            if not (isinstance(parent, cst.Attribute) and parent.value is use) and not isinstance(parent, cst.Param):
                return True
        for binding in self.bindings_of(name):
            for use in self.uses(binding):
                parent = self.parent(use)
                if isinstance(parent, cst.Attribute) and parent.value is use:
                    continue
                if setattr_stores and self._setattr_owner(use):
                    continue
                return True
        return False

    def _setattr_owner(self, use: cst.Name) -> bool:
        """Whether ``use`` is the object of ``setattr(use, "literal", value)``."""
        arg = self.parent(use)
        call = self.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call) or not call.args or call.args[0] is not arg:
            return False
        name = dotted_name(call.func)
        return _setattr_literal(call, self.imports.resolve(name) if name else None) is not None

    # -- kinds ------------------------------------------------------------------
    def name_kind(self, use: cst.Name) -> Kind | None:
        """The kind of ``use``: the join over the bindings that reach it; None when the body
        does not bind the name."""
        reaching = self.reaching_by_use.get(id(use))
        if reaching is None:
            return Kind.UNKNOWN if use.value in self.bindings else None
        if not reaching:
            return Kind.UNKNOWN if use.value in self.bindings else None
        return join(b.kind for b in reaching)

    def kind(self, expr: cst.BaseExpression) -> Kind:
        """The kind of an expression of this body, where it is written."""
        return Classifier(self.imports, self.name_kind).kind(expr)

    def param_kind(self, name: str) -> Kind:
        """The kind of parameter ``name`` as the caller passes it."""
        binding = self.params.get(name)
        return binding.kind if binding is not None else Kind.UNKNOWN

    # -- values -----------------------------------------------------------------
    def origins(self, expr: cst.BaseExpression) -> frozenset[Binding]:
        """The bindings whose object ``expr`` is, or is a view of (``x``, ``x.view(-1)``,
        ``x.mul_(2)``); empty for any other expression."""
        return _origins(expr, self.reaching)

    def parameter_of(self, expr: cst.BaseExpression) -> str | None:
        """The parameter whose very object (or a view of it) ``expr`` certainly is."""
        origins = self.origins(expr)
        if len(origins) == 1:
            (binding,) = origins
            if binding.how is How.PARAMETER:
                return binding.name
        return None

    def calls_of(self, callee: str) -> list[cst.Call]:
        """The calls of ``callee`` (a dotted name as written: ``ctx.save_for_backward``)."""
        return [call for name, call in self.calls if name == callee]

    def flows_to(self, sink: Sink, detail: str | None = None) -> list[Flow]:
        return [f for f in self.flows if f.sink is sink and (detail is None or f.detail == detail)]

    def flows_of(self, binding: Binding) -> list[Flow]:
        """Where the object of ``binding`` goes."""
        return [f for f in self.flows if binding in f.origins]

    def writes_to(self, binding: Binding) -> list[InplaceWrite]:
        return [w for w in self.inplace_writes if binding in w.origins]

    def attribute_loads(self, owner: str, attributes: Iterable[str] | None = None) -> list[cst.Attribute]:
        """The loads of ``owner.<attribute>`` (of any attribute, or of one of ``attributes``),
        stores and ``del`` targets left out, in the order the body runs them (a
        comprehension's outermost iterable before its element); nested scopes are not
        part of the body."""
        wanted = None if attributes is None else frozenset(attributes)
        return [
            node
            for name, attribute, node in self.attribute_reads
            if name == owner and (wanted is None or attribute in wanted)
        ]

    def per_item(self, node: cst.CSTNode) -> bool:
        """Whether an attribute load runs once per item of a comprehension (in its element,
        conditions or inner iterables), so that one load in the text can run many times."""
        return id(node) in self.per_item_reads

    # -- the tree ---------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node directly enclosing ``node`` in this method (None for the ``def`` itself
        and for nodes that are not in it).  The map is built on the first call."""
        if self._parents is None:
            self._parents = traverse.parent_map(self.node)
        return self._parents.get(id(node))

    def ancestors(self, node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, cst.CSTNode]]:
        """``(ancestor, child)`` pairs from ``node`` outwards: each enclosing node, and its
        child that holds ``node`` (``node`` itself first)."""
        child = node
        parent = self.parent(child)
        while parent is not None:
            yield parent, child
            child, parent = parent, self.parent(parent)

    # -- dependencies and holders -------------------------------------------------
    def dependencies(self, expr: cst.CSTNode) -> tuple[Binding, ...]:
        """The bindings whose values ``expr`` reads, through the names it uses, in the order
        of those uses (names used only inside a nested ``lambda``/``def`` are left out)."""
        found: dict[Binding, None] = {}
        for node in traverse.walk(expr, scopes=False):
            if isinstance(node, cst.Name):
                for binding in self.reaching_by_use.get(id(node), ()):
                    found.setdefault(binding, None)
        return tuple(found)

    def holders(self, bindings: Iterable[Binding]) -> frozenset[Binding]:
        """The bindings that may hold the object of one of ``bindings``, or a container
        with it, somewhere in the body (not flow-sensitive: an over-approximation).

        A binding holds it when it is one of ``bindings`` or an origin of one, aliases a
        holder (a view, ``+=`` on a tensor, a narrowing), or takes its value from an
        expression that reads a holder (``y = f(x)``, ``y += x``, ``for y in xs``,
        ``a, b = pair``, ``with x as y``, ``(y := x)``); a name holds it when a method call
        on it takes an argument that reads a holder (``items.append(x)``) or a store
        into it does (``obj.attr = x``, ``items[0] = x``): every binding that reaches the
        name there.  Uses inside nested ``lambda``/``def`` bodies are not followed.
        """
        by_site: dict[int, list[Binding]] = {}
        aliased_by: dict[Binding, list[Binding]] = {}
        for every in self.bindings.values():
            for binding in every:
                by_site.setdefault(id(binding.site), []).append(binding)
                for alias in binding.aliases:
                    aliased_by.setdefault(alias, []).append(binding)
        found: set[Binding] = set()
        stack = list(bindings)
        while stack:
            binding = stack.pop()
            if binding in found:
                continue
            found.add(binding)
            stack.extend(binding.roots())
            stack.extend(aliased_by.get(binding, ()))
            for use in self.uses(binding):
                stack.extend(self._receivers(use, by_site))
        return frozenset(found)

    def _receivers(self, use: cst.Name, by_site: Mapping[int, list[Binding]]) -> Iterator[Binding]:
        """The bindings that may take the value read at ``use`` (see :meth:`holders`)."""
        for ancestor, child in self.ancestors(use):
            if isinstance(ancestor, (cst.Assign, cst.AnnAssign)) and child is ancestor.value:
                targets = [t.target for t in ancestor.targets] if isinstance(ancestor, cst.Assign) else [ancestor.target]
                for target in targets:
                    yield from self._target_bindings(target, ancestor, by_site)
            elif isinstance(ancestor, cst.AugAssign):
                yield from self._target_bindings(ancestor.target, ancestor, by_site)
            elif isinstance(ancestor, cst.NamedExpr) and child is ancestor.value:
                yield from by_site.get(id(ancestor), ())
            elif isinstance(ancestor, (cst.For, cst.CompFor)) and child is ancestor.iter:
                yield from by_site.get(id(ancestor), ())
            elif isinstance(ancestor, cst.WithItem) and child is ancestor.item:
                yield from by_site.get(id(ancestor), ())
            elif isinstance(ancestor, cst.Arg):
                call = self.parent(ancestor)
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
                    yield from self._store_root(call.func.value)
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.Lambda)):
                return

    def _target_bindings(
        self, target: cst.BaseExpression, site: cst.CSTNode, by_site: Mapping[int, list[Binding]]
    ) -> Iterator[Binding]:
        if isinstance(target, cst.Name):
            yield from (b for b in by_site.get(id(site), ()) if b.name == target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                yield from self._target_bindings(element.value, site, by_site)
        elif isinstance(target, cst.StarredElement):
            yield from self._target_bindings(target.value, site, by_site)
        elif isinstance(target, (cst.Attribute, cst.Subscript)):
            yield from self._store_root(target)

    def _store_root(self, expr: cst.BaseExpression) -> frozenset[Binding]:
        """The bindings reaching the name at the root of ``a.b[c].d``, where a value is stored."""
        while isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        return self.reaching(expr) if isinstance(expr, cst.Name) else frozenset()

    def attribute_of(self, expr: cst.BaseExpression) -> tuple[str, str] | None:
        """``(owner, attribute)`` when ``expr`` is ``owner.attribute``, or a local bound only
        to that (``buf = ctx.buf``), or a view of either."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and (
            expr.func.attr.value in ALIAS_METHODS or is_inplace_name(expr.func.attr.value)
        ):
            expr = expr.func.value
        if isinstance(expr, cst.Name):
            reaching = self.reaching(expr)
            if len(reaching) != 1:
                return None
            (binding,) = reaching
            if binding.value is None or binding.how is not How.ASSIGNMENT:
                return None
            expr = binding.value
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            return expr.value.value, expr.attr.value
        return None

    # -- where a tensor comes from, and how it is read ----------------------------
    def sources(self, expr: cst.BaseExpression) -> Sources:
        """The bindings whose tensor ``expr`` may be (or share the data of), through views
        (:data:`ALIAS_METHODS`, ``.T``), in-place methods, ``.detach()``, ``.data``, the arms
        of a conditional expression (``None`` arms hold nothing), narrowings and locals bound
        to such expressions."""
        same: set[Binding] = set()
        detached: set[Binding] = set()
        made = unknown = False
        through: set[str] = set()
        seen: set[tuple[int, bool]] = set()
        work: list[tuple[cst.BaseExpression | Binding, bool]] = [(expr, False)]
        while work:
            item, detach = work.pop()
            if (id(item), detach) in seen:
                continue
            seen.add((id(item), detach))
            if isinstance(item, Binding):
                binding = item
                if binding.how is How.NARROWING or (binding.aliases and binding.how is not How.PARAMETER):
                    if binding.how is not How.NARROWING and binding.value is not None:
                        _strip_sharing(binding.value, detach, through)  # the views it took
                    work.extend((alias, detach) for alias in binding.aliases)
                elif binding.how in (How.ASSIGNMENT, How.WALRUS) and binding.value is not None and _is_sharing_expr(
                    binding.value
                ):
                    work.append((binding.value, detach))
                else:
                    (detached if detach else same).add(binding)
                continue
            node, detach = _strip_sharing(item, detach, through)
            if isinstance(node, cst.IfExp):
                work.extend([(node.body, detach), (node.orelse, detach)])
            elif is_none(node):
                continue
            elif isinstance(node, cst.Name):
                reaching = self.reaching(node)
                if not reaching:
                    unknown = True
                work.extend((binding, detach) for binding in reaching)
            else:
                made = True
        return Sources(frozenset(same), frozenset(detached), made, unknown, frozenset(through))

    def is_param(self, expr: cst.BaseExpression, param: str) -> bool:
        """Whether ``expr`` is the name of parameter ``param``, rebound on no path reaching it."""
        if not isinstance(expr, cst.Name):
            return False
        reaching = self.unnarrowed(self.reaching(expr))
        return bool(reaching) and all(b.how is How.PARAMETER and b.name == param for b in reaching)

    def param_items(self, expr: cst.BaseExpression, param: str) -> tuple[int, int | None, bool] | None:
        """Which items of parameter ``param`` (a ``*args``) the value at ``expr`` holds:
        ``(start, stop or None for the end, whether one item)`` when it is ``param[i]``,
        ``param[a:b]`` (no step), ``tuple(param[a:b])`` or ``list(param[a:b])``, with
        non-negative integer literals, or a local every reaching binding of which is one
        same such value; None otherwise (a computed bound, a rebound ``param``)."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("tuple", "list"):
            if len(expr.args) != 1 or expr.args[0].keyword is not None or expr.args[0].star:
                return None
            found = self.param_items(expr.args[0].value, param)
            return None if found is None or found[2] else found
        if isinstance(expr, cst.Name):
            reaching = self.unnarrowed(self.reaching(expr))
            values = {
                self._param_subscript(b.value, param) if b.how is How.ASSIGNMENT and b.value is not None else None
                for b in reaching
            }
            return values.pop() if reaching and len(values) == 1 else None
        return self._param_subscript(expr, param)

    def _param_subscript(self, expr: cst.BaseExpression, param: str) -> tuple[int, int | None, bool] | None:
        """``param[i]`` or ``param[a:b]`` (no step) with non-negative integer literals."""
        if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1 or not self.is_param(expr.value, param):
            return None
        part = expr.slice[0].slice
        if isinstance(part, cst.Index):
            if not isinstance(part.value, cst.Integer):
                return None
            index = int(part.value.value)
            return index, index + 1, True
        if not isinstance(part, cst.Slice) or part.step is not None:
            return None
        bounds: list[int | None] = []
        for bound in (part.lower, part.upper):
            if bound is not None and not isinstance(bound, cst.Integer):
                return None
            bounds.append(None if bound is None else int(bound.value))
        return bounds[0] or 0, bounds[1], False

    def unpacked(self, binding: Binding) -> tuple[cst.BaseExpression, int] | None:
        """``(value, index)`` when ``binding`` is the ``index``-th name of a flat tuple or list
        target without a starred element (``a, b = value``), assigned a value that is not a
        matching literal; None otherwise."""
        site = binding.site
        if binding.how is not How.UNPACKING or not isinstance(site, cst.Assign):
            return None
        for target in site.targets:
            target_node = target.target
            if not isinstance(target_node, (cst.Tuple, cst.List)):
                continue
            if any(isinstance(e, cst.StarredElement) for e in target_node.elements):
                continue
            for index, element in enumerate(target_node.elements):
                if isinstance(element.value, cst.Name) and element.value.value == binding.name:
                    return site.value, index
        return None

    def unpackings(self) -> list[Unpacking]:
        """Every ``a, b = value`` of the body (each tuple or list target of an assignment that
        binds a name by unpacking), in the order the walk first reaches them; code after a
        ``return`` or ``raise`` in the same block is not walked."""
        found: dict[tuple[int, int], Unpacking] = {}
        for binding in self.ordered:
            site = binding.site
            if binding.how is not How.UNPACKING or not isinstance(site, cst.Assign):
                continue
            for target in site.targets:
                if isinstance(target.target, (cst.Tuple, cst.List)):
                    found.setdefault((id(site), id(target)), Unpacking(site, target.target, site.value))
        return list(found.values())

    def unpacking_of(self, binding: Binding) -> Unpacking | None:
        """The ``a, b = value`` that makes ``binding`` (its first tuple or list target), if any."""
        site = binding.site
        if binding.how is not How.UNPACKING or not isinstance(site, cst.Assign):
            return None
        for target in site.targets:
            if isinstance(target.target, (cst.Tuple, cst.List)):
                return Unpacking(site, target.target, site.value)
        return None

    def only_assignment(self, use: cst.Name) -> Binding | None:
        """The one binding (narrowings aside) that reaches ``use``, when it is a plain assignment.

        None for a name declared ``global`` or ``nonlocal``: any call may rebind it."""
        if any(b.how is How.GLOBAL for b in self.bindings_of(use.value)):
            return None
        reaching = [b for b in self.reaching(use) if b.how is not How.NARROWING]
        if len(reaching) == 1 and reaching[0].how is How.ASSIGNMENT:
            return reaching[0]
        return None

    def return_of(self, node: cst.Return) -> ReturnValue | None:
        """The model of the ``return`` statement ``node``."""
        return next((ret for ret in self.returns if ret.node is node), None)

    def return_positions(self, ret: ReturnValue) -> tuple[tuple[cst.BaseExpression | None, ...], bool] | None:
        """What ``ret`` gives at each position: ``(elements, complete)``.

        A tuple literal (or a name only it reaches) gives its elements, with ``*[None] * k``
        padding as ``None`` entries; ``complete`` is false when a starred element of another
        shape cuts the list short (the positions after it are unknown).  A single value
        that is certainly a tensor or ``None`` gives one element.  None for any other shape
        (``return grads``, ``return helper(g)``, a bare ``return``), which may be a tuple."""
        if ret.elements is not None:
            return ret.elements, True
        value = ret.value
        if value is None:
            return None
        if isinstance(value, cst.Tuple):
            found: list[cst.BaseExpression | None] = []
            for element in value.elements:
                if isinstance(element, cst.StarredElement):
                    count = none_padding(element.value)
                    if count is None:
                        return tuple(found), False
                    found.extend([None] * count)
                else:
                    found.append(element.value)
            return tuple(found), True
        kind = self.kind(value)
        if kind.is_tensor or kind is Kind.NONE:
            return (value,), True
        return None

    def reads_data(self, node: cst.BaseExpression, element: int | None = None) -> bool:
        """Whether the body reads the data of the value at ``node`` (an expression of the
        body), not only its metadata: ``.shape``/``.dtype``/``.device`` and the like
        (:data:`METADATA_ATTRIBUTES`, :data:`METADATA_METHODS`), ``torch.zeros_like(v)``
        and the like, ``v is None``, ``isinstance(v, ...)``, ``len(v)``.  Views, ``.detach()``
        and locals bound to the value are followed to their own uses.

        ``element``: the value is a container and only its ``element``-th item matters;
        ``v[i]`` with another integer ``i`` and the other names of ``a, b = v`` are
        skipped.  Anything else that uses the value (a call argument, arithmetic, a
        return, a nested scope) reads its data."""
        seen: set[int] = set()
        work: list[tuple[cst.BaseExpression, int | None]] = [(node, element)]
        while work:
            current, item = work.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            parent = self.parent(current)
            if isinstance(parent, cst.Attribute) and parent.value is current:
                attribute = parent.attr.value
                if attribute in METADATA_ATTRIBUTES and item is None:
                    continue
                call = self.parent(parent)
                is_call = isinstance(call, cst.Call) and call.func is parent
                if is_call and attribute in METADATA_METHODS and item is None:
                    continue
                if item is None and (
                    (is_call and (attribute in ALIAS_METHODS or attribute in ("detach", "contiguous")))
                    or (not is_call and attribute in VIEW_ATTRIBUTES | {"data"})
                ):
                    work.append((call if is_call else parent, None))  # type: ignore[arg-type]
                    continue
                return True
            if isinstance(parent, cst.Subscript) and parent.value is current:
                index = _integer_index(parent)
                if item is not None and index is not None:
                    if index == item:
                        work.append((parent, None))
                    continue
                if item is not None:
                    work.append((parent, None))  # some item, maybe this one
                    continue
                return True
            if isinstance(parent, cst.Comparison) and _is_none_test(parent, current):
                continue
            if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
                call = self.parent(parent)
                if isinstance(call, cst.Call) and call.args and call.args[0] is parent:
                    name = dotted_name(call.func)
                    qualified = self.imports.resolve(name) if name else None
                    if qualified in LIKE_FUNCTIONS and item is None:
                        continue
                    if name in ("isinstance", "len", "type"):
                        continue
                return True
            if isinstance(parent, cst.IfExp) and parent.test is not current:
                work.append((parent, item))
                continue
            if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is current:
                targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
                for target in targets:
                    if isinstance(target, cst.Name):
                        for binding in self.bindings_of(target.value):
                            if binding.site is parent:
                                work.extend((use, item) for use in self.uses(binding))
                    elif isinstance(target, (cst.Tuple, cst.List)) and not any(
                        isinstance(e, cst.StarredElement) for e in target.elements
                    ):
                        for index, element_node in enumerate(target.elements):
                            if item is not None and index != item:
                                continue
                            if not isinstance(element_node.value, cst.Name):
                                return True
                            for binding in self.bindings_of(element_node.value.value):
                                if binding.site is parent:
                                    work.extend((use, None) for use in self.uses(binding))
                    else:
                        return True
                continue
            return True
        return False


@dataclass(frozen=True)
class Sources:
    """Where the tensor an expression gives comes from (see :meth:`MethodModel.sources`).

    A source is a binding that does not itself take its value from another binding's
    tensor: a parameter, or a binding to a computed value (``y = torch.exp(x)``), an
    unpacked element, a loop variable...
    """

    same: frozenset[Binding]  # the value may be the source's very object, or a view of it
    detached: frozenset[Binding]  # it may share the source's data as another object (``.detach()``, ``.data``)
    made: bool  # on some path the expression computes the value itself (a call, arithmetic)
    unknown: bool  # on some path it reads a name the body does not bind (a global)
    # The view methods and attributes (``view``, ``reshape``, ``T``...) some path goes through.
    through: frozenset[str] = frozenset()

    @property
    def bindings(self) -> frozenset[Binding]:
        return self.same | self.detached


class BindingFacts:
    """Facts that a rule computes per binding of one body, in walk order, to a fixed point.

    A binding's facts come from its value expression, through the facts of the bindings
    that reach the names it reads (:meth:`reaching`).  The guard against cycles through
    loops: a binding not computed yet (one a loop body makes after the use it reaches, at
    the loop's top) reads as having none.  When the first round read such a binding,
    rounds repeat until one changes nothing, so ``compute`` must only ever add facts (a
    fact once found is kept), and the rounds end.  Straight-line code takes one round.
    """

    def __init__(self, model: MethodModel) -> None:
        self.model = model
        self.rank = {b: i for i, b in enumerate(model.all_bindings())}
        self.done: set[Binding] = set(self.rank)
        self.ahead = False  # whether a binding not computed yet was read
        self.rounds = 0

    def reaching(self, use: cst.Name) -> list[Binding]:
        """The bindings whose value ``use`` reads (narrowings followed), in walk order."""
        found = self.model.unnarrowed(self.model.reaching(use))
        if len(found) > 1:
            found.sort(key=self.rank.__getitem__)
        if not self.ahead and any(b not in self.done for b in found):
            self.ahead = True
        return found

    def solve(self, computed: Sequence[Binding], compute: Callable[[Binding], bool]) -> None:
        """Runs ``compute`` (true when it found a new fact) over ``computed``, in walk order,
        reading facts at uses through :meth:`reaching`; any other binding has its facts
        from the start."""
        self.done.difference_update(computed)
        for binding in computed:
            compute(binding)
            self.done.add(binding)
        self.rounds = 1
        if self.ahead:
            while True:
                self.rounds += 1
                if not any([compute(b) for b in computed]):  # a list: every binding, each round
                    break


# Methods whose result shares its receiver's storage (beyond ALIAS_METHODS): an in-place
# write to the result writes the receiver.  `detach` shares storage (and the version
# counter); `.data` is left out: writes through it are the deliberate, untracked way
# (weight clipping, optimizers).
_STORAGE_METHODS = ALIAS_METHODS | frozenset(
    "detach view_as permute narrow select expand_as unflatten movedim swapaxes swapdims diagonal unfold "
    "as_strided real imag".split()
)


def _setattr_literal(node: cst.Call, qualified: str | None) -> str | None:
    """The attribute of ``setattr(name, "attribute", value)``, spelt as a string literal."""
    if qualified not in ("setattr", "builtins.setattr") or len(node.args) != 3:
        return None
    if any(arg.keyword is not None or arg.star for arg in node.args):
        return None
    owner, attribute = node.args[0].value, node.args[1].value
    if not isinstance(owner, cst.Name) or not isinstance(attribute, cst.SimpleString):
        return None
    value = attribute.evaluated_value
    return value if isinstance(value, str) and value.isidentifier() else None


def _storage_of(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, str | None]:
    """The expression whose storage a write to ``expr`` writes, and the first step that
    was seen through (None when ``expr`` is written as it is)."""
    through = None
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and (
            expr.func.attr.value in _STORAGE_METHODS or is_inplace_name(expr.func.attr.value)
        ):
            step = f".{expr.func.attr.value}()"
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value in VIEW_ATTRIBUTES:
            step = f".{expr.attr.value}"
            expr = expr.value
        elif isinstance(expr, cst.Subscript) and _is_basic_subscript(expr):
            step = "[...]"
            expr = expr.value
        else:
            return expr, through
        through = through or step


def written_bindings(
    target: cst.BaseExpression, reaching: Callable[[cst.Name], frozenset[Binding]]
) -> tuple[frozenset[Binding], str | None]:
    """The bindings whose object an in-place write to ``target`` writes, and the first
    step seen through to reach their storage (``.detach()``, ``[...]``; None when
    ``target`` is one of them or a view :func:`_origins` follows)."""
    origins = _origins(target, reaching)
    if origins:
        return _through_shared_locals(origins, reaching)
    written, through = _storage_of(target)
    origins = _origins(written, reaching) if through is not None else frozenset()
    return origins, through if origins else None


def _through_shared_locals(
    origins: frozenset[Binding], reaching: Callable[[cst.Name], frozenset[Binding]]
) -> tuple[frozenset[Binding], str | None]:
    """``origins`` with each local bound to ``.detach()`` of a name (``y = x.detach()``)
    replaced by that name's own origins, and that step; ``origins`` as they are when there
    is none.  Only that step: a local bound to an item (``grad = grads[0]``) is a value of
    its own to the rules that ask which input or gradient a write reaches, and ``.data`` is
    the deliberate way past autograd's version checks (torchdiffeq's
    ``scratch.data[index] = value  # sneak past the version checker``), as when written
    directly."""
    found: set[Binding] = set()
    through = None
    for binding in origins:
        value = binding.value if binding.how is How.ASSIGNMENT else None
        written, step = _storage_of(value) if value is not None else (None, None)
        sharing = step == ".detach()" and isinstance(written, cst.Name)
        shared = _origins(written, reaching) if sharing else frozenset()
        if shared:
            found |= shared
            through = through or step
        else:
            found.add(binding)
    return frozenset(found), through


def _is_basic_subscript(node: cst.Subscript) -> bool:
    """``x[...]`` with slices, integer literals, ``None`` and ``...`` only: a view of ``x``."""
    for element in node.slice:
        piece = element.slice
        if isinstance(piece, cst.Slice):
            continue
        value = piece.value
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
            value = value.expression
        if isinstance(value, (cst.Integer, cst.Ellipsis)) or (isinstance(value, cst.Name) and value.value == "None"):
            continue
        return False
    return True


def _origins(expr: cst.BaseExpression, reaching: Callable[[cst.Name], frozenset[Binding]]) -> frozenset[Binding]:
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method = expr.func.attr.value
        if method not in ALIAS_METHODS and not is_inplace_name(method):
            return frozenset()
        expr = expr.func.value
    if isinstance(expr, cst.Name):
        found: set[Binding] = set()
        for binding in reaching(expr):
            found |= binding.roots()
        return frozenset(found)
    return frozenset()


def is_inplace_name(name: str) -> bool:
    """Whether a method or torch function of this name writes its tensor in place (``mul_``)."""
    return name.endswith("_") and not name.startswith("_") and name not in HARMLESS_INPLACE


def target_names(target: cst.BaseExpression) -> Iterator[str]:
    """The names a binding target binds: ``a``, ``a, (b, *c)``, ``[a, b]``."""
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value)


def build(
    node: cst.FunctionDef,
    imports: ImportMap,
    *,
    skip: int = 0,
    declared: Mapping[str, Kind] | None = None,
    tensor_params: Iterable[str] = (),
) -> MethodModel:
    """The semantic model of ``node``'s body.

    ``skip`` leading positional parameters (``cls`` of a classmethod) are not
    walked as values.  ``declared`` gives kinds the caller knows (gradient
    parameters of backward are tensors); ``tensor_params`` names parameters that
    other methods show to be tensors (backward gives them a gradient).
    """
    known = dict(declared or {})
    given = set(tensor_params)
    first = _Walker(node, imports, skip, known, evidence=given)
    model = first.run()
    found = _evidence(model, first.marks, Kind.UNKNOWN)
    # A parameter annotated `float` that the body hands to torch.sigmoid is not known
    # to be a non-tensor after all: the body outranks the annotation.
    contradicted = _evidence(model, first.marks - first.api_marks, Kind.NON_TENSOR) - {
        p.name.value for p in _param_nodes(node) if p.star
    }
    if not found and not contradicted:
        return model
    return _Walker(node, imports, skip, known, given | found, contradicted).run()


def _evidence(model: MethodModel, marks: set[int], kind: Kind) -> set[str]:
    """Parameters of ``kind`` that the body uses as tensors (``marks``: ids of such uses),
    on a path where no rebinding of the parameter reaches the use."""
    found: set[str] = set()
    for name, binding in model.params.items():
        if binding.kind is not kind:
            continue
        for use in model.uses(binding):
            reaching = model.reaching(use)
            if id(use) in marks and reaching and all(b.roots() == {binding} for b in reaching):
                found.add(name)
                break
    return found


def _param_nodes(node: cst.FunctionDef) -> list[cst.Param]:
    params = node.params
    every = [*params.posonly_params, *params.params]
    if isinstance(params.star_arg, cst.Param):
        every.append(params.star_arg)
    every.extend(params.kwonly_params)
    if params.star_kwarg is not None:
        every.append(params.star_kwarg)
    return every


def _declared_kind(param: cst.Param, imports: ImportMap) -> Kind:
    if param.star:
        return Kind.NON_TENSOR  # *args is a tuple, **kwargs a dict
    if param.annotation is not None:
        # The annotation decides (`n: int | Tensor = 0` is a union, whatever the default).
        kind = annotation_kind(param.annotation.annotation, imports)
        if kind is not Kind.UNKNOWN and param.default is not None and is_none(param.default):
            return join((kind, Kind.NONE))
        return kind
    if param.default is not None:
        if is_none(param.default):
            return Kind.UNKNOWN
        if is_literal(param.default) or isinstance(param.default, (cst.Tuple, cst.List, cst.Dict)):
            return Kind.NON_TENSOR
    return Kind.UNKNOWN


class _Walker:
    """Walks one method body once, building its :class:`MethodModel`."""

    def __init__(
        self,
        node: cst.FunctionDef,
        imports: ImportMap,
        skip: int,
        declared: Mapping[str, Kind],
        evidence: set[str],
        contradicted: set[str] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        self.model = MethodModel(node, imports)
        self.imports = imports
        self.skip = skip
        self.declared = declared
        self.evidence = evidence
        self.contradicted = contradicted
        self.api_marks: set[int] = set()
        self.marks: set[int] = set()
        self.loop_exits: list[list[_Env]] = []
        self.order: list[Binding] = []  # every binding made by the walk, in walk order
        self.false_sites: dict[int, cst.CSTNode] = {}
        self.read_ids: set[int] = set()
        self.call_ids: set[int] = set()
        self.made: dict[tuple[int, str, How], Binding] = {}  # (site, name, how) -> its binding
        self.classifier = Classifier(imports, self.model.name_kind)

    # -- entry ------------------------------------------------------------------
    def run(self) -> MethodModel:
        env: _Env = {}
        positional_seen = 0
        for param in _param_nodes(self.model.node):
            name = param.name.value
            if not param.star:
                positional_seen += 1
            kind = self.declared.get(name) or _declared_kind(param, self.imports)
            # An annotation naming some other class rules usage evidence out.
            if kind is Kind.UNKNOWN and param.annotation is None and name in self.evidence:
                kind = Kind.TENSOR
            if name in self.contradicted:
                kind = Kind.UNKNOWN
            if positional_seen <= self.skip and not param.star:
                kind = Kind.NON_TENSOR  # cls of a classmethod
            binding = Binding(name, How.PARAMETER, param, None, kind)
            self.model.params[name] = binding
            self.model.bindings.setdefault(name, []).append(binding)
            self.model.ordered.append(binding)
            env[name] = frozenset({binding})
            if param.default is not None:
                self._expr(param.default, {})
        self._block(_suite(self.model.node.body), env)
        self._counted_tuples()
        return self.model

    def _counted_tuples(self) -> None:
        """Give the elements of returned tuples that no literal spells (once every use of
        a built list is known)."""
        for index, ret in enumerate(self.model.returns):
            if ret.elements is None and ret.value is not None:
                positions = sequences.tuple_positions(self.model, ret.node)
                if positions is not None:
                    self.model.returns[index] = ReturnValue(ret.node, ret.value, sequences.representatives(positions))

    # -- bindings ---------------------------------------------------------------
    def _bind(
        self,
        env: _Env,
        name: str,
        how: How,
        site: cst.CSTNode,
        value: cst.BaseExpression | None = None,
        kind: Kind = Kind.UNKNOWN,
        aliases: tuple[Binding, ...] = (),
    ) -> Binding:
        key = (id(site), name, how)
        binding = self.made.get(key)
        if binding is None:
            binding = self.made[key] = Binding(name, how, site, value, kind, aliases)
            self.model.bindings.setdefault(name, []).append(binding)
            self.model.ordered.append(binding)
        else:  # a loop body walked again: the same site, reached by more bindings now
            binding.kind = join((binding.kind, kind))
            binding.aliases = tuple(dict.fromkeys((*binding.aliases, *aliases)))
        self.order.append(binding)
        env[name] = frozenset({binding})
        return binding

    def _bind_value(self, env: _Env, target: cst.BaseExpression, value: cst.BaseExpression | None,
                    site: cst.CSTNode, how: How = How.ASSIGNMENT, kind: Kind | None = None) -> None:
        """Binds ``target`` (a name, a tuple of targets, an attribute or subscript) to ``value``."""
        if isinstance(target, cst.Name):
            if value is None:
                self._bind(env, target.value, how if how is not How.ASSIGNMENT else How.UNPACKING, site,
                           None, kind or Kind.UNKNOWN)
                return
            found = kind or self.classifier.kind(value)
            aliases = tuple(self._value_origins(value))
            self._bind(env, target.value, how, site, value, found, aliases)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            starred = any(isinstance(e, cst.StarredElement) for e in target.elements)
            values: Sequence[cst.BaseExpression | None]
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and not starred
                and len(value.elements) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in value.elements)
            ):
                values = [e.value for e in value.elements]
                for element, element_value in zip(elements, values):
                    self._bind_value(env, element, element_value, site, how)
                return
            element_kind = Kind.TENSOR if value is not None and self._is_saved_tensors(value) else Kind.UNKNOWN
            for element in target.elements:
                if isinstance(element, cst.StarredElement):
                    for name in target_names(element.value):
                        self._bind(env, name, How.UNPACKING, site, None, Kind.NON_TENSOR)
                else:
                    self._bind_value(env, element.value, None, site,
                                     How.UNPACKING if how is How.ASSIGNMENT else how, element_kind)
        elif isinstance(target, cst.StarredElement):
            for name in target_names(target.value):
                self._bind(env, name, How.UNPACKING, site, None, Kind.NON_TENSOR)
        elif isinstance(target, cst.Subscript):
            self._expr(target, env)
            self._inplace(target.value, site, "[...] =", env)
        elif isinstance(target, cst.Attribute):
            self._expr(target.value, env)
            if isinstance(target.value, cst.Name) and value is not None:
                self._flow(Sink.CTX_ATTRIBUTE, site, value, target.attr.value, owner=target.value.value)

    def _value_origins(self, value: cst.BaseExpression) -> set[Binding]:
        return set(_origins(value, self.model.reaching)) if _is_alias_expr(value) else set()

    @staticmethod
    def _is_saved_tensors(value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.Attribute) and value.attr.value in SAVED_ATTRIBUTES

    # -- statements -------------------------------------------------------------
    def _block(self, statements: Sequence[cst.BaseStatement], env: _Env | None) -> _Env | None:
        for statement in statements:
            if env is None:
                return None
            env = self._statement(statement, env)
        return env

    def _statement(self, statement: cst.BaseStatement, env: _Env) -> _Env | None:
        if isinstance(statement, cst.SimpleStatementLine):
            current: _Env | None = env
            for small in statement.body:
                if current is None:
                    return None
                current = self._small(small, current)
            return current
        if isinstance(statement, cst.If):
            self._expr(statement.test, env)
            when_true, when_false = self._narrow(statement.test, env)
            after_body = self._block(_suite(statement.body), when_true)
            if statement.orelse is None:
                after_else: _Env | None = when_false
            elif isinstance(statement.orelse, cst.If):
                after_else = self._statement(statement.orelse, when_false)
            else:
                after_else = self._block(_suite(statement.orelse.body), when_false)
            return _join(after_body, after_else)
        if isinstance(statement, (cst.For, cst.While)):
            return self._loop(statement, env)
        if isinstance(statement, cst.With):
            for item in statement.items:
                self._expr(item.item, env)
                if item.asname is not None:
                    self._bind_value(env, item.asname.name, None, item, How.WITH)
            return self._block(_suite(statement.body), env)
        if isinstance(statement, (cst.Try, cst.TryStar)):
            return self._try(statement, env)
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            for decorator in statement.decorators:
                self._expr(decorator.decorator, env)
            self._nested(statement, env)
            self._bind(env, statement.name.value, How.DEFINITION, statement, None, Kind.NON_TENSOR)
            return env
        if isinstance(statement, cst.Match):
            self._expr(statement.subject, env)
            ends: list[_Env | None] = [dict(env)]
            for case in statement.cases:
                branch = dict(env)
                traverse.visit(case.pattern, _PatternNames(self, branch, case))
                if case.guard is not None:
                    self._expr(case.guard, branch)
                ends.append(self._block(_suite(case.body), branch))
            return _join(*ends)
        self._expr(statement, env)
        return env

    def _small(self, small: cst.BaseSmallStatement, env: _Env) -> _Env | None:
        if isinstance(small, cst.Assign):
            self._expr(small.value, env)
            for target in small.targets:
                self._bind_value(env, target.target, small.value, small)
            return env
        if isinstance(small, cst.AnnAssign):
            if small.value is None:
                return env
            self._expr(small.value, env)
            kind = self.classifier.kind(small.value)
            if kind is Kind.UNKNOWN:
                kind = annotation_kind(small.annotation.annotation, self.imports)
            self._bind_value(env, small.target, small.value, small, How.ASSIGNMENT, kind)
            return env
        if isinstance(small, cst.AugAssign):
            return self._augmented(small, env)
        if isinstance(small, cst.Del):
            for name in target_names(small.target):
                self._bind(env, name, How.DELETE, small)
            for element in _del_targets(small.target):
                if isinstance(element, cst.Attribute):
                    self._expr(element.value, env)
                elif not isinstance(element, cst.Name):
                    self._expr(element, env)
                if isinstance(element, cst.Attribute) and isinstance(element.value, cst.Name):
                    self.model.deleted_attributes.append((element.value.value, element.attr.value, small))
            return env
        if isinstance(small, cst.Return):
            if small.value is not None:
                self._expr(small.value, env)
            self._return(small)
            return None
        if isinstance(small, cst.Raise):
            if small.exc is not None:
                self._expr(small.exc, env)
            return None
        if isinstance(small, (cst.Break, cst.Continue)):
            if self.loop_exits and isinstance(small, cst.Break):
                self.loop_exits[-1].append(dict(env))
            return None
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            names = small.names if not isinstance(small.names, cst.ImportStar) else ()
            for alias in names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                while isinstance(bound, cst.Attribute):
                    bound = bound.value
                if isinstance(bound, cst.Name):
                    self._bind(env, bound.value, How.IMPORT, small)
            return env
        if isinstance(small, (cst.Global, cst.Nonlocal)):
            for item in small.names:
                self._bind(env, item.name.value, How.GLOBAL, small)
            return env
        if isinstance(small, cst.Assert):
            self._expr(small.test, env)
            return self._narrow(small.test, env)[0]
        self._expr(small, env)
        return env

    def _augmented(self, small: cst.AugAssign, env: _Env) -> _Env:
        self._expr(small.value, env)
        target = small.target
        operator = small.operator.__class__.__name__
        if isinstance(target, cst.Name):
            self._expr(target, env)
            before = self.classifier.kind(target)
            if before.is_tensor:
                reaching = self.model.reaching(target)
                self._inplace(target, small, operator, env)
                self._bind(env, target.value, How.AUGMENTED, small, None, before, tuple(reaching))
            else:
                combined = Classifier._combine(before, self.classifier.kind(small.value), small.operator)  # noqa: SLF001
                self._bind(env, target.value, How.AUGMENTED, small, None, combined)
        elif isinstance(target, cst.Subscript):
            self._expr(target, env)
            self._inplace(target.value, small, "[...] op=", env)
        else:
            self._expr(target, env)
        return env

    def _loop(self, statement: cst.For | cst.While, env: _Env) -> _Env | None:
        self.loop_exits.append([])
        if isinstance(statement, cst.For):
            self._expr(statement.iter, env)
        state: _Env = dict(env)
        for _ in range(2):  # twice: what the end of the body binds reaches its top
            body_env = dict(state)
            if isinstance(statement, cst.For):
                iter_kind = self.classifier.kind(statement.iter)
                kind = Kind.TENSOR if iter_kind.is_tensor else Kind.UNKNOWN
                if isinstance(statement.iter, cst.Call) and dotted_name(statement.iter.func) == "range":
                    kind = Kind.NON_TENSOR
                self._bind_value(body_env, statement.target, None, statement, How.FOR, kind)
                after = self._block(_suite(statement.body), body_env)
            else:
                self._expr(statement.test, body_env)
                after = self._block(_suite(statement.body), self._narrow(statement.test, body_env)[0])
            # `continue` goes back to the top, whose state this join already covers.
            joined = _join(state, after)
            state = joined if joined is not None else state
        exits = self.loop_exits.pop()
        is_forever = isinstance(statement, cst.While) and isinstance(statement.test, cst.Name) and (
            statement.test.value == "True"
        )
        normal: _Env | None = None if is_forever else state
        if statement.orelse is not None and normal is not None:
            normal = self._block(_suite(statement.orelse.body), normal)
        return _join(normal, *exits)

    def _try(self, statement: cst.Try | cst.TryStar, env: _Env) -> _Env | None:
        entry = dict(env)
        first = len(self.order)
        after_body = self._block(_suite(statement.body), dict(env))
        # A handler may start anywhere in the body: what the body binds may or may not have run.
        partial = dict(entry)
        for binding in self.order[first:]:
            partial[binding.name] = partial.get(binding.name, frozenset()) | {binding}
        handler_entry = _join(entry, after_body, partial) or entry
        # The handlers are walked before `else`, in text order (what is recorded follows the text).
        ends: list[_Env | None] = []
        for handler in statement.handlers:
            # `except*` handlers run one after another on parts of one exception group:
            # each may start where an earlier one ended.
            starts = (handler_entry, *ends) if isinstance(statement, cst.TryStar) else (handler_entry,)
            branch = dict(_join(*starts) or handler_entry)
            if handler.type is not None:
                self._expr(handler.type, branch)
            if handler.name is not None:
                self._bind_value(branch, handler.name.name, None, handler, How.EXCEPT, Kind.NON_TENSOR)
            ends.append(self._block(_suite(handler.body), branch))
        if statement.orelse is not None and after_body is not None:
            ends.append(self._block(_suite(statement.orelse.body), after_body))
        else:
            ends.append(after_body)
        result = _join(*ends)
        if statement.finalbody is not None:
            # `finally` runs after every path (some of which leave); walked once over all of them.
            final = self._block(_suite(statement.finalbody.body), _join(result, handler_entry) or handler_entry)
            return None if result is None or final is None else final
        return result

    # -- narrowing --------------------------------------------------------------
    def _narrow(self, test: cst.BaseExpression, env: _Env) -> tuple[_Env, _Env]:
        """The states where ``test`` is true and where it is false."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            when_true, when_false = self._narrow(test.expression, env)
            return when_false, when_true
        if isinstance(test, cst.BooleanOperation):
            left_true, left_false = self._narrow(test.left, env)
            if isinstance(test.operator, cst.And):
                right_true, right_false = self._narrow(test.right, left_true)
                return right_true, _join(left_false, right_false) or dict(env)
            right_true, right_false = self._narrow(test.right, left_false)
            return _join(left_true, right_true) or dict(env), right_false
        when_true, when_false = dict(env), dict(env)
        narrowed = self._test_narrowing(test)
        if narrowed is not None:
            name_node, true_kind, false_kind = narrowed
            for state, kind in ((when_true, true_kind), (when_false, false_kind)):
                reaching = state.get(name_node.value)
                if not reaching or kind is None:
                    continue
                current = join(b.kind for b in reaching)
                new_kind = kind(current)
                if new_kind is not current:
                    # The true and false branches narrow at one test: tell them apart by the state.
                    self._bind(state, name_node.value, How.NARROWING, test if state is when_true else
                               self._false_site(test), None, new_kind, tuple(reaching))
        return when_true, when_false

    def _test_narrowing(self, test: cst.BaseExpression):  # type: ignore[no-untyped-def]
        """(name, kind in the true branch, kind in the false branch) for ``isinstance`` and
        ``is None`` tests of a local name; each kind is a function of the kind before."""
        if isinstance(test, cst.Call) and dotted_name(test.func) == "isinstance" and len(test.args) == 2:
            subject = test.args[0].value
            if not isinstance(subject, cst.Name):
                return None
            types = test.args[1].value
            members = [e.value for e in types.elements] if isinstance(types, cst.Tuple) else [types]
            kinds = {annotation_kind(m, self.imports) for m in members}
            if kinds == {Kind.NON_TENSOR} or kinds == {Kind.NON_TENSOR, Kind.NONE}:
                return subject, lambda k: Kind.NON_TENSOR, _unchanged
            if kinds <= {Kind.TENSOR, Kind.INDEX_TENSOR}:
                return subject, _a_tensor, _not_tensor
            return None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
            comparison = test.comparisons[0]
            if is_none(comparison.comparator):
                if isinstance(comparison.operator, cst.Is):
                    return test.left, lambda k: Kind.NONE, without_none
                if isinstance(comparison.operator, cst.IsNot):
                    return test.left, without_none, lambda k: Kind.NONE
        return None

    def _false_site(self, test: cst.BaseExpression) -> cst.CSTNode:
        """A stand-in site for the narrowing on the false side of ``test`` (one per test)."""
        site = self.false_sites.get(id(test))
        if site is None:
            site = self.false_sites[id(test)] = cst.Else(body=cst.IndentedBlock(body=()))
        return site

    # -- expressions ------------------------------------------------------------
    def _expr(self, node: cst.CSTNode, env: _Env) -> None:
        traverse.visit(node, _Uses(self, env))

    def _use(self, node: cst.Name, env: _Env) -> None:
        reaching = env.get(node.value)
        if reaching is None:
            return
        key = id(node)
        previous = self.model.reaching_by_use.get(key)
        combined = reaching if previous is None else previous | reaching
        self.model.reaching_by_use[key] = combined
        for binding in reaching:
            for found in _with_narrowed(binding):
                uses = self.model.uses_by_binding.setdefault(found, [])
                if not any(use is node for use in uses):
                    uses.append(node)

    def _nested(self, node: cst.CSTNode, env: _Env) -> None:
        """Records the uses of this method's names inside a nested scope."""
        model = self.model

        class _Names(cst.CSTVisitor):
            def visit_Name(self, name: cst.Name) -> None:
                if name.value in env:
                    model.nested_uses.setdefault(name.value, []).append(name)

        traverse.visit(node, _Names())

    def _return(self, node: cst.Return) -> None:
        value = node.value
        elements: tuple[cst.BaseExpression, ...] | None = None
        literal = value
        if isinstance(value, cst.Name):
            reaching = self.model.reaching(value)
            if len(reaching) == 1:
                (binding,) = reaching
                if isinstance(binding.value, cst.Tuple):
                    literal = binding.value
        if isinstance(literal, cst.Tuple) and not any(isinstance(e, cst.StarredElement) for e in literal.elements):
            elements = tuple(e.value for e in literal.elements)
        self.model.returns.append(ReturnValue(node, value, elements))
        if value is None:
            return
        if elements is not None:
            for index, element in enumerate(elements):
                self._flow(Sink.RETURN, node, element, index=index)
        else:
            self._flow(Sink.RETURN, node, value)

    def _flow(self, sink: Sink, node: cst.CSTNode, expr: cst.BaseExpression,
              detail: str | None = None, index: int | None = None, owner: str | None = None) -> None:
        origins = _origins(expr, self.model.reaching)
        self.model.flows.append(Flow(sink, node, expr, origins, detail, index, owner))
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)) and sink is Sink.CTX_ATTRIBUTE:
            for position, element in enumerate(expr.elements):
                if not isinstance(element, cst.StarredElement):
                    inner = _origins(element.value, self.model.reaching)
                    self.model.flows.append(Flow(sink, node, element.value, inner, detail, position, owner))
        if isinstance(expr, cst.Dict) and sink is Sink.CTX_ATTRIBUTE:
            for position, element in enumerate(expr.elements):
                if isinstance(element, cst.DictElement):
                    inner = _origins(element.value, self.model.reaching)
                    self.model.flows.append(Flow(sink, node, element.value, inner, detail, position, owner))

    def _call(self, node: cst.Call, env: _Env) -> None:
        func = node.func
        name = dotted_name(func)
        if id(node) not in self.call_ids:  # a loop body is walked twice: record once
            self.call_ids.add(id(node))
            self.model.calls.append((name, node))
        qualified = self.imports.resolve(name) if name else None
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if qualified in COLLECTIVE_WRITES and positional:
            self._inplace(positional[0].value, node, f"{qualified}()", env)
        attribute = _setattr_literal(node, qualified)
        if attribute is not None:
            # `setattr(ctx, "x", value)` is `ctx.x = value`.
            owner = node.args[0].value
            assert isinstance(owner, cst.Name)
            self._flow(Sink.CTX_ATTRIBUTE, node, node.args[2].value, attribute, owner=owner.value)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            is_ctx_api = method in TENSOR_ONLY_CTX_APIS and isinstance(receiver, cst.Name)
            if qualified is not None and qualified.startswith("torch."):
                short = qualified.rsplit(".", 1)[-1]
                if positional and short not in _NOT_TENSOR_FIRST and self._is_tensor_function(qualified):
                    self._mark(positional[0].value)
                if is_inplace_name(short) and node.args:
                    self._inplace(node.args[0].value, node, f"{name}()", env)
            elif is_ctx_api:
                for position, arg in enumerate(positional):
                    self._flow(Sink.CTX_API, node, arg.value, method, position)
                    if method != "save_for_forward":
                        self._mark(arg.value)
                        # ...but no proof against an annotation: passing an int there is the bug AGL004 reports.
                        self.api_marks.add(id(arg.value))
            else:
                if method in EVIDENCE_METHODS or is_inplace_name(method):
                    self._mark(receiver)
                if method == "clear" and not positional:
                    self._inplace(receiver, node, "clear()", env)  # a container emptied in place
                if is_inplace_name(method):
                    self_copy = (
                        method == "copy_"
                        and bool(positional)
                        and bool(_origins(receiver, self.model.reaching))
                        and _origins(positional[0].value, self.model.reaching)
                        == _origins(receiver, self.model.reaching)
                    )
                    self._inplace(receiver, node, f"{method}()", env, self_copy)
        for position, arg in enumerate(node.args):
            if arg.keyword is not None and arg.keyword.value == "out":
                self._inplace(arg.value, node, "out=", env)
            if arg.keyword is not None and arg.keyword.value == "inplace" and positional and not _is_falsy(arg.value):
                # `f(x, ..., inplace=flag)` writes its first argument when the flag holds, as
                # `F.relu(x, inplace=True)`, `F.dropout(...)` and rotary kernels do.
                flag = node_code(arg.value)
                self._inplace(positional[0].value, node, f"{name or 'a call'}(..., inplace={flag})", env)
            if arg.keyword is None and not arg.star:
                self._flow(Sink.ARGUMENT, node, arg.value, name, position)

    def _is_tensor_function(self, qualified: str) -> bool:
        return Classifier._torch_call(qualified) is Kind.TENSOR  # noqa: SLF001

    def _mark(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.Name):
            self.marks.add(id(expr))

    def _inplace(self, target: cst.BaseExpression, node: cst.CSTNode, how: str, env: _Env,
                 self_copy: bool = False) -> None:
        origins, through = written_bindings(target, self.model.reaching)
        self.model.inplace_writes.append(InplaceWrite(node, how, target, origins, self_copy, through))




def _is_falsy(value: cst.BaseExpression) -> bool:
    """A literal that is false: ``False``, ``None``, ``0``."""
    return (isinstance(value, cst.Name) and value.value in ("False", "None")) or (
        isinstance(value, cst.Integer) and value.value == "0"
    )


def _with_narrowed(binding: Binding) -> Iterator[Binding]:
    """``binding`` and, for a narrowing, the bindings it narrows (the same value)."""
    stack = [binding]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if current.how is How.NARROWING:
            stack.extend(current.aliases)


def _not_tensor(kind: Kind) -> Kind:
    """Not an instance of Tensor (nor of a subclass): None stays None, anything else is no tensor."""
    return Kind.NONE if kind is Kind.NONE else Kind.NON_TENSOR


def _a_tensor(kind: Kind) -> Kind:
    """An instance of Tensor: what the kind knew of its dtype stays."""
    if kind is Kind.OPTIONAL_INDEX_TENSOR:
        return Kind.INDEX_TENSOR
    return kind if kind.is_tensor else Kind.TENSOR


def _unchanged(kind: Kind) -> Kind:
    return kind


def _is_alias_expr(value: cst.BaseExpression) -> bool:
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        method = value.func.attr.value
        if method not in ALIAS_METHODS and not is_inplace_name(method):
            return False
        value = value.func.value
    return isinstance(value, cst.Name)


class _Uses(cst.CSTVisitor):
    """Records name uses, calls and walrus bindings inside one expression or small statement."""

    def __init__(self, walker: _Walker, env: _Env, per_item: bool = False) -> None:
        self.walker = walker
        self.env = env
        self.per_item = per_item  # inside a comprehension, where it runs once per item

    def visit_Name(self, node: cst.Name) -> None:
        self.walker._use(node, self.env)  # noqa: SLF001

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value in EVIDENCE_ATTRIBUTES:
            self.walker._mark(node.value)  # noqa: SLF001
        if isinstance(node.value, cst.Name) and id(node) not in self.walker.read_ids:
            self.walker.read_ids.add(id(node))  # a loop body is walked twice: record once
            self.walker.model.attribute_reads.append((node.value.value, node.attr.value, node))
            if self.per_item:
                self.walker.model.per_item_reads.add(id(node))
        traverse.visit(node.value, self)
        return False  # the attribute's name is not a use

    def visit_Call(self, node: cst.Call) -> bool:
        traverse.visit(node.func, self)
        for arg in node.args:
            traverse.visit(arg.value, self)
        self.walker._call(node, self.env)  # noqa: SLF001
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        traverse.visit(node.value, self)
        return False  # a keyword's name is not a use

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        traverse.visit(node.value, self)
        self.walker._bind_value(self.env, node.target, node.value, node, How.WALRUS)  # noqa: SLF001
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.walker._nested(node, self.env)  # noqa: SLF001
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.walker._nested(node, self.env)  # noqa: SLF001
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.walker._nested(node, self.env)  # noqa: SLF001
        return False

    def _comprehension(self, node: cst.BaseComp | cst.DictComp) -> bool:
        inner = dict(self.env)
        visitor = _Uses(self.walker, inner, per_item=True)
        clause: cst.CompFor | None = node.for_in
        first = True
        while clause is not None:
            traverse.visit(clause.iter, self if first else visitor)
            first = False
            self.walker._bind_value(inner, clause.target, None, clause, How.COMPREHENSION)  # noqa: SLF001
            for condition in clause.ifs:
                traverse.visit(condition.test, visitor)
            clause = clause.inner_for_in
        if isinstance(node, cst.DictComp):
            traverse.visit(node.key, visitor)
            traverse.visit(node.value, visitor)
        else:
            traverse.visit(node.elt, visitor)
        return False

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension  # type: ignore[assignment]


class _PatternNames(cst.CSTVisitor):
    """Binds the capture names of a ``case`` pattern."""

    def __init__(self, walker: _Walker, env: _Env, case: cst.MatchCase) -> None:
        self.walker = walker
        self.env = env
        self.case = case

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self.walker._bind(self.env, node.name.value, How.MATCH, self.case)  # noqa: SLF001

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self.walker._bind(self.env, node.name.value, How.MATCH, self.case)  # noqa: SLF001


def _join(*states: _Env | None) -> _Env | None:
    """The state after paths that end in ``states`` meet (None: no path gets there)."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    if len(live) == 1:
        return dict(live[0])
    joined: _Env = {}
    for state in live:
        for name, bindings in state.items():
            joined[name] = joined.get(name, frozenset()) | bindings
    return joined


def _suite(suite: cst.BaseSuite | None) -> Sequence[cst.BaseStatement]:
    if suite is None:
        return ()
    if isinstance(suite, cst.IndentedBlock):
        return suite.body
    return (cst.SimpleStatementLine(body=suite.body),)  # type: ignore[attr-defined]


def _del_targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [e.value for e in target.elements]
    return [target]


def _strip_sharing(
    node: cst.BaseExpression, detach: bool, through: set[str] | None = None
) -> tuple[cst.BaseExpression, bool]:
    """``node`` without the views, in-place methods, ``.detach()`` and ``.data`` around it,
    and whether one of them detached it; the view methods and attributes passed are
    added to ``through``."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method in ALIAS_METHODS or is_inplace_name(method):
                if method in ALIAS_METHODS and through is not None:
                    through.add(method)
                node = node.func.value
                continue
            if method == "detach" and not node.args:
                node, detach = node.func.value, True
                continue
            return node, detach
        if isinstance(node, cst.Attribute) and node.attr.value in VIEW_ATTRIBUTES:
            if through is not None:
                through.add(node.attr.value)
            node = node.value
            continue
        if isinstance(node, cst.Attribute) and node.attr.value == "data":
            node, detach = node.value, True
            continue
        return node, detach


def _is_sharing_expr(value: cst.BaseExpression) -> bool:
    """Whether ``value`` is a name (or a conditional expression) under views, ``.detach()``
    or ``.data``: its tensor is one a binding already holds."""
    node, _ = _strip_sharing(value, False)
    return isinstance(node, (cst.Name, cst.IfExp))


def none_padding(node: cst.BaseExpression) -> int | None:
    """``k`` for ``[None] * k`` or ``(None,) * k`` with an integer literal ``k``."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)):
        return None
    positions = sequences.literal_positions(node)
    if positions is None or not all(is_none(value) for position in positions for value in position):
        return None
    return len(positions)


def _integer_index(subscript: cst.Subscript) -> int | None:
    """``i`` for ``v[i]`` with one integer literal index (negative ones left out)."""
    if len(subscript.slice) != 1:
        return None
    index = subscript.slice[0].slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
        return int(index.value.value)
    return None


def _is_none_test(comparison: cst.Comparison, operand: cst.BaseExpression) -> bool:
    """Whether ``comparison`` is ``operand is None`` or ``operand is not None``."""
    if comparison.left is not operand or len(comparison.comparisons) != 1:
        return False
    target = comparison.comparisons[0]
    return isinstance(target.operator, (cst.Is, cst.IsNot)) and is_none(target.comparator)
