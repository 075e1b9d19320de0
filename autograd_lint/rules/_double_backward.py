"""What a backward's second derivative loses: the analysis AGL009 and AGL033 share.

A backward's result is followed back through its local bindings (the semantic
model's facts) to what it is computed from: the incoming gradients and saved
inputs (with autograd history), values cut off from autograd, intermediates
saved or kept on ctx in forward, and calls autograd can't see into.  AGL009 reports
a result that mixes a cut-off value with one that has history (a silently wrong
second derivative); AGL033 one cut off whole or computed by opaque code.  Both
fix it by adding ``@once_differentiable`` (:class:`AddOnceDifferentiable`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import libcst as cst

from autograd_lint.model.exprs import (
    SELF_RETURNING_METHODS,
    NON_TENSOR_ATTRIBUTES,
    NON_TENSOR_BUILTINS,
    NON_TENSOR_METHODS,
    SAVED_ATTRIBUTES,
    ctx_attribute,
    dotted_name,
    is_none,
)
from autograd_lint.model.imports import ImportMap
from autograd_lint.rules._common import ctx_writers, inputs_without_gradient, short
from autograd_lint.rules.base import (
    Diagnostic,
    Fixer,
    FunctionContext,
    ImportRef,
    Report,
)
from autograd_lint.model.opaque import EXTENSION_FUNCTION, is_torch_helper, opaque_call, opaque_calls
from autograd_lint.model.semantic import ALIAS_METHODS, Binding, BindingFacts, How, MethodModel, Sink
from autograd_lint.model.spec import FunctionSpec, Kind, MethodSpec

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis

# Decorators a backward may carry without hiding a once_differentiable inside them.
_KNOWN_DECORATORS = frozenset(
    {
        "builtins.staticmethod",
        "builtins.classmethod",
        "torch.amp.custom_bwd",
        "torch.amp.autocast_mode.custom_bwd",
        "torch.cuda.amp.custom_bwd",
        "torch.cuda.amp.autocast_mode.custom_bwd",
    }
)
_NO_GRAD = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
# Tensor methods whose result carries no gradient whatever their receiver.
_NON_DIFFERENTIABLE_METHODS = frozenset(
    "argmax argmin argsort nonzero bool long int short byte char sign isnan isinf isfinite eq ne lt le "
    "gt ge logical_not logical_and logical_or".split()
) | NON_TENSOR_METHODS
# Calls that build a tensor from a shape or from randomness, not from their arguments' values.
_CREATION_PREFIXES = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange", "new_")


# Attributes that give (a view of) a tensor's own values.
_TENSOR_VALUE_ATTRIBUTES = frozenset("T mT H mH real imag data grad values".split())


@dataclass(frozen=True)
class _Taint:
    """Where a value was cut off from autograd, and whether it is a tensor or a Python value."""

    source: cst.CSTNode
    what: str
    is_scalar: bool
    # `x.detach().requires_grad_()`: a fresh leaf for autograd run inside backward (a recompute).
    leaf: bool = False


class _BackwardFlow:
    """Follows values cut off from autograd in one backward body to its ``return``.

    Sources: ``.detach()``, ``.data``, ``.numpy()`` (tensors or arrays); numpy calls on
    a grad parameter or a saved tensor; ``.item()``/``.tolist()`` on one of those
    (Python values); every tensor computed from those inside ``with torch.no_grad():``.  A tensor
    source taints what is computed from it (``torch.from_numpy`` included), except
    comparisons, sizes and integer results; a Python value taints only arithmetic, so
    ``x.select(0, k.item())`` (an index, a shape) is not a finding, nor is numpy applied
    to shapes or constants.

    A taint is a property of a binding (of an assignment, an annotated or augmented
    assignment: a tuple target takes the taint of the whole value; of a ``for`` or
    comprehension target: the tensor taint of what it iterates), and so is its history:
    whether the value has autograd history that the body's own torch code gives it
    (``tracked``: a grad parameter, what is unpacked from ``ctx.saved_tensors``, and what
    operators, ``torch.*`` functions and tensor methods compute from those, outside
    ``no_grad`` and not through a cut), whether that is not known (``unknown``: a value
    computed by a call of other code, a helper or another module, from such values), and
    whether a tainted value also has history of its own (``mixed``: ``grad * w.item()``,
    whose second derivative silently misses the terms through ``w``).  Calls into code
    autograd can't see (:mod:`autograd_lint.model.opaque`) give values without history.
    A name reads the facts of the bindings that reach it; where several do, the first
    tainted one in walk order gives the taint.  ``x += v`` keeps what ``x`` had.
    """

    def __init__(self, imports: ImportMap, method: MethodSpec, module_text: str | None = None) -> None:
        assert method.semantic is not None
        self.imports = imports
        self.ctx_name = method.ctx_name
        model = self.model = method.semantic
        grads = {p.name for p in method.positional[1:]}
        self.tracked: set[Binding] = {b for b in model.params.values() if b.name in grads}
        self.unknown: set[Binding] = set()
        self.mixed: set[Binding] = set()
        self.taints: dict[Binding, _Taint] = {}
        self.opaque = {id(o.call): o for o in opaque_calls(model, module_text)}
        self.module_text = module_text
        self.unknown_calls: dict[int, cst.Call] = {}
        self.no_grad_blocks = self._no_grad_blocks()
        self.facts = BindingFacts(model)
        computed = [
            b for b in model.all_bindings()
            if isinstance(b.site, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor))
            and b.how is not How.NARROWING
        ]
        self.facts.solve(computed, self._compute)

    def _compute(self, binding: Binding) -> bool:
        site = binding.site
        if isinstance(site, (cst.For, cst.CompFor)):  # an item of a tensor taint is one, as `x[i]` is
            found = self._tensor_only(self.taint(site.iter))
            return self._record(binding, found, self.history(site.iter), found is not None and self.is_mixed(site.iter))
        assert isinstance(site, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and site.value is not None
        value = site.value
        if self._is_saved_tensors(value):
            return self._record(binding, None, True, False)
        taint = self.taint(value)
        if taint is None:
            no_grad = self._no_grad(site)
            if no_grad is not None and self._computes(value):
                taint = no_grad
                return self._record(binding, taint, False, False)
        history = self.history(value)
        mixed = taint is not None and self.is_mixed(value)
        if isinstance(site, cst.AugAssign):  # `x += v`: x keeps its own taint and history
            own = self.taint(site.target)
            own_history = self.history(site.target)
            mixed = mixed or self._is_mixed_parts([site.target, value]) or self.is_mixed(site.target)
            taint = own or taint
            history = _either(own_history, history)
        return self._record(binding, taint, history, mixed)

    def _record(self, binding: Binding, taint: _Taint | None, history: bool | None, mixed: bool) -> bool:
        changed = False
        if taint is not None and binding not in self.taints:
            self.taints[binding] = taint
            changed = True
        if history is True and binding not in self.tracked:
            self.tracked.add(binding)
            changed = True
        if history is None and binding not in self.unknown:
            self.unknown.add(binding)
            changed = True
        if mixed and binding not in self.mixed:
            self.mixed.add(binding)
            changed = True
        return changed

    def returned(self) -> list[cst.BaseExpression]:
        """The returned values: each element of a returned tuple, else the whole value."""
        found: list[cst.BaseExpression] = []
        for ret in self.model.returns:
            if ret.value is None:
                continue
            if ret.elements is not None:
                found.extend(e for e in ret.elements if not is_none(e))
            elif not is_none(ret.value):
                found.append(ret.value)
        return found

    def element_taint(self, element: cst.BaseExpression) -> _Taint | None:
        """The tensor taint of a returned value (a value returned inside ``no_grad`` included)."""
        found = self._tensor_only(self.taint(element))
        if found is None:
            no_grad = self._no_grad(element)
            if no_grad is not None and self._computes(element):
                found = no_grad
        return found

    def _no_grad_blocks(self) -> dict[int, _Taint]:
        """The ``with torch.no_grad():`` statements of the body (by id), each with its taint."""
        blocks: dict[int, _Taint] = {}
        items: list[cst.CSTNode] = [call for _, call in self.model.calls]
        items.extend(node for _, _, node in self.model.attribute_reads)  # `with torch.no_grad:`
        for node in items:
            target = node.func if isinstance(node, cst.Call) else node
            if not isinstance(target, (cst.Name, cst.Attribute)) or self._qualified(target) not in _NO_GRAD:
                continue
            item = self.model.parent(node)
            statement = self.model.parent(item) if isinstance(item, cst.WithItem) and item.item is node else None
            if isinstance(statement, cst.With):
                blocks[id(statement)] = _Taint(statement, "`with torch.no_grad()`", False)
        return blocks

    def _no_grad(self, node: cst.CSTNode) -> _Taint | None:
        """The outermost ``with torch.no_grad():`` whose body holds ``node``."""
        if not self.no_grad_blocks:
            return None
        found = None
        for ancestor, child in self.model.ancestors(node):
            if isinstance(ancestor, cst.With) and child is ancestor.body:
                found = self.no_grad_blocks.get(id(ancestor), found)
        return found

    def _tracked_use(self, use: cst.Name) -> bool:
        return any(b in self.tracked for b in self.facts.reaching(use))

    def _is_tracked(self, node: cst.BaseExpression) -> bool:
        while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
            node = node.func if isinstance(node, cst.Call) else node.value
        return isinstance(node, cst.Name) and self._tracked_use(node)

    def _is_saved_tensors(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Subscript):
            node = node.value
        return ctx_attribute(node, self.ctx_name) in SAVED_ATTRIBUTES

    def _qualified(self, node: cst.BaseExpression) -> str | None:
        """The qualified name when ``node`` is reached through an import (not a local)."""
        name = dotted_name(node)
        if name is None or name.split(".", 1)[0] not in self.imports.aliases:
            return None
        if self.model.is_bound(name.split(".", 1)[0]) and not any(
            b.how is How.IMPORT for b in self.model.bindings_of(name.split(".", 1)[0])
        ):
            return None  # a local of the same name
        return self.imports.resolve(name)

    def taint(self, node: cst.BaseExpression) -> _Taint | None:
        if isinstance(node, cst.Name):
            for binding in self.facts.reaching(node):
                found = self.taints.get(binding)
                if found is not None:
                    return found
            return None
        if isinstance(node, cst.Attribute):
            is_ctx = isinstance(node.value, cst.Name) and node.value.value == self.ctx_name
            if node.attr.value == "data" and not is_ctx:
                return _Taint(node, "`.data`", False)
            if node.attr.value in NON_TENSOR_ATTRIBUTES:
                return None
            found = self.taint(node.value)
            return found if found is not None and not found.is_scalar else None
        if isinstance(node, cst.Call):
            return self._call(node)
        if isinstance(node, cst.BinaryOperation):
            found = self.taint(node.left) or self.taint(node.right)
            return replace(found, is_scalar=False) if found is not None else None
        if isinstance(node, cst.UnaryOperation):
            return None if isinstance(node.operator, cst.Not) else self.taint(node.expression)
        if isinstance(node, cst.Subscript):
            return self._tensor_only(self.taint(node.value))
        if isinstance(node, cst.IfExp):
            return self.taint(node.body) or self.taint(node.orelse)
        if isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                found = self._tensor_only(self.taint(element.value))
                if found is not None:
                    return found
            return None
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            return self._tensor_only(self.taint(node.elt))
        return None  # comparisons, boolean operations, literals, lambdas

    @staticmethod
    def _tensor_only(found: _Taint | None) -> _Taint | None:
        return found if found is not None and not found.is_scalar else None

    def _call(self, node: cst.Call) -> _Taint | None:
        func = node.func
        qualified = self._qualified(func)
        if qualified is not None:
            if qualified.split(".", 1)[0] == "numpy" and any(self._is_tracked(a.value) for a in node.args):
                return _Taint(node, f"`{dotted_name(func)}(...)` (numpy)", False)
        elif isinstance(func, cst.Name) and func.value in NON_TENSOR_BUILTINS:
            return None
        if isinstance(func, cst.Attribute) and qualified is None:
            method = func.attr.value
            if method == "detach" and self._fresh_leaf(node):
                return _Taint(node, "`.detach()` (then `.requires_grad_()`: a fresh leaf)", False, leaf=True)
            if method in ("detach", "numpy"):
                return _Taint(node, f"`.{method}()`", False)
            if method in ("item", "tolist"):
                return _Taint(node, f"`.{method}()`", True) if self._is_tracked(func.value) else None
            if method in _NON_DIFFERENTIABLE_METHODS or method.startswith(_CREATION_PREFIXES):
                return None
            found = self._tensor_only(self.taint(func.value))
            if found is not None:
                return found
        elif qualified is not None and qualified.rsplit(".", 1)[-1].startswith(_CREATION_PREFIXES):
            return None
        for arg in node.args:
            found = self._tensor_only(self.taint(arg.value))
            if found is not None:
                return found
        return None

    def _computes(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` (or an element of a returned tuple) computes a new tensor from a
        tracked one.

        Under ``no_grad`` such a tensor has no history, but a name passed through
        unchanged (``return grad``) keeps its own, and a tensor built from a shape
        (``torch.zeros(n)``) has no derivative to lose.
        """
        if isinstance(node, cst.Tuple):
            return any(self._computes(e.value) for e in node.elements if not isinstance(e, cst.StarredElement))
        if isinstance(node, (cst.Name, cst.Attribute)):
            return False
        return _mentions(node, self._tracked_use)

    def _fresh_leaf(self, node: cst.Call) -> bool:
        """Whether ``node`` (``x.detach()``) is made a leaf that requires grad
        (``x.detach().clone().requires_grad_(True)``), so that backward can run autograd on it."""
        while True:
            attribute = self.model.parent(node)
            call = self.model.parent(attribute) if isinstance(attribute, cst.Attribute) else None
            if not isinstance(call, cst.Call) or call.func is not attribute or attribute.value is not node:
                return False
            assert isinstance(attribute, cst.Attribute)
            if attribute.attr.value == "requires_grad_":
                return True
            if attribute.attr.value not in SELF_RETURNING_METHODS and attribute.attr.value != "clone":
                return False
            node = call

    # -- history: whether a value has autograd history from the body's own torch code --
    def history(self, node: cst.BaseExpression) -> bool | None:
        """True: computed by operators, ``torch.*`` and tensor methods from a value with
        history; None: through a call of other code (not known); False: no history."""
        if isinstance(node, cst.Name):
            reaching = self.facts.reaching(node)
            if any(b in self.tracked for b in reaching):
                return True
            return None if any(b in self.unknown for b in reaching) else False
        if isinstance(node, cst.Attribute):
            is_ctx = isinstance(node.value, cst.Name) and node.value.value == self.ctx_name
            if node.attr.value == "data" and not is_ctx:
                return False
            return self.history(node.value) if node.attr.value in _TENSOR_VALUE_ATTRIBUTES else False
        if isinstance(node, cst.Call):
            return self._call_history(node)
        if isinstance(node, cst.BinaryOperation):
            return _either(self.history(node.left), self.history(node.right))
        if isinstance(node, cst.UnaryOperation):
            return False if isinstance(node.operator, cst.Not) else self.history(node.expression)
        if isinstance(node, cst.Subscript):
            return self.history(node.value)
        if isinstance(node, cst.IfExp):
            return _either(self.history(node.body), self.history(node.orelse))
        if isinstance(node, (cst.Tuple, cst.List)):
            return _either(*(self.history(e.value) for e in node.elements))
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            return self.history(node.elt)
        return False

    def _parts(self, node: cst.Call) -> list[cst.BaseExpression]:
        parts = [a.value for a in node.args]
        if isinstance(node.func, cst.Attribute) and self._qualified(node.func) is None:
            parts.insert(0, node.func.value)
        return parts

    def _call_history(self, node: cst.Call) -> bool | None:
        if id(node) in self.opaque:
            return False
        func = node.func
        qualified = self._qualified(func)
        parts = self._parts(node)
        if isinstance(func, cst.Attribute) and qualified is None:  # a method of a local value
            method = func.attr.value
            if method in _CUT_METHODS or method in _NON_DIFFERENTIABLE_METHODS or method.startswith(_CREATION_PREFIXES):
                return False
            return _either(*(self.history(p) for p in parts))
        if qualified is not None:
            root, short = qualified.split(".", 1)[0], qualified.rsplit(".", 1)[-1]
            if short.startswith(_CREATION_PREFIXES) or short in _NON_DIFFERENTIABLE_METHODS:
                return False
            if root in ("numpy", "math") or (root == "builtins" and short in _SCALAR_BUILTINS):
                return False
            if (root == "torch" and not qualified.startswith("torch.ops.")) or qualified.startswith(
                "torch.ops.aten."
            ) or root in _TRANSPARENT_MODULES:
                return _either(*(self.history(p) for p in parts))
        found = _either(*(self.history(p) for p in parts))
        if found is False:
            return False
        self.unknown_calls.setdefault(id(node), node)
        return None  # a helper, another module's function: what it does is not known

    def is_mixed(self, node: cst.BaseExpression) -> bool:
        """Whether a tainted value also has history of its own (through another operand)."""
        if isinstance(node, cst.Name):
            return any(b in self.mixed for b in self.facts.reaching(node))
        if isinstance(node, cst.Attribute):
            if node.attr.value == "data":
                return False
            return node.attr.value in _TENSOR_VALUE_ATTRIBUTES and self.is_mixed(node.value)
        if isinstance(node, cst.Call):
            func = node.func
            if id(node) in self.opaque or (isinstance(func, cst.Attribute) and func.attr.value in _CUT_METHODS):
                return False
            return self._is_mixed_parts(self._parts(node))
        if isinstance(node, cst.BinaryOperation):
            return self._is_mixed_parts([node.left, node.right])
        if isinstance(node, cst.UnaryOperation):
            return self.is_mixed(node.expression)
        if isinstance(node, cst.Subscript):
            return self.is_mixed(node.value)
        if isinstance(node, cst.IfExp):
            return self.is_mixed(node.body) or self.is_mixed(node.orelse)
        if isinstance(node, (cst.Tuple, cst.List)):
            return any(self.is_mixed(e.value) for e in node.elements)
        return False

    def _is_mixed_parts(self, parts: Sequence[cst.BaseExpression]) -> bool:
        if any(self.is_mixed(p) for p in parts):
            return True
        tainted = [i for i, p in enumerate(parts) if self.taint(p) is not None]
        return any(self.history(p) is True for i, p in enumerate(parts) if tainted and tainted != [i])

    # -- where returned values come from --------------------------------------
    def sources(self, exprs: Sequence[cst.BaseExpression]) -> tuple[list[cst.CSTNode], set[Binding]]:
        """The expressions the values of ``exprs`` are computed from (``exprs`` themselves
        and the values of the bindings they read, transitively), and those bindings."""
        nodes: list[cst.CSTNode] = list(exprs)
        seen: set[Binding] = set()
        stack: list[cst.CSTNode] = list(exprs)
        while stack:
            expr = stack.pop()
            for binding in self.model.unnarrowed(self.model.dependencies(expr)):
                if binding in seen:
                    continue
                seen.add(binding)
                for value in _binding_sources(binding):
                    nodes.append(value)
                    stack.append(value)
        return nodes, seen

    def reaching_call(self, exprs: Sequence[cst.BaseExpression], calls: dict[int, cst.Call],
                      buffers: bool = False) -> cst.Call | None:
        """The first of ``calls`` (in walk order) whose result, or (``buffers``) a buffer
        it writes, the values of ``exprs`` are computed from."""
        if not calls:
            return None
        nodes, seen = self.sources(exprs)
        inside = {id(n) for n in nodes}
        for _, call in self.model.calls:
            if id(call) not in calls:
                continue
            if id(call) in inside or any(id(a) in inside for a, _ in self.model.ancestors(call)):
                return call
            if buffers and any(b in seen and _is_buffer(b) for b in self._written(call)):
                return call
        return None

    def _written(self, call: cst.Call) -> set[Binding]:
        """The bindings whose objects are passed to ``call`` (a kernel writes its arguments)."""
        found: set[Binding] = set()
        values = [a.value for a in call.args]
        while values:
            value = values.pop()
            if isinstance(value, (cst.Tuple, cst.List)):
                values.extend(e.value for e in value.elements)
            else:
                found |= self.model.origins(value)
        return found


