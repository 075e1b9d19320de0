"""Building :class:`~autograd_lint.model.spec.FunctionSpec` values from parsed libcst code.

The input is a :class:`ParsedUnit`: a whole module, or one class block cut out by
:mod:`autograd_lint.model.locate`, with the offsets that map its positions back to the
file.  :func:`extract_functions` resolves every class's bases, keeps the
Function subclasses and describes each one.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange

from autograd_lint.model import incremental, semantic, traverse
from autograd_lint.model.cst_parse import parse_for_analysis
from autograd_lint.model.exprs import dotted_name, is_literal, is_none
from autograd_lint.model.flow import return_statements as flow_returns
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.locate import scope_prefix
from autograd_lint.model.positions import positions
from autograd_lint.model.source import split_lines
from autograd_lint.model.spec import (
    FUNCTION_BASES,
    FUNCTION_METHODS,
    CtxCall,
    CtxRead,
    CtxWrite,
    Decorator,
    Expr,
    FunctionSpec,
    Kind,
    MethodSpec,
    Param,
    ParamKind,
    Position,
    Return,
)

# Bases that add no methods a rule could miss.
NEUTRAL_BASES = frozenset({"builtins.object", "typing.Generic", "abc.ABC"})
CTX_ATTRIBUTES_READ = frozenset({"saved_tensors", "saved_variables", "needs_input_grad", "to_save"})


@dataclass
class ParsedUnit:
    """Parsed code and the offsets that place it in its file."""

    path: str
    module: cst.Module
    line_offset: int = 0
    column_offset: int = 0
    enclosing: tuple[tuple[str, str], ...] = ()
    _positions: Mapping[cst.CSTNode, CodeRange] = field(default_factory=dict, repr=False)
    # For code made of lines picked from the file: the file's line of each line (1-based).
    line_map: Sequence[int] | None = field(default=None, repr=False)
    # Columns a line lost when it was rewritten for libcst (model.cst_parse), by line of ``module``.
    column_shifts: Mapping[int, int] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(
        cls,
        path: str,
        source: str,
        line_offset: int = 0,
        column_offset: int = 0,
        enclosing: tuple[tuple[str, str], ...] = (),
        line_map: Sequence[int] | None = None,
        column_shifts: Mapping[int, int] | None = None,
    ) -> "ParsedUnit":
        """Parse ``source``; raises ``libcst.ParserSyntaxError`` when it is not valid.

        ``line_map`` gives the file's line of each line of ``source`` (whose lines are
        then the file's lines, picked in order), instead of ``line_offset``;
        ``column_shifts``, the characters removed from the start of some lines beyond
        ``column_offset`` (form feeds: see :func:`~autograd_lint.model.locate.class_block`).
        """
        readable = parse_for_analysis(source)
        shifts = dict(column_shifts or {})
        for line, shift in readable.column_shifts.items():
            shifts[line] = shifts.get(line, 0) + shift
        unit = cls(path, readable.module, line_offset, column_offset, enclosing, line_map=line_map,
                   column_shifts=shifts)
        unit._pending = True  # positions are computed when first asked for
        return unit

    @property
    def _table(self) -> Mapping[cst.CSTNode, CodeRange]:
        if self.__dict__.pop("_pending", False):
            # A module made of parts kept by text has their positions kept with them.
            kept = incremental.table(self.module)
            self._positions = kept if kept is not None else positions(self.module)
        return self._positions

    @property
    def has_positions(self) -> bool:
        """Whether :attr:`ranges` is computed already."""
        return not self.__dict__.get("_pending", False)

    @property
    def ranges(self) -> Mapping[cst.CSTNode, CodeRange]:
        """Each node's range in :attr:`module`'s own lines and columns (computed once, when first asked)."""
        return self._table

    def _line(self, line: int) -> int:
        if self.line_map is not None:
            return self.line_map[min(line, len(self.line_map)) - 1]
        return line + self.line_offset

    def position(self, node: cst.CSTNode) -> Position:
        start = self._table[node].start
        column = start.column + self.column_offset + self.column_shifts.get(start.line, 0)
        return Position(self._line(start.line), column)

    def add_positions(self, original: cst.CSTNode, made: Sequence[cst.CSTNode]) -> None:
        """Give nodes built from ``original`` (not parsed from the file) its position."""
        table = self._table
        self._positions = ChainMap({node: table[original] for node in made}, table)

    def end_line(self, node: cst.CSTNode) -> int:
        return self._line(self._table[node].end.line)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


@dataclass
class Extraction:
    """The Functions of some units, the unit each came from, and the bases left open.

    ``open_refs`` holds the qualified names of bases that resolved to something not
    (yet) known to be a Function, so that the caller can analyse the file again
    when one of them turns out to be a Function in another file.
    """

    functions: list[FunctionSpec]
    units: dict[str, ParsedUnit]
    open_refs: set[str]


@dataclass
class ClassInfo:
    """A class definition found in a unit, before it is known to be a Function."""

    node: cst.ClassDef
    qualname: str
    unit: ParsedUnit
    base_texts: tuple[str, ...]
    resolved: list[str | None] = field(default_factory=list)


def _walk_classes(
    body: Sequence[cst.CSTNode], prefix: str, unit: ParsedUnit
) -> Iterator[ClassInfo]:
    for statement in body:
        if isinstance(statement, cst.ClassDef):
            qualname = f"{prefix}{statement.name.value}"
            bases = tuple(
                dotted_name(arg.value) or unit.code(arg.value)
                for arg in statement.bases
                if arg.keyword is None and arg.star == ""
            )
            yield ClassInfo(statement, qualname, unit, bases)
            yield from _walk_classes(_block(statement.body), f"{qualname}.", unit)
        elif isinstance(statement, (cst.FunctionDef,)):
            yield from _walk_classes(
                _block(statement.body), f"{prefix}{statement.name.value}.<locals>.", unit
            )
        elif isinstance(statement, (cst.If, cst.Try, cst.TryStar, cst.With, cst.For, cst.While, cst.Match)):
            for child in _compound_bodies(statement):
                yield from _walk_classes(child, prefix, unit)


def _block(body: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return body.body if isinstance(body, cst.IndentedBlock) else ()


def _compound_bodies(statement: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    for name in ("body", "orelse", "finalbody"):
        child = getattr(statement, name, None)
        if isinstance(child, cst.BaseSuite):
            yield _block(child)
        elif child is not None and hasattr(child, "body"):
            yield _block(child.body)
    for handler in getattr(statement, "handlers", ()):
        yield _block(handler.body)
    for case in getattr(statement, "cases", ()):
        yield _block(case.body)


def extract_functions(
    units: Sequence[ParsedUnit],
    imports: ImportMap,
    module: str | None,
    known: Mapping[str, FunctionSpec],
    extra_bases: frozenset[str] = frozenset(),
) -> Extraction:
    """The Function subclasses defined in ``units``.

    ``known`` maps the full names of Functions found in other files of the run to
    their specs.
    """
    classes = [c for u in units for c in _walk_classes(u.module.body, scope_prefix(u.enclosing), u)]
    by_qualname: dict[str, list[ClassInfo]] = {}
    for info in classes:
        by_qualname.setdefault(info.qualname, []).append(info)
    function_bases = FUNCTION_BASES | extra_bases
    # Keyed by node: two classes of one name in one scope (a common test pattern) are two Functions.
    specs: dict[cst.ClassDef, FunctionSpec] = {}
    open_refs: set[str] = set()

    changed = True
    while changed:
        changed = False
        for info in classes:
            if info.node in specs:
                continue
            is_function = False
            complete = True
            base_specs: list[FunctionSpec] = []
            resolved_names: list[str] = []
            for text in info.base_texts:
                local = _visible_class(text, info, by_qualname)
                qualified = imports.resolve(text) if local is None else None
                if local is not None:
                    resolved_names.append(f"{module}.{local.qualname}" if module else local.qualname)
                    if local.node in specs:
                        is_function = True
                        base_specs.append(specs[local.node])
                    else:
                        complete = False
                elif qualified in function_bases:
                    is_function = True
                    resolved_names.append(qualified)
                elif qualified is not None and qualified in known:
                    is_function = True
                    base_specs.append(known[qualified])
                    resolved_names.append(qualified)
                else:
                    resolved_names.append(qualified or text)
                    if qualified not in NEUTRAL_BASES:
                        complete = False
                    if qualified is not None and not qualified.startswith("builtins."):
                        open_refs.add(qualified)
            if is_function:
                specs[info.node] = _describe(
                    info, imports, module, tuple(resolved_names), tuple(base_specs), complete
                )
                changed = True
    ordered = sorted(specs.values(), key=lambda s: (s.position.line, s.position.column))
    units_by_name = {info.qualname: info.unit for info in classes if info.node in specs}
    return Extraction(ordered, units_by_name, open_refs)


def _visible_class(text: str, user: ClassInfo, by_qualname: Mapping[str, list[ClassInfo]]) -> ClassInfo | None:
    """The class of this file that the base ``text``, written in ``user``'s header, names.

    As Python looks names up: in the scope holding the ``class`` statement, then in
    the enclosing functions' scopes (not enclosing class bodies), then the module.
    Of several classes of that name in one scope, the last one defined before
    ``user`` (else the first after it, for a base referred to at call time).
    """
    scope = user.qualname[: len(user.qualname) - len(user.node.name.value)]
    line = user.unit.position(user.node).line
    parts = scope.split(".")[:-1]
    prefixes = [scope]
    prefixes += [".".join(parts[:end]) + "." for end in range(len(parts) - 1, 0, -1) if parts[end - 1] == "<locals>"]
    if scope:
        prefixes.append("")
    for prefix in prefixes:
        options = [c for c in by_qualname.get(prefix + text, ()) if c is not user]
        if options:
            lines = [c.unit.position(c.node).line for c in options]
            before = [c for c, at in zip(options, lines) if at < line]
            return before[-1] if before else options[0]
    return None


def _describe(
    info: ClassInfo,
    imports: ImportMap,
    module: str | None,
    bases: tuple[str, ...],
    base_specs: tuple[FunctionSpec, ...],
    complete: bool,
) -> FunctionSpec:
    unit = info.unit
    spec = FunctionSpec(
        name=info.node.name.value,
        qualname=info.qualname,
        module=module,
        path=unit.path,
        position=unit.position(info.node),
        last_line=unit.end_line(info.node),
        bases=bases,
        base_specs=base_specs,
        complete=complete,
        decorators=tuple(unit.code(d.decorator) for d in info.node.decorators),
    )
    defs = {
        s.name.value: s
        for s in _block(info.node.body)
        if isinstance(s, cst.FunctionDef) and s.name.value in FUNCTION_METHODS
    }
    graded = _graded_inputs(defs, is_plain=not base_specs and complete)
    # forward first: setup_context's `output` is a tensor when forward returns only tensors.
    if "forward" in defs:
        spec.methods["forward"] = MethodBuilder(defs["forward"], unit, imports, spec, graded).build()
    output_is_tensor = _returns_one_tensor(spec.methods.get("forward"))
    for statement in _block(info.node.body):
        if isinstance(statement, cst.FunctionDef) and statement.name.value in FUNCTION_METHODS:
            name = statement.name.value
            if name == "forward":
                continue
            tensor_params: frozenset[str] = frozenset()
            if name == "setup_context" and output_is_tensor:
                positional = [*statement.params.posonly_params, *statement.params.params]
                tensor_params = frozenset(p.name.value for p in positional[2:3])
            spec.methods[name] = MethodBuilder(statement, unit, imports, spec, tensor_params).build()
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                target = None
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    target = small.targets[0].target
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    target = small.target
                if isinstance(target, cst.Name) and small.value is not None:
                    kind = Kind.NONE if is_none(small.value) else (
                        Kind.NON_TENSOR if is_literal(small.value) else Kind.UNKNOWN
                    )
                    spec.class_attributes[target.value] = Expr(
                        unit.code(small.value), kind, None, unit.position(small)
                    )
    return spec


def _returns_one_tensor(forward: MethodSpec | None) -> bool:
    """Whether every ``return`` of forward gives one tensor."""
    return forward is not None and bool(forward.returns) and all(
        r.elements is None and r.value is not None and r.value.kind.is_tensor for r in forward.returns
    )


def _graded_inputs(defs: Mapping[str, cst.FunctionDef], is_plain: bool) -> frozenset[str]:
    """forward's parameters that backward gives a gradient (a tuple element other than
    ``None``): evidence that they are tensors, from tuples as long as forward's inputs
    (extra elements all ``None``, as torch accepts).  Only when forward and backward are both
    in this class and the class derives from torch's Function directly, so that the
    style (and so which parameter is the i-th input) is certain."""
    forward = defs.get("forward")
    backward = defs.get("backward") or defs.get("vjp")
    if forward is None or backward is None or not is_plain:
        return frozenset()
    params = forward.params
    if params.star_arg is not None and isinstance(params.star_arg, cst.Param):
        return frozenset()
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    inputs = positional if "setup_context" in defs else positional[1:]
    found: set[str] = set()
    for ret in flow_returns(backward):
        value = ret.value
        if value is None:
            continue
        if isinstance(value, cst.Tuple):
            if any(isinstance(e, cst.StarredElement) for e in value.elements):
                continue
            elements = [e.value for e in value.elements]
            if len(elements) < len(inputs) or not all(is_none(e) for e in elements[len(inputs) :]):
                # A wrong count raises in backward (AGL001): its positions say nothing.
                continue
        elif len(inputs) == 1:
            elements = [value]  # anything else may be a tuple: `(None,) + (g,)`, `helper(g)`
        else:
            continue
        for index, element in enumerate(elements):
            if index < len(inputs) and not is_none(element) and not is_literal(element):
                found.add(inputs[index])
    return frozenset(found)


def _is_single_value(node: cst.BaseExpression) -> bool:
    """Arithmetic that can't be tuple concatenation or repetition gives a single tensor."""
    if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
        return True
    return isinstance(node, cst.BinaryOperation) and not isinstance(
        node.operator, (cst.Add, cst.Multiply, cst.Modulo)
    )