_CUT_METHODS = frozenset({"detach", "numpy", "item", "tolist"})
# Builtins that give Python values, not tensors (containers such as `tuple` keep what they hold).
_SCALAR_BUILTINS = frozenset("int float bool str len range isinstance type hash id repr hasattr callable".split())
# Modules whose functions are plain torch code on tensors.
_TRANSPARENT_MODULES = frozenset({"einops"})


def _either(*values: bool | None) -> bool | None:
    """True when one is; else None (not known) when one is; else False."""
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


def _binding_sources(binding: Binding) -> list[cst.BaseExpression]:
    site = binding.site
    if isinstance(site, (cst.Assign, cst.AnnAssign, cst.NamedExpr)) and site.value is not None:
        return [site.value]
    if isinstance(site, cst.AugAssign):
        return [site.value, site.target]
    if isinstance(site, (cst.For, cst.CompFor)):
        return [site.iter]
    if isinstance(site, cst.WithItem):
        return [site.item]
    return []


def _is_buffer(binding: Binding) -> bool:
    """Whether ``binding`` holds a tensor made to be written: ``torch.empty_like(x)``,
    ``x.new_zeros(n)``, ``x.data``, or a view of one."""
    return _is_buffer_value(binding.value) if binding.how is How.ASSIGNMENT else False


def _is_buffer_value(value: cst.BaseExpression | None) -> bool:
    if isinstance(value, cst.IfExp):
        return _is_buffer_value(value.body) or _is_buffer_value(value.orelse)
    if isinstance(value, cst.Attribute):
        return value.attr.value == "data"
    if isinstance(value, cst.Call):
        callee = dotted_name(value.func) or ""
        short = callee.rsplit(".", 1)[-1]
        if short.startswith(_CREATION_PREFIXES):
            return True
        if isinstance(value.func, cst.Attribute) and short in ALIAS_METHODS:
            return _is_buffer_value(value.func.value)
    return False


def _value_of(binding: Binding) -> tuple[cst.BaseExpression | None, bool]:
    """The value a rebinding takes its name's value from, and whether it is a plain
    ``name = value`` (for ``a, b = value``: the whole value, not plain; else None)."""
    site = binding.site
    if binding.how is How.ASSIGNMENT and binding.value is not None and isinstance(site, (cst.Assign, cst.AnnAssign)):
        return binding.value, True
    if isinstance(site, cst.Assign):  # `a, b = value`: an element of it
        return site.value, False
    return None, False


def _mentions(node: cst.CSTNode, reads: Callable[[cst.Name], bool]) -> bool:
    """Whether ``node`` reads a name for which ``reads`` holds (a use, with the bindings that
    reach it), where the value (not a size) matters."""
    if isinstance(node, cst.Name):
        return reads(node)
    if isinstance(node, cst.Attribute):
        # `x.T`, `x.data`, `out.values` are values of the tensor; `xs.meta`, `state.offsets`
        # are fields of some object, whose dtype and dependence on the inputs syntax can't tell.
        return node.attr.value in _TENSOR_VALUE_ATTRIBUTES and _mentions(node.value, reads)
    if isinstance(node, cst.Call):
        func = node.func
        callee = dotted_name(func) or ""
        short = callee.rsplit(".", 1)[-1]
        if (
            short in _NON_DIFFERENTIABLE_METHODS
            or short.startswith(_CREATION_PREFIXES)
            or callee in NON_TENSOR_BUILTINS
        ):
            return False
        receiver = isinstance(func, cst.Attribute) and _mentions(func.value, reads)
        return receiver or any(_mentions(a.value, reads) for a in node.args)
    if isinstance(node, cst.BinaryOperation):
        return _mentions(node.left, reads) or _mentions(node.right, reads)
    if isinstance(node, cst.UnaryOperation):
        return not isinstance(node.operator, cst.Not) and _mentions(node.expression, reads)
    if isinstance(node, cst.Subscript):
        return _mentions(node.value, reads)
    if isinstance(node, cst.IfExp):
        return _mentions(node.body, reads) or _mentions(node.orelse, reads)
    return False