class _BodyVisitor(cst.CSTVisitor):
    """Collects what a method body does, without entering nested scopes."""

    def __init__(self, builder: "MethodBuilder") -> None:
        self.b = builder
        self.loop_depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.b.node

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _enter_loop(self, node: cst.CSTNode) -> bool:
        self.loop_depth += 1
        return True

    def _leave_loop(self, node: cst.CSTNode) -> None:
        self.loop_depth -= 1

    visit_While = visit_ListComp = visit_SetComp = _enter_loop  # type: ignore[assignment]
    visit_DictComp = visit_GeneratorExp = _enter_loop  # type: ignore[assignment]
    leave_For = leave_While = leave_ListComp = leave_SetComp = _leave_loop  # type: ignore[assignment]
    leave_DictComp = leave_GeneratorExp = _leave_loop  # type: ignore[assignment]

    def visit_Return(self, node: cst.Return) -> None:
        self.b.return_nodes.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.b.ctx_targets(target.target, node.value)
        if self.b.is_ctx_read(node.value, "saved_tensors", "saved_variables"):
            self.b.saved_reads_assigned[node.value] = tuple(t.target for t in node.targets)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.b.ctx_targets(node.target, node.value)

    def visit_For(self, node: cst.For) -> bool:  # type: ignore[override]
        return self._enter_loop(node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            if func.value.value == self.b.ctx and self.b.ctx is not None:
                self.b.call_nodes.append(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.b.is_ctx_read(node.value, "needs_input_grad") and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                self.b.index_nodes.append((node, int(index.value.value, 0)))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.b.is_ctx_attr(node) and node.attr.value in CTX_ATTRIBUTES_READ:
            self.b.read_nodes.append((node, self.loop_depth > 0))


class MethodBuilder:
    """Describes one method of a Function class as a :class:`MethodSpec`."""

    def __init__(
        self,
        node: cst.FunctionDef,
        unit: ParsedUnit,
        imports: ImportMap,
        owner: FunctionSpec,
        tensor_params: frozenset[str] = frozenset(),
        role: str | None = None,
    ) -> None:
        """``role`` is the method PyTorch calls the function as, when its name doesn't say
        (a custom op's registered backward: ``role="backward"``)."""
        self.node = node
        self.role = role or node.name.value
        self.unit = unit
        self.imports = imports
        self.owner = owner
        self.decorators = tuple(self._decorator(d) for d in node.decorators)
        self.params = self._params()
        is_classmethod = any(d.qualified_name == "builtins.classmethod" for d in self.decorators)
        positional = [p for p in self.params if p.is_positional]
        ctx_index = 1 if is_classmethod else 0
        self.ctx: str | None = positional[ctx_index].name if len(positional) > ctx_index else None
        self.return_nodes: list[cst.Return] = []
        self.call_nodes: list[cst.Call] = []
        self.read_nodes: list[tuple[cst.Attribute, bool]] = []
        self.write_nodes: list[tuple[str, cst.BaseExpression | None, cst.CSTNode]] = []
        self.saved_reads_assigned: dict[cst.BaseExpression, tuple[cst.BaseExpression, ...]] = {}
        self.index_nodes: list[tuple[cst.Subscript, int]] = []  # ctx.needs_input_grad[k]
        traverse.visit(node, _BodyVisitor(self))
        self.semantic = semantic.build(
            node,
            imports,
            skip=ctx_index,
            declared=self._declared_kinds(positional, ctx_index),
            tensor_params=tensor_params,
        )
        self.param_kinds = {
            p.name: self.semantic.param_kind(p.name)
            for p in positional
            if p.name != self.ctx or self.role == "forward"
        }

    # -- small pieces -----------------------------------------------------------
    def _decorator(self, decorator: cst.Decorator) -> Decorator:
        expr = decorator.decorator
        call = expr if isinstance(expr, cst.Call) else None
        target = call.func if call else expr
        name = dotted_name(target)
        return Decorator(
            text=self.unit.code(expr),
            qualified_name=self.imports.resolve(name) if name else None,
            is_call=call is not None,
            keywords=tuple(a.keyword.value for a in call.args if a.keyword) if call else (),
            position=self.unit.position(decorator),
        )

    def _params(self) -> tuple[Param, ...]:
        parameters = self.node.params
        result: list[Param] = []

        def add(param: cst.Param, kind: ParamKind) -> None:
            annotation = self.unit.code(param.annotation.annotation) if param.annotation else None
            default = None
            if param.default is not None:
                default_kind = (
                    Kind.NONE
                    if is_none(param.default)
                    else Kind.NON_TENSOR if is_literal(param.default) else Kind.UNKNOWN
                )
                default = Expr(self.unit.code(param.default), default_kind)
            result.append(Param(param.name.value, kind, annotation, default))

        for param in parameters.posonly_params:
            add(param, ParamKind.POSITIONAL_ONLY)
        for param in parameters.params:
            add(param, ParamKind.POSITIONAL)
        if isinstance(parameters.star_arg, cst.Param):
            add(parameters.star_arg, ParamKind.VAR_POSITIONAL)
        for param in parameters.kwonly_params:
            add(param, ParamKind.KEYWORD_ONLY)
        if parameters.star_kwarg is not None:
            add(parameters.star_kwarg, ParamKind.VAR_KEYWORD)
        return tuple(result)

    def is_ctx_attr(self, node: cst.BaseExpression) -> bool:
        return (
            self.ctx is not None
            and isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == self.ctx
        )

    def is_ctx_read(self, node: cst.BaseExpression, *attributes: str) -> bool:
        return self.is_ctx_attr(node) and node.attr.value in attributes  # type: ignore[attr-defined]

    def ctx_targets(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if self.is_ctx_attr(target):
            self.write_nodes.append((target.attr.value, value, target))  # type: ignore[attr-defined]
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: Sequence[cst.BaseExpression | None]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                values = [e.value for e in value.elements]
            else:
                values = [None] * len(target.elements)
            for element, element_value in zip(target.elements, values):
                if self.is_ctx_attr(element.value):
                    attr = element.value.attr.value  # type: ignore[attr-defined]
                    self.write_nodes.append((attr, element_value, element.value))

    # -- name kinds ---------------------------------------------------------------
    def _declared_kinds(self, positional: Sequence[Param], ctx_index: int) -> dict[str, Kind]:
        """Kinds known from the method's role: backward/vjp's gradient parameters are tensors
        (``None`` only with ``set_materialize_grads(False)``, which AGL012 checks)."""
        if self.role not in ("backward", "vjp"):
            return {}
        grads = positional[ctx_index + 1 :]
        return {p.name: Kind.TENSOR for p in grads if not p.annotation}

    # -- the spec -------------------------------------------------------------------
    def summarize(self, node: cst.BaseExpression) -> Expr:
        name = node.value if isinstance(node, cst.Name) else None
        return Expr(self.unit.code(node), self.semantic.kind(node), name, self.unit.position(node))

    def _single_tuple(self, name: cst.Name) -> cst.Tuple | None:
        """The tuple literal ``name`` holds where it is returned, when only one binding reaches it."""
        reaching = [b for b in self.semantic.reaching(name) if b.how is not semantic.How.NARROWING]
        if len(reaching) == 1 and isinstance(reaching[0].value, cst.Tuple):
            return reaching[0].value
        return None

    def _return(self, node: cst.Return) -> Return:
        position = self.unit.position(node)
        value = node.value
        if value is None:
            return Return(position, None, None, "bare")
        summary = self.summarize(value)
        tuple_node: cst.Tuple | None = value if isinstance(value, cst.Tuple) else None
        shape = "tuple"
        if isinstance(value, cst.Name) and tuple_node is None:
            tuple_node = self._single_tuple(value)
            shape = "tuple" if tuple_node is not None else "name"
        counted = self.semantic.return_of(node) if tuple_node is None else None
        if counted is not None and counted.elements is not None and not isinstance(value, cst.Name):
            # A tuple no literal spells: `(None,) * 2 + (dx,)`, `tuple(results)` of a built list.
            return Return(position, summary, tuple(self.summarize(e) for e in counted.elements), "tuple")
        if tuple_node is None and summary.kind is not Kind.TENSOR and _is_single_value(value):
            summary = Expr(summary.text, Kind.TENSOR, summary.name, summary.position)
        if tuple_node is not None:
            if any(isinstance(e, cst.StarredElement) for e in tuple_node.elements):
                return Return(position, summary, None, "tuple-starred")
            elements = tuple(self.summarize(e.value) for e in tuple_node.elements)
            return Return(position, summary, elements, shape)
        if is_none(value):
            shape = "none"
        elif isinstance(value, cst.List):
            shape = "list"
        elif isinstance(value, cst.ListComp):
            shape = "listcomp"
        elif isinstance(value, cst.GeneratorExp):
            shape = "genexp"
        elif isinstance(value, (cst.Dict, cst.DictComp)):
            shape = "dict"
        elif isinstance(value, (cst.Set, cst.SetComp)):
            shape = "set"
        elif isinstance(value, cst.Call) and dotted_name(value.func) == "list":
            shape = "call:list"
        elif shape != "name":
            shape = "other"
        return Return(position, summary, None, shape)

    def _ctx_call(self, node: cst.Call) -> CtxCall:
        args = tuple(self.summarize(a.value) for a in node.args if a.keyword is None and not a.star)
        return CtxCall(
            api=node.func.attr.value,  # type: ignore[attr-defined]
            args=args,
            has_starred=any(a.star for a in node.args),
            position=self.unit.position(node),
        )

    def _ctx_read(self, node: cst.Attribute, in_loop: bool) -> CtxRead:
        attribute = node.attr.value
        targets: tuple[str, ...] | None = None
        is_sequence = False
        for value, assigned in self.saved_reads_assigned.items():
            if value is node and len(assigned) == 1:
                target = assigned[0]
                if isinstance(target, (cst.Tuple, cst.List)):
                    is_sequence = True
                    targets = tuple(self.unit.code(e.value) for e in target.elements)
                elif isinstance(target, cst.Name):
                    targets = (target.value,)
        return CtxRead(attribute, self.unit.position(node), targets, is_sequence, None, in_loop)

    def build(self) -> MethodSpec:
        reads = [self._ctx_read(node, in_loop) for node, in_loop in self.read_nodes]
        reads.extend(
            CtxRead("needs_input_grad[]", self.unit.position(node), index=index)
            for node, index in self.index_nodes
        )
        return MethodSpec(
            name=self.node.name.value,
            params=self.params,
            decorators=self.decorators,
            position=self._def_position(),
            first_line=self.unit.position(self.node).line,
            last_line=self.unit.end_line(self.node),
            defined_in=self.owner.qualname,
            path=self.unit.path,
            returns=tuple(self._return(r) for r in self.return_nodes),
            ctx_calls=tuple(self._ctx_call(c) for c in self.call_nodes),
            ctx_writes=tuple(
                CtxWrite(
                    attr,
                    self.summarize(value) if value is not None else Expr("...", Kind.UNKNOWN),
                    self.unit.position(target),
                    self._literal_elements(value),
                )
                for attr, value, target in self.write_nodes
            ),
            ctx_reads=tuple(sorted(reads, key=lambda r: (r.position.line, r.position.column))),
            param_kinds=self.param_kinds,
            node=self.node,
            semantic=self.semantic,
        )

    def _literal_elements(self, value: cst.BaseExpression | None) -> tuple[Expr, ...] | None:
        """The summarised elements of a list or tuple literal without a starred element."""
        if not isinstance(value, (cst.List, cst.Tuple)):
            return None
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return None
        return tuple(self.summarize(e.value) for e in value.elements)

    def _def_position(self) -> Position:
        # The `def` keyword, not the first decorator.
        name = self.unit.position(self.node.name)
        gap = len(self.node.whitespace_after_def.value)
        return Position(name.line, max(name.column - len("def") - gap, 0))


def is_decorated(function: FunctionSpec, text: str) -> bool:
    """Whether the class statement of ``function`` has a decorator.

    Read from the source text as well as the node: a class parsed as a block on its
    own starts at its ``class`` line, after its decorators.
    """
    if function.decorators:
        return True
    lines = split_lines(text)
    index = function.position.line - 2
    while index >= 0:
        line = lines[index].strip()
        if line and not line.startswith("#"):
            return line.startswith("@")
        index -= 1
    return False