class _Intermediates:
    """Which values in forward/setup_context are computed from the inputs (not inputs or outputs).

    A custom Function's forward runs without grad, so such a value has no autograd
    history: a backward that uses it computes a gradient whose own derivative with
    respect to the inputs is lost.  Only single plain assignments whose value is a call
    or arithmetic on the inputs count; comparisons, integer results, sizes and tensors
    built from shapes or randomness do not, since they have no derivative to lose.
    Nor do values computed only from inputs that backward gives no gradient (token ids,
    masks, frozen weights: ``None`` at their position in every ``return``): they are
    constants to this Function, so their lack of history loses nothing.
    """

    def __init__(self, function: FunctionSpec, method: MethodSpec, module_text: str | None = None) -> None:
        self.module_text = module_text
        inputs = function.forward_inputs or ()
        self.inputs = {p.name for p in inputs if method.param_kinds.get(p.name) is not Kind.NON_TENSOR}
        constants = inputs_without_gradient(function)
        differentiable = {p.name for i, p in enumerate(inputs) if i not in constants} & self.inputs
        if method.name == "setup_context":
            self.inputs = {p.name for p in method.positional[1:]}
            differentiable = set(self.inputs)
        self.outputs = _returned_names(function)
        assert method.semantic is not None
        model = self.model = method.semantic
        # Bindings computed from the differentiable inputs (a plain or unpacking assignment
        # whose value reads one), starting from the inputs themselves.
        self.derived: set[Binding] = {b for b in model.params.values() if b.name in differentiable}
        self.facts = BindingFacts(model)
        computed = [b for b in model.all_bindings() if b.is_rebinding and _value_of(b)[0] is not None]
        self.facts.solve(computed, self._compute)

    def _compute(self, binding: Binding) -> bool:
        value, _ = _value_of(binding)
        if binding in self.derived or value is None or not _mentions(value, self._derived_use):
            return False
        self.derived.add(binding)
        return True

    def _derived_use(self, use: cst.Name) -> bool:
        return any(b in self.derived for b in self.facts.reaching(use))

    def is_intermediate_value(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)):
            return False  # a name, a subscript or an attribute: an alias, not a computation
        if self._may_be_an_input(value) or _is_step_function(value):
            return False
        return _mentions(value, self._derived_use)

    def _may_be_an_input(self, value: cst.BaseExpression) -> bool:
        """``x.contiguous()``, ``x.to(dtype)``...: often ``x`` itself, history and all.  ``x``
        is an input's name, even where a rebinding (``x = x.view(-1)``) reaches it: whether
        the value is still the input is not decided, so the rule stays silent."""
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in SELF_RETURNING_METHODS
        ):
            value = value.func.value
        return isinstance(value, cst.Name) and value.value in self.inputs

    def is_intermediate_name(self, name: str) -> bool:
        if name in self.inputs or name in self.outputs:
            return False
        values = [b for b in self.model.bindings_of(name) if b.is_rebinding]
        if len(values) != 1:
            return False
        value, plain = _value_of(values[0])
        if not plain and isinstance(value, cst.Call) and self.module_text is not None:
            # `loss, grad_x = ext.forward(x, ...)`: an extension's outputs are new tensors
            # with no history, computed from the inputs it reads.
            # Only a compiled extension's function: a helper of this module that launches
            # Triton may hand back more than its kernel's outputs, and its backward
            # counterpart is often one level further down than this check can see.
            opaque = opaque_call(self.model, value, self.module_text)
            return (
                opaque is not None
                and opaque.what == EXTENSION_FUNCTION
                and _mentions(value, self._derived_use)
            )
        return plain and value is not None and self.is_intermediate_value(value)

    def rebound_input(self, use: cst.Name) -> Binding | None:
        """The binding of an input's name that reaches ``use`` when it is a new value
        computed from the inputs (``x = quantize(x)``): a new binding is a new value,
        so what is saved is an intermediate, not the input.  None when the input
        itself (or one of several bindings) may reach ``use``."""
        if use.value not in self.inputs or use.value in self.outputs:
            return None
        reaching = self.model.reaching(use)
        if len(reaching) != 1:
            return None
        (binding,) = reaching
        if not binding.is_rebinding or binding.aliases:
            return None  # the input itself, or a view / in-place update of it
        value, plain = _value_of(binding)
        if not plain or value is None or not self._certainly_new(value):
            return None
        return binding if self.is_intermediate_value(value) else None

    def _certainly_new(self, value: cst.BaseExpression) -> bool:
        """Whether ``value`` computes a new tensor: arithmetic, a ``torch.*`` function, or a
        tensor method that computes.  A helper (``maybe_align(w)``, ``maybe_contiguous(b)``)
        may hand the input itself back, history and all: not decided, so not new."""
        if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)):
            return True
        if not isinstance(value, cst.Call):
            return False
        name = dotted_name(value.func)
        qualified = self.model.imports.resolve(name) if name else None
        if qualified is not None and qualified.split(".", 1)[0] == "torch":
            return True
        func = value.func
        return (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value in self.inputs
            and func.attr.value not in SELF_RETURNING_METHODS | ALIAS_METHODS | _CONVERSIONS
        )


# Conversions that keep a tensor's values: a step function converted is still one.
_CONVERSIONS = frozenset("float double half bfloat16 to type type_as bool int long byte detach".split())


def _is_step_function(value: cst.BaseExpression) -> bool:
    """Whether ``value`` is a 0/1 (or sign) mask of the inputs: a comparison, or a call
    with no derivative (``x.gt(0)``, ``torch.sign(x)``), converted or not
    (``(x > 0).float()``, ``x.gt(0).type_as(x)``).  Its derivative is zero almost
    everywhere, so its lack of history loses nothing (gradgradcheck passes)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _CONVERSIONS:
        value = value.func.value
    if isinstance(value, cst.Comparison):
        return True
    if isinstance(value, cst.Call):
        name = dotted_name(value.func)
        method = name.rsplit(".", 1)[-1] if name else None
        return method in _NON_DIFFERENTIABLE_METHODS and method not in NON_TENSOR_METHODS
    return False


def _returned_names(function: FunctionSpec) -> set[str]:
    forward = function.method("forward")
    names: set[str] = set()
    for ret in forward.returns if forward is not None else ():
        for expr in ret.elements or ((ret.value,) if ret.value is not None else ()):
            if expr.name is not None:
                names.add(expr.name)
    return names


def _unused_saved_positions(backward: MethodSpec | None) -> set[int]:
    """Positions of ``ctx.saved_tensors`` that backward unpacks into a name it never uses
    as a value (unused, or only for ``.shape``, ``.dtype``, ``.size()``...)."""
    if backward is None or backward.semantic is None:
        return set()
    model = backward.semantic
    receivers = {id(node.value) for _, attr, node in model.attribute_reads if attr in NON_TENSOR_ATTRIBUTES}
    receivers |= {
        id(call.func.value)
        for _, call in model.calls
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in NON_TENSOR_METHODS
    }
    unused: set[int] = set()
    reads = [r for r in backward.ctx_reads if r.attribute in SAVED_ATTRIBUTES]
    if len(reads) != 1 or reads[0].targets is None or not reads[0].target_is_sequence:
        return unused
    for position, name in enumerate(reads[0].targets):
        bindings = [b for b in model.bindings_of(name) if b.how is How.UNPACKING]
        if len(bindings) == 1 and all(id(use) in receivers for use in model.uses(bindings[0])):
            unused.add(position)
    return unused


def _ctx_reads(method: MethodSpec) -> set[str] | None:
    """Attributes ``ctx.<attr>`` that ``method`` loads; None when a nested scope (a
    closure) uses ctx and may read any of them."""
    model = method.semantic
    ctx_name = method.ctx_name
    if model is None or ctx_name is None or model.nested_uses.get(ctx_name):
        return None
    return {attr for owner, attr, _ in model.attribute_reads if owner == ctx_name}


@dataclass(frozen=True)
class _Intermediate:
    """A tensor forward computed from the inputs without history that backward reads:
    the reason in words, and where backward reads it (its uses, or the ``ctx.<attr>`` loads)."""

    reason: str
    reads: tuple[cst.CSTNode, ...]


@dataclass(frozen=True)
class _Finding:
    code: str  # AGL009 (a silently wrong second derivative) or AGL033 (a first-order backward)
    message: str


_CONSEQUENCE_009 = (
    ": a double backward (create_graph=True) silently leaves out the second-derivative terms through it"
)
_CONSEQUENCE_033 = (
    ": a double backward (create_graph=True) gets none of its second-derivative terms, silently "
    "where the gradient also has history from another path (a gradient penalty, a second use of "
    "the input), else with `RuntimeError: element 0 of tensors does not require grad and does not "
    "have a grad_fn`"
)


# The finding on each backward/vjp, worked out once for AGL009 and AGL033 together; keyed
# by the method's semantic model, so that it goes with the analysis that made it.
_FINDINGS: "weakref.WeakKeyDictionary[MethodModel, _Finding | None]" = weakref.WeakKeyDictionary()


def reports(ctx: FunctionContext, code: str) -> Iterator[Report]:
    function = ctx.function
    for name in ("backward", "vjp"):
        method = function.methods.get(name)
        if method is None or not ctx.own(method) or method.node is None or ctx.unit(method) is None:
            continue
        if method.semantic is None or method.is_once_differentiable or any(
            d.qualified_name not in _KNOWN_DECORATORS for d in method.decorators
        ):
            continue
        if method.semantic not in _FINDINGS:
            _FINDINGS[method.semantic] = _finding(ctx, method)
        finding = _FINDINGS[method.semantic]
        if finding is not None and finding.code == code:
            yield Report(method.position, f"{function.name}.{name} {finding.message}")


def _finding(ctx: FunctionContext, method: MethodSpec) -> _Finding | None:
    """Whether ``method`` (a backward or vjp without ``@once_differentiable``) is not
    correctly double-differentiable, and how: AGL009 when its own torch code mixes values
    without history with values that have it (the second derivative is silently wrong);
    AGL033 when its result comes from code autograd can't differentiate, or is cut off
    from autograd whole (no_grad, ``.detach()``), so the second derivative gets nothing."""
    assert method.semantic is not None
    flow = _BackwardFlow(ctx.analysis.imports, method, ctx.analysis.source.text)
    returned = flow.returned()
    tainted = [(t, e) for e in returned if (t := flow.element_taint(e)) is not None]
    mixed = [(taint, element) for taint, element in tainted if flow.is_mixed(element)]
    for taint, element in mixed:
        if not taint.leaf:
            line = ctx.position(method, taint.source).line
            return _Finding(
                "AGL009",
                f"is not correctly double-differentiable (its result depends on {taint.what} on line "
                f"{line}) but is not decorated with @once_differentiable{_CONSEQUENCE_009}",
            )
    if mixed:
        line = ctx.position(method, mixed[0][0].source).line
        return _Finding(
            "AGL033",
            f"computes its gradient with autograd run on detached copies of its tensors (made leaves "
            f"on line {line}, a recompute by design) and is not decorated with @once_differentiable: "
            "a double backward (create_graph=True) silently leaves out the second-derivative terms "
            "through those copies",
        )
    opaque = flow.reaching_call(returned, {i: o.call for i, o in flow.opaque.items()}, buffers=True)
    if tainted:
        if opaque is not None:
            return _opaque_finding(ctx, method, flow, opaque)
        taint = tainted[0][0]
        line = ctx.position(method, taint.source).line
        return _Finding(
            "AGL033",
            f"returns a gradient cut off from autograd by {taint.what} on line {line} and is not "
            f"decorated with @once_differentiable{_CONSEQUENCE_033}",
        )
    intermediate = _saved_intermediate(ctx) or _ctx_intermediate(ctx, method)
    if intermediate is None:
        return None
    if opaque is not None:
        return _opaque_finding(ctx, method, flow, opaque)
    if any(flow.history(e) is True for e in returned) or any(
        _in_torch_math(flow, node) for node in intermediate.reads
    ):
        return _Finding(
            "AGL009",
            f"is not correctly double-differentiable ({intermediate.reason}) but is not decorated "
            f"with @once_differentiable{_CONSEQUENCE_009}",
        )
    unknown = flow.reaching_call(returned, flow.unknown_calls)
    if unknown is None or is_torch_helper(flow.model, unknown, flow.module_text):
        return None  # nothing unseen, or torch code of this file that reads no such tensor
    callee = short(ctx.unit(method).code(unknown.func), 40)  # type: ignore[union-attr]
    return _Finding(
        "AGL033",
        f"computes its gradients with `{callee}(...)`, code this check can't see into (a kernel "
        f"or an extension that autograd can't differentiate, or torch code), from a tensor without "
        f"history ({intermediate.reason}), and is not decorated with @once_differentiable: a double "
        "backward (create_graph=True) misses second-derivative terms, silently where the gradient has "
        "history, else with `RuntimeError: element 0 of tensors does not require grad and does not "
        "have a grad_fn`",
    )


def _opaque_finding(ctx: FunctionContext, method: MethodSpec, flow: _BackwardFlow, call: cst.Call) -> _Finding:
    opaque = flow.opaque[id(call)]
    line = ctx.position(method, call).line
    return _Finding(
        "AGL033",
        f"computes its gradients with `{opaque.callee}(...)` on line {line}, {opaque.what}, which "
        f"autograd can't differentiate, and is not decorated with @once_differentiable{_CONSEQUENCE_033}",
    )


def _in_torch_math(flow: _BackwardFlow, node: cst.CSTNode, follow: bool = True) -> bool:
    """Whether backward computes with ``node`` in its own torch code: an operand of an
    operator, an argument of a ``torch.*`` function or of a tensor method, or the tensor a
    method computes on (not a size, a shape or a view); through one plain local
    (``lams = ctx.lams``)."""
    model = flow.model
    parent = model.parent(node)
    if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
        return True
    if isinstance(parent, cst.Arg):
        call = model.parent(parent)
        if isinstance(call, cst.Call):
            if is_torch_helper(model, call, flow.module_text):
                return True  # a torch helper of this file: autograd sees through it
            qualified = flow._qualified(call.func)
            if qualified is not None:
                return qualified.split(".", 1)[0] == "torch" and not qualified.startswith("torch.ops.")
            if isinstance(call.func, cst.Attribute):
                return flow._is_tracked(call.func.value) and call.func.attr.value not in _CUT_METHODS
        return False
    if isinstance(parent, cst.Attribute) and parent.value is node:
        call = model.parent(parent)
        method = parent.attr.value
        return (
            isinstance(call, cst.Call) and call.func is parent
            and method not in _CUT_METHODS and method not in _NON_DIFFERENTIABLE_METHODS
            and method not in ALIAS_METHODS and method not in SELF_RETURNING_METHODS
        )
    if follow and isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, cst.Name):
            bindings = [b for b in model.bindings_of(target.value) if b.site is parent]
            return any(_in_torch_math(flow, use, False) for b in bindings for use in model.uses(b))
    return False


def _saved_intermediate(ctx: FunctionContext) -> _Intermediate | None:
    function = ctx.function
    forward = function.method("forward")
    if function.is_split_style is not False or forward is None or forward.node is None:
        return None
    if function.forward_inputs is None:
        return None
    intermediates: _Intermediates | None = None
    unused = _unused_saved_positions(function.backward_method)
    for call in forward.calls("save_for_backward"):
        for position, arg in enumerate(call.args):
            if arg.name is None or arg.kind is Kind.INDEX_TENSOR or position in unused:
                continue  # ids and masks have no derivative; a value backward never reads costs nothing
            if intermediates is None:
                # An extension's outputs unpacked in forward count as intermediates only for a
                # pure-torch backward (AGL009's case); a backward that itself calls opaque code
                # is AGL033's, judged on its own evidence.
                backward = function.backward_method
                text = ctx.analysis.source.text
                pure = backward is not None and backward.semantic is not None and not opaque_calls(backward.semantic, text)
                intermediates = _Intermediates(function, forward, text if pure else None)
            if intermediates.is_intermediate_name(arg.name):
                return _Intermediate(
                    f"forward saves `{arg.name}`, a tensor computed from the inputs, on line "
                    f"{call.position.line}; it has no autograd history",
                    _saved_reads(function.backward_method, position),
                )
            rebound = _rebound_input_saved(ctx, forward, intermediates, call.position.line, position)
            if rebound is not None:
                return _Intermediate(
                    f"forward saves `{arg.name}` on line {call.position.line}, which is no longer the input: "
                    f"line {rebound} rebinds it to a tensor computed from the inputs, with no autograd history",
                    _saved_reads(function.backward_method, position),
                )
    return None


def _rebound_input_saved(
    ctx: FunctionContext, forward: MethodSpec, intermediates: _Intermediates, line: int, position: int
) -> int | None:
    """The line of the rebinding when the argument at ``position`` of the
    ``save_for_backward`` call on ``line`` is an input's name rebound to an
    intermediate (``x = quantize(x); ctx.save_for_backward(x)``)."""
    model, ctx_name = forward.semantic, forward.ctx_name
    if model is None or ctx_name is None or ctx.unit(forward) is None:
        return None
    for node in model.calls_of(f"{ctx_name}.save_for_backward"):
        args = node.args
        if position >= len(args) or args[position].star or not isinstance(args[position].value, cst.Name):
            continue
        binding = intermediates.rebound_input(args[position].value)
        if binding is not None and ctx.position(forward, node).line == line:
            return ctx.position(forward, binding.site).line
    return None


def _saved_reads(backward: MethodSpec | None, position: int) -> tuple[cst.CSTNode, ...]:
    """Where backward reads the saved tensor at ``position``: the uses of the name it is
    unpacked into, and ``ctx.saved_tensors[position]``."""
    if backward is None or backward.semantic is None:
        return ()
    model = backward.semantic
    found: list[cst.CSTNode] = []
    for read in backward.ctx_reads:
        if read.attribute not in SAVED_ATTRIBUTES or read.targets is None or not read.target_is_sequence:
            continue
        if position < len(read.targets):
            for binding in model.bindings_of(read.targets[position]):
                if binding.how is How.UNPACKING:
                    found.extend(model.uses(binding))
    for node in model.attribute_loads(backward.ctx_name or "ctx", SAVED_ATTRIBUTES):
        parent = model.parent(node)
        if isinstance(parent, cst.Subscript) and len(parent.slice) == 1:
            index = parent.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                if int(index.value.value) == position:
                    found.append(parent)
    return tuple(found)


def _ctx_intermediate(ctx: FunctionContext, method: MethodSpec) -> _Intermediate | None:
    function = ctx.function
    read: set[str] | None = None
    for writer in ctx_writers(function):
        if writer.node is None or function.forward_inputs is None:
            continue
        intermediates: _Intermediates | None = None
        for write in writer.ctx_writes:
            if write.value.kind is not Kind.TENSOR:
                continue
            if read is None:
                read = _ctx_reads(method)
                if read is None:
                    return None
            if write.attribute not in read:
                continue
            if intermediates is None:
                intermediates = _Intermediates(function, writer)
            name = write.value.name
            if name is not None and not intermediates.is_intermediate_name(name):
                continue
            if name is None and not _written_value_is_intermediate(writer, write.attribute, intermediates):
                continue
            assert method.semantic is not None and method.ctx_name is not None
            return _Intermediate(
                f"it reads ctx.{write.attribute}, a tensor computed from the inputs in "
                f"{writer.name} on line {write.position.line}; it has no autograd history",
                tuple(method.semantic.attribute_loads(method.ctx_name, {write.attribute})),
            )
    return None


_ONCE_DIFFERENTIABLE = ("torch.autograd.function.once_differentiable", "torch.autograd.once_differentiable")


class AddOnceDifferentiable(Fixer):
    """Adds ``@once_differentiable`` (innermost, right above the ``def``) to a reported
    backward or vjp, importing it from ``torch.autograd.function`` when needed.
    Unsafe: a double backward then raises instead of giving a wrong value.  Left alone:
    a ``@classmethod`` (the wrapper would take ``cls`` for ctx) and a module where the
    name ``once_differentiable`` is bound to something else."""

    def __init__(self, analysis: "FileAnalysis", diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__(analysis, diagnostics)
        bound = analysis.imports.aliases.get("once_differentiable")
        usable = bound is None or bound in _ONCE_DIFFERENTIABLE
        # Lines of the `def`s to decorate.
        self.targets = {
            method.position.line
            for function in analysis.functions
            for name, method in function.methods.items()
            if usable
            and name in ("backward", "vjp")
            and method.defined_in == function.qualname
            and not method.is_classmethod
            and method.position.line in self.lines
        }

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if self.position(original_node.name).line not in self.targets:
            return updated_node
        self.needed_imports.append(ImportRef("torch.autograd.function", "once_differentiable"))
        decorator = cst.Decorator(cst.Name("once_differentiable"))
        return updated_node.with_changes(decorators=[*updated_node.decorators, decorator])


def _written_value_is_intermediate(writer: MethodSpec, attribute: str, intermediates: _Intermediates) -> bool:
    """For ``ctx.<attribute> = <expression>``: whether that expression is a computation on the inputs."""
    model = writer.semantic
    if model is None:
        return False
    return any(
        flow.owner == writer.ctx_name and flow.detail == attribute and flow.index is None
        and intermediates.is_intermediate_value(flow.expr)
        for flow in model.flows_to(Sink.CTX_ATTRIBUTE)
    )
