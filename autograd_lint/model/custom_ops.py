"""The model of custom operators: ``torch.library.custom_op`` / ``triton_op`` and their registrations.

A :class:`CustomOpSpec` describes one operator defined with the decorator
(``@custom_op("ns::name", mutates_args=...)``, any import or alias of
``torch.library.custom_op``) or the call form (``op = custom_op("ns::name",
fn, mutates_args=...)``, ``op = custom_op("ns::name", mutates_args=())(fn)``):
its Python function's parameters and annotations, ``mutates_args``, ``tags``
and whether a ``schema=`` replaces the inferred one.

A :class:`Registration` is what a file registers on an operator, found in any of
the forms PyTorch accepts: ``@op.register_fake``, ``op.register_autograd(bw,
setup_context=sc)``, ``@torch.library.register_fake("ns::name")``,
``torch.library.register_autograd("ns::name", bw, setup_context=sc)``,
``register_kernel`` / ``impl`` / ``impl_abstract``.  Registrations name their op
by its ``"ns::name"`` string, by ``torch.ops.ns.name``, or by the Python object
(resolved through imports), so a registration in one file links to an op of
another file of the run (:func:`link`).

Operators of the older ``torch.library.Library(...).define`` API and
``torch.library.define`` are recorded by name only (:attr:`CustomOpModule.defined_names`):
registrations on them are linked to nothing, and no rule reads their signature.

Nothing here imports torch; the functions registered are described as
:class:`~autograd_lint.model.spec.MethodSpec` values by the same builder that
describes a Function's methods, so the rules about ``ctx`` read both alike.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import replace
from typing import Callable, Iterator, Sequence

import libcst as cst

from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.extract import MethodBuilder, ParsedUnit
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.locate import Statements, mentions_custom_op  # noqa: F401  (the gate, re-exported)
from autograd_lint.model.source import split_lines
from autograd_lint.model.op_spec import CustomOpModule, CustomOpSpec, OpFunction, Registration, RunCustomOps
from autograd_lint.model.spec import FunctionSpec, MethodSpec, Param, ParamKind, Position

CUSTOM_OP_FACTORIES = frozenset(
    {
        "torch.library.custom_op",
        "torch._library.custom_ops.custom_op",
        "torch._library.custom_op",
    }
)
TRITON_OP_FACTORIES = frozenset({"torch.library.triton_op", "torch._library.triton.triton_op"})
# torch.library functions that register on an op named by their first argument.
LIBRARY_REGISTRARS = {
    "torch.library.register_autograd": "autograd",
    "torch.library.register_fake": "fake",
    "torch.library.impl_abstract": "fake",
    "torch.library.register_kernel": "kernel",
    "torch.library.impl": "kernel",
    "torch.library.register_torch_dispatch": "other",
    "torch.library.register_vmap": "other",
    "torch.library.register_autocast": "other",
}
# Methods of a CustomOpDef that register on it.
OP_METHODS = {
    "register_autograd": "autograd",
    "register_fake": "fake",
    "register_kernel": "kernel",
    "register_torch_dispatch": "other",
    "register_vmap": "other",
    "register_autocast": "other",
}
LIBRARY_CLASSES = frozenset({"torch.library.Library"})
LIBRARY_DEFINE = "torch.library.define"
# The names a module may bind to a local alias by assignment.
_ALIASABLE = CUSTOM_OP_FACTORIES | TRITON_OP_FACTORIES | frozenset(LIBRARY_REGISTRARS) | {LIBRARY_DEFINE}
# Words without which a file cannot define or register a custom op.
_OP_NAME = re.compile(r"^[A-Za-z_]\w*::[A-Za-z_][\w.]*$")


# The last part of every name the finder resolves to something it reads: a statement
# that can define an op, register on one, define a Library op or alias one of those
# names spells one of these words in its code, or a local name bound to one (``co``).
_FINDER_NAMES = CUSTOM_OP_FACTORIES | TRITON_OP_FACTORIES | _ALIASABLE | LIBRARY_CLASSES
_FINDER_WORDS = frozenset(name.rpartition(".")[2] for name in _FINDER_NAMES) | frozenset(OP_METHODS) | {"define"}
_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")  # not an attribute: `a.b` spells `a`
_DEF_NAME = re.compile(r"\bdef[ \t]+([A-Za-z_]\w*)")
# A statement-level assignment whose value may be a bare dotted name (the finder's
# alias form ``name = torch.library.register_fake``): from ``=``, group 1 what follows
# on its line when that is parentheses, a dotted name and a backslash at most (group 2);
# then what precedes ``=`` on its line must be the name, perhaps annotated.
_ALIAS_VALUE = re.compile(
    r"=([ \t(]*(?:[A-Za-z_]\w*(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*)?[ \t().]*)(\\?)[ \t]*(?:#[^\n]*)?\r?$", re.MULTILINE
)
_ALIAS_TARGET = re.compile(r"(?:.*;)?[ \t\f]*([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?")


def custom_op_source(text: str, imports: ImportMap) -> tuple[str, list[int] | None] | None:
    """The lines of ``text`` that hold the statements the custom-op finder can read
    anything from, and the file's line of each (1-based); ``None`` when no statement
    can matter (the file has no custom op).  ``(text, None)`` when the statements can't
    be told apart by a text scan.

    A statement matters when its code (strings and comments left out) names something
    the finder resolves, where a statement's value or a decorator starts: an attribute
    spelled as one of :data:`_FINDER_WORDS` (``torch.library.impl``,
    ``op.register_fake``, ``lib.define``), or a bare name imported as one of them or
    assigned a bare dotted name that is one (to a fixed point); or when it holds a
    ``def`` whose name a statement that matters spells outside an attribute (a
    function handed to a registration or to a call-form op: every ``def`` of that
    name, so that the finder's "the only ``def`` of that name" reads as in the whole
    module).  A ``class``, or a ``def`` that no decorator or name
    makes an op or a registered function, keeps its header and, of its body, what
    matters; every other statement that matters is kept whole, lines and columns as
    in the file.
    """
    lines = split_lines(text)
    # The statement scan (which finds the strings and comments) is made on first need:
    # a file whose text has no hit and no alias of a finder name never needs it.
    scans: list[Statements] = []

    def in_code(offset: int) -> bool:
        if not scans:
            scans.append(Statements(text, lines))
        scan = scans[0]
        inside = bisect.bisect_right(scan.span_starts, offset) - 1
        return inside < 0 or scan.spans[inside][1] <= offset

    # Bare names bound to what the finder reads: imports, then aliases, to a fixed point.
    local = {
        name
        for name, qualified in imports.aliases.items()
        if qualified in _FINDER_NAMES or qualified.rpartition(".")[2] in _FINDER_WORDS
    }
    aliases = []  # (name, value, offset): whether the offset is in the code is asked last
    for match in _ALIAS_VALUE.finditer(text):
        target = _ALIAS_TARGET.fullmatch(text, text.rfind("\n", 0, match.start()) + 1, match.start())
        if target is None:
            continue
        value = match.group(1)
        if match.group(2) or not value.strip(" \t("):
            value = _COMMENT.sub("", _value_after(text, match.start(1)))  # the value goes on over lines
            if _DOTTED_VALUE.fullmatch(value) is None:
                continue
        aliases.append((target.group(1), value, match.start()))
    while True:
        pattern = _hits_pattern(local)
        new = {
            name
            for name, value, offset in aliases
            if name not in local and pattern.search(value) and in_code(offset)
        }
        if not new:
            break
        local |= new
    # The finder reads a name only where it starts a statement's value or a decorator.
    hits = [m.start() for m in pattern.finditer(text) if _starts_value(text, m.start()) and in_code(m.start())]
    if not hits:
        return None
    defs = [(m.start(1), m.group(1)) for m in _DEF_NAME.finditer(text) if in_code(m.start())]
    scan = scans[0]
    spelled: set[str] = set()
    while True:
        selection = _Selection(scan, in_code, hits, sorted(offset for offset, name in defs if name in spelled), spelled)
        if not selection.select(0, len(lines), ""):
            return text, None
        if selection.spelled <= spelled:
            break
        spelled = selection.spelled
    kept = [index for index, keep in enumerate(selection.keep_line) if keep]
    return "".join(lines[index] for index in kept), [index + 1 for index in kept]


_ATTRIBUTE_WORDS = r"\.[ \t]*(?:" + "|".join(sorted(_FINDER_WORDS)) + r")\b"


@functools.lru_cache(maxsize=64)
def _hits_pattern_for(local: frozenset[str]) -> re.Pattern[str]:
    if not local:
        return re.compile(_ATTRIBUTE_WORDS)
    # The lookahead on first characters lets the engine skip most positions at once.
    first = "".join(sorted({re.escape(name[0]) for name in local} | {r"\."}))
    names = "|".join(map(re.escape, sorted(local)))
    return re.compile(rf"(?=[{first}])(?:{_ATTRIBUTE_WORDS}|(?<![\w.])(?:{names})\b)")


def _hits_pattern(local: set[str]) -> re.Pattern[str]:
    """Where the finder may read something: an attribute named as one of its words, or a
    bare ``local`` name."""
    return _hits_pattern_for(frozenset(local))


# What may precede, on its line, a name the finder reads (it reads a statement's value
# or a decorator, never a name deeper in an expression): the start of a statement
# (after others and `;`), a decorator's `@` or an assignment's target, opening
# parentheses, and for an attribute the dotted name before it (``torch.library`` in
# ``torch.library.impl``).  A line that continues a statement starts with the name or
# parentheses, and passes too.  Anything else (``return f(``, ``x +``, ``def``) starts
# an expression the finder does not read.
_VALUE_START = r"(?:.*;)?[ \t\f]*(?:@[ \t]*|[A-Za-z_]\w*[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*)?[ \t(]*"
_BEFORE_NAME = re.compile(_VALUE_START)
_BEFORE_ATTRIBUTE = re.compile(_VALUE_START + r"(?:[A-Za-z_]\w*[ \t]*\.[ \t]*)*[A-Za-z_]\w*[ \t]*")


def _starts_value(text: str, offset: int) -> bool:
    """Whether the name the match at ``offset`` spells (``.name`` or a bare name) starts a
    statement's value or a decorator."""
    before = _BEFORE_ATTRIBUTE if text.startswith(".", offset) else _BEFORE_NAME
    return before.fullmatch(text, text.rfind("\n", 0, offset) + 1, offset) is not None


def _value_after(code: str, start: int) -> str:
    """The code of an assigned value that starts at ``start`` and goes on over lines
    (brackets left open, backslashes), up to the end of its logical line."""
    depth = 0
    position = start
    while True:
        end = code.find("\n", position)
        end = len(code) if end == -1 else end
        depth += _balance(code, position, end)
        if end == len(code) or (depth <= 0 and not code[position:end].rstrip(" \t\r").endswith("\\")):
            return code[start:end]
        position = end + 1


def _balance(code: str, start: int, end: int) -> int:
    return sum(code.count(c, start, end) for c in "([{") - sum(code.count(c, start, end) for c in ")]}")


_COMMENT = re.compile(r"#[^\n]*")
_DOTTED_VALUE = re.compile(r"[\s()\\]*[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*[\s()\\]*")


class _Selection:
    """Which lines :func:`custom_op_source` keeps, for one set of spelled ``def`` names."""

    def __init__(
        self, scan: Statements, in_code: Callable[[int], bool], hits: list[int], def_hits: list[int], spelled: set[str]
    ) -> None:
        self.scan = scan
        self.in_code = in_code
        self.hits = hits  # offsets of the words in the code
        self.def_hits = def_hits  # offsets of the names of the defs to keep whole
        self.targets = sorted(hits + def_hits)
        self.names = spelled  # def names kept whole
        self.spelled: set[str] = set(spelled)  # the identifiers of the statements kept whole
        self.keep_line = [False] * len(scan.lines)
        self.offsets = scan.offsets

    @staticmethod
    def _any(offsets: list[int], start: int, end: int) -> bool:
        index = bisect.bisect_left(offsets, start)
        return index < len(offsets) and offsets[index] < end

    def select(self, first: int, end: int, indent: str, mark: bool = True) -> bool:
        """Mark what matters in the block ``first:end`` (with ``mark``), and add to
        :attr:`spelled` the names its statements that matter spell where the finder looks
        a ``def`` up: the simple statements and other compound ones, and the decorators
        of a ``def`` or ``class``, not their headers.  False when the scan can't tell the
        block's statements apart."""
        statements = self.scan.statements(first, end, indent)
        if statements is None:
            return False
        offsets = self.offsets
        for start, stop in statements:
            if not self._any(self.targets if mark else self.hits, offsets[start], offsets[stop]):
                continue
            header = self.scan.header(start, stop, indent)
            if header is None:
                if mark:
                    self.keep_line[start:stop] = [True] * (stop - start)
                self._spell(start, stop)
                continue
            keyword, name, keyword_line, body, body_indent = header
            self._spell(start, keyword_line)  # decorators
            whole = self._any(self.hits, offsets[start], offsets[keyword_line]) or (
                keyword == "def" and name in self.names
            )
            if mark and not whole and self._any(self.targets, offsets[body], offsets[stop]):
                saved = self.keep_line[body:stop]
                if self.select(body, stop, body_indent) and any(self.keep_line[body:stop]):
                    self.keep_line[start:body] = [True] * (body - start)
                    continue
                self.keep_line[body:stop] = saved
            if mark:
                self.keep_line[start:stop] = [True] * (stop - start)
            if self._any(self.hits, offsets[body], offsets[stop]) and not self.select(body, stop, body_indent, False):
                self._spell(body, stop)
        return True

    def _spell(self, first: int, end: int) -> None:
        """Add the names spelled in lines ``first:end``, if a hit is there."""
        start, stop = self.offsets[first], self.offsets[end]
        if self._any(self.hits, start, stop):
            names = _IDENTIFIER.finditer(self.scan.text, start, stop)
            self.spelled.update(match.group() for match in names if self.in_code(match.start()))


def extract_custom_ops(
    unit: ParsedUnit, imports: ImportMap, module: str | None, run: RunCustomOps | None = None
) -> CustomOpModule:
    """The custom ops defined in ``unit`` (a whole module) and every registration in it.

    With ``run`` (the other files' ops and registrations), registrations of other
    files are attached to this file's ops, and this file's registrations on other
    files' ops are paired with them in :attr:`CustomOpModule.linked`.
    """
    finder = _Finder(unit, imports, module)
    finder.run()
    result = CustomOpModule(unit=unit, defined_names=finder.library_names)
    result.has_unresolved_registration = finder.unresolved
    by_key: dict[str, CustomOpSpec] = {}
    for op in finder.ops:
        result.ops.append(op)
        for key in op.keys:
            by_key[key] = op
    for registration in finder.registrations:
        op = by_key.get(registration.target)
        if op is not None:
            op.registrations.append(registration)
        else:
            result.foreign.append(registration)
    if run is not None:
        link_custom_ops(result, run)
    return result


def link_custom_ops(module: CustomOpModule, run: RunCustomOps) -> None:
    """Complete ``module`` (found without ``run``) with the other files' ops and registrations.

    Registrations of other files are attached to this file's ops, after its own, and
    this file's registrations on other files' ops are paired with them in
    :attr:`CustomOpModule.linked`.  Done once per module: discovery finds a file's ops
    in one round and links them in the last, without parsing the file again.
    """
    assert module.unit is not None and not module.whole_run, "link a module found in this process, once"
    path = module.unit.path
    own = [registration for op in module.ops for registration in op.registrations] + module.foreign
    by_key = {key: op for op in module.ops for key in op.keys}
    module.whole_run = True
    module.has_unresolved_registration |= run.has_unresolved_registration
    module.run_targets = frozenset((r.kind, r.target) for r in (*run.registrations, *own))
    for registration in run.registrations:
        op = by_key.get(registration.target)
        if op is not None and registration.path != path:
            op.registrations.append(registration)
    elsewhere = {key: op for op in run.ops if op.path != path for key in op.keys}
    for registration in module.foreign:
        if registration.target in elsewhere:
            module.linked.append((elsewhere[registration.target], registration))


def hidden_function(op: CustomOpSpec, registration: Registration | None = None) -> FunctionSpec | None:
    """The ``autograd.Function`` PyTorch builds for ``op`` (``torch/_library/autograd.py``), as a
    split-style FunctionSpec: the op's function as forward, the registered setup_context and
    backward (none without ``registration``).  None when the op's ``def`` is not at hand."""
    if op.body is None:
        return None
    where = registration.position if registration else op.position
    path = registration.path if registration else op.path
    qualname = f"<register_autograd {op.display}>"
    spec = FunctionSpec(
        name=f"register_autograd({op.display})",
        qualname=qualname,
        module=op.module,
        path=path,
        position=where,
        last_line=where.line,
        bases=("torch.autograd.Function",),
    )
    spec.methods["forward"] = replace(op.body, name="forward", defined_in=qualname)
    setup = registration.setup_context.method if registration and registration.setup_context else None
    if setup is None:
        params = tuple(Param(n, ParamKind.POSITIONAL) for n in ("ctx", "inputs", "output"))
        setup = MethodSpec("setup_context", params, (), where, where.line, where.line, qualname, path)
    spec.methods["setup_context"] = replace(setup, name="setup_context", defined_in=qualname)
    backward = registration.function.method if registration and registration.function else None
    if backward is not None:
        spec.methods["backward"] = replace(backward, name="backward", defined_in=qualname)
    return spec


def _string(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _argument(call: cst.Call, index: int, keyword: str | None = None) -> cst.BaseExpression | None:
    """The ``index``-th positional argument of ``call``, or its ``keyword`` argument."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if any(a.star for a in call.args[: index + 1]):
        return None
    if index < len(positional):
        return positional[index].value
    if keyword is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg.value
    return None


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _string_elements(node: cst.BaseExpression) -> tuple[str, ...] | str | None:
    """A literal ``mutates_args``: a tuple/list/set of strings, "unknown", or None."""
    text = _string(node)
    if text is not None:
        return text if text == "unknown" else (text,)
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        names = []
        for element in node.elements:
            if not isinstance(element, cst.Element):
                return None
            value = _string(element.value)
            if value is None:
                return None
            names.append(value)
        return tuple(names)
    if isinstance(node, cst.Call) and dotted_name(node.func) in ("tuple", "list", "set") and not node.args:
        return ()
    return None


class _Finder:
    """One walk over a module: op definitions, registrations, Library definitions."""

    def __init__(self, unit: ParsedUnit, imports: ImportMap, module: str | None) -> None:
        self.unit = unit
        self.imports = imports
        self.module = module
        self.ops: list[CustomOpSpec] = []
        self.registrations: list[Registration] = []
        self.library_names: set[str] = set()
        self.unresolved = False
        # Local names bound to ops, and to Library objects (name -> namespace).
        self.op_names: dict[str, CustomOpSpec] = {}
        self.libraries: dict[str, str | None] = {}
        self.defs: dict[str, list[cst.FunctionDef]] = {}
        # Names assigned one of the torch.library functions (a module's own alias).
        self.assigned: dict[str, str] = {}
        # The ``def``s seen so far in each enclosing scope, innermost last.
        self.scopes: list[dict[str, cst.FunctionDef]] = []
        self._owner = FunctionSpec("<custom op>", "<custom op>", module, unit.path, Position(1, 0), 1, ())

    # -- names -----------------------------------------------------------------------
    def resolve(self, node: cst.BaseExpression) -> str | None:
        name = dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.assigned:  # `register_fake = torch.library.register_fake`
            return self.assigned[head] + (f".{rest}" if rest else "")
        return self.imports.resolve(name)

    def _factory(self, node: cst.BaseExpression) -> str | None:
        qualified = self.resolve(node)
        if qualified in CUSTOM_OP_FACTORIES:
            return "custom_op"
        if qualified in TRITON_OP_FACTORIES:
            return "triton_op"
        return None

    def target_key(self, node: cst.BaseExpression | None) -> str | None:
        """The op key an expression names: a "ns::name" string, ``torch.ops.ns.name``, or an op object."""
        if node is None:
            return None
        text = _string(node)
        if text is not None:
            return text if _OP_NAME.match(text) else None
        name = dotted_name(node)
        if name is None:
            return None
        if name in self.op_names:
            return self.op_names[name].qualified_name
        qualified = self.imports.resolve(name)
        if qualified is not None and qualified.startswith("torch.ops."):
            parts = qualified.split(".")
            if len(parts) >= 4:
                return f"{parts[2]}::{parts[3]}"
        return qualified

    # -- the walk --------------------------------------------------------------------
    def run(self) -> None:
        body = self.unit.module.body
        self._collect_defs(body)
        self._statements(body, new_scope=True)

    def _collect_defs(self, body: Sequence[cst.CSTNode]) -> None:
        for statement in body:
            if isinstance(statement, cst.FunctionDef):
                self.defs.setdefault(statement.name.value, []).append(statement)
                self._collect_defs(_block(statement.body))
            elif isinstance(
                statement, (cst.If, cst.Try, cst.TryStar, cst.With, cst.For, cst.While, cst.Match, cst.ClassDef)
            ):
                for child in _bodies(statement):
                    self._collect_defs(child)

    def _statements(self, body: Sequence[cst.CSTNode], new_scope: bool = False) -> None:
        if new_scope:
            self.scopes.append({})
        for statement in body:
            if isinstance(statement, cst.FunctionDef):
                self._function_def(statement)
                self.scopes[-1][statement.name.value] = statement
                self._statements(_block(statement.body), new_scope=True)
            elif isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self._small(small)
            elif isinstance(statement, cst.ClassDef):
                self._statements(_block(statement.body), new_scope=True)
            elif isinstance(statement, (cst.If, cst.Try, cst.TryStar, cst.With, cst.For, cst.While, cst.Match)):
                for child in _bodies(statement):
                    self._statements(child)
        if new_scope:
            self.scopes.pop()

    def _function_def(self, node: cst.FunctionDef) -> None:
        for decorator in node.decorators:
            expr = decorator.decorator
            call = expr if isinstance(expr, cst.Call) else None
            target = call.func if call is not None else expr
            factory = self._factory(target)
            if factory is not None and call is not None:
                self._define(node, node.name.value, call, factory, self.unit.position(node))
                continue
            registration = self._registration_call(call, node) if call is not None else None
            if registration is not None:
                continue
            # `@op.register_fake` without a call.
            if call is None and isinstance(expr, cst.Attribute) and expr.attr.value in OP_METHODS:
                key = self.target_key(expr.value)
                if key is not None and self._is_op_reference(expr.value):
                    self._register(OP_METHODS[expr.attr.value], key, decorator, self._op_function(node))

    def _small(self, small: cst.BaseSmallStatement) -> None:
        value: cst.BaseExpression | None = None
        target_name: str | None = None
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            value = small.value
            target = small.targets[0].target
            target_name = target.value if isinstance(target, cst.Name) else None
        elif isinstance(small, cst.AnnAssign):
            value = small.value
            target_name = small.target.value if isinstance(small.target, cst.Name) else None
        elif isinstance(small, cst.Expr):
            value = small.value
        if target_name is not None and isinstance(value, (cst.Name, cst.Attribute)):
            qualified = self.resolve(value)
            if qualified in _ALIASABLE:
                self.assigned[target_name] = qualified
            return
        if not isinstance(value, cst.Call):
            return
        if target_name is not None and self._call_form_op(value, target_name):
            return
        if target_name is not None and self.resolve(value.func) in LIBRARY_CLASSES:
            self.libraries[target_name] = _string(_argument(value, 0, "ns"))
            return
        self._library_define(value)
        self._registration_call(value, None)

    def _call_form_op(self, call: cst.Call, target_name: str) -> bool:
        """``op = custom_op("ns::name", fn, mutates_args=...)`` or ``custom_op(...)(fn)``."""
        outer: cst.Call | None = None
        if isinstance(call.func, cst.Call) and self._factory(call.func.func) is not None:
            outer, call = call, call.func
        factory = self._factory(call.func)
        if factory is None:
            return False
        function = _argument(outer, 0) if outer is not None else _argument(call, 1, "fn")
        node = self._def_named(function)
        if node is not None:
            self._define(node, target_name, call, factory, self.unit.position(call))
        return True

    def _library_define(self, call: cst.Call) -> None:
        func = call.func
        if self.resolve(func) == LIBRARY_DEFINE:
            name = _string(_argument(call, 0, "qualname"))
            if name:
                self.library_names.add(name)
        elif isinstance(func, cst.Attribute) and func.attr.value == "define":
            owner = dotted_name(func.value)
            if owner in self.libraries:
                schema = _string(_argument(call, 0, "schema")) or ""
                namespace = self.libraries[owner]
                name = schema.split("(", 1)[0].strip()
                if namespace and name:
                    self.library_names.add(f"{namespace}::{name.split('.')[0]}")

    def _def_named(self, node: cst.BaseExpression | None) -> cst.FunctionDef | None:
        """The ``def`` a name refers to: the latest one before it in an enclosing scope,
        else the only ``def`` of that name in the module."""
        if not isinstance(node, cst.Name):
            return None
        for scope in reversed(self.scopes):
            if node.value in scope:
                return scope[node.value]
        found = self.defs.get(node.value, [])
        return found[0] if len(found) == 1 else None

    def _is_op_reference(self, node: cst.BaseExpression) -> bool:
        """Whether ``x`` in ``x.register_fake`` can be an op: a known op name, or an import."""
        name = dotted_name(node)
        if name is None:
            return False
        if name in self.op_names:
            return True
        head = name.split(".")[0]
        return head in self.imports.aliases and self.imports.resolve(name) not in (None,)

    # -- op definitions --------------------------------------------------------------------
    def _define(
        self, node: cst.FunctionDef, python_name: str, call: cst.Call, factory: str, position: Position
    ) -> None:
        mutates = _keyword(call, "mutates_args")
        body = MethodBuilder(node, self.unit, self.imports, self._owner).build()
        tags_arg = _keyword(call, "tags")
        tags: tuple[str, ...] = ()
        if tags_arg is not None:
            elements = tags_arg.value.elements if isinstance(tags_arg.value, (cst.Tuple, cst.List)) else ()
            tags = tuple(self.unit.code(e.value) for e in elements) or (self.unit.code(tags_arg.value),)
        op = CustomOpSpec(
            op_name=_string(_argument(call, 0, "name")),
            python_name=python_name,
            module=self.module,
            path=self.unit.path,
            position=position,
            factory=factory,
            params=body.params,
            return_annotation=self.unit.code(node.returns.annotation) if node.returns else None,
            mutates_args=_string_elements(mutates.value) if mutates is not None else None,
            mutates_position=self.unit.position(mutates) if mutates is not None else None,
            has_schema=_keyword(call, "schema") is not None,
            tags=tags,
            body=body,
            top_level=len(self.scopes) == 1,
        )
        if factory == "triton_op" and mutates is None:
            op.mutates_args = None
        self.ops.append(op)
        self.op_names[python_name] = op

    # -- registrations ----------------------------------------------------------------------
    def _registration_call(self, call: cst.Call | None, decorated: cst.FunctionDef | None) -> Registration | None:
        """A registration made by ``call``; ``decorated`` is the def it decorates, if any."""
        if call is None:
            return None
        func = call.func
        qualified = self.resolve(func)
        if qualified in LIBRARY_REGISTRARS:
            kind = LIBRARY_REGISTRARS[qualified]
            key = self.target_key(_argument(call, 0))
            if key is None:
                self.unresolved = True
                return None
            if kind == "autograd":
                handed = _argument(call, 1, "backward")
            elif kind == "fake":
                handed = _argument(call, 1, "func")
            else:
                handed = _argument(call, 2, "func")
            role = "backward" if kind == "autograd" else None
            function = self._op_function(decorated) if decorated is not None else self._handed(handed, role)
            unknown = decorated is None and handed is not None and function is None
            return self._register(kind, key, call, function, call, unknown)
        if isinstance(func, cst.Attribute) and func.attr.value in OP_METHODS and self._is_op_reference(func.value):
            kind = OP_METHODS[func.attr.value]
            key = self.target_key(func.value)
            if key is None:
                return None
            if kind == "autograd":
                handed = _argument(call, 0, "backward")
            elif kind == "fake":
                handed = _argument(call, 0, "fn")
            else:
                handed = _argument(call, 1, "fn")
            role = "backward" if kind == "autograd" else None
            function = self._op_function(decorated) if decorated is not None else self._handed(handed, role)
            unknown = decorated is None and handed is not None and function is None
            return self._register(kind, key, call, function, call, unknown)
        # `op.register_kernel("cpu")(fn)` and `torch.library.register_fake("ns::x")(fn)`.
        if isinstance(func, cst.Call):
            inner = self._registration_call(func, None)
            if inner is not None and inner.function is None:
                inner.function = self._handed(_argument(call, 0))
                inner.function_unknown = inner.function is None
            return inner
        return None

    def _handed(self, node: cst.BaseExpression | None, role: str | None = None) -> OpFunction | None:
        """The function ``node`` names; ``role`` is the method of a Function it plays (``backward``)."""
        if isinstance(node, cst.Lambda):
            method = MethodBuilder(self._lambda_def(node), self.unit, self.imports, self._owner, role=role).build()
            return OpFunction("<lambda>", self.unit.position(node), method, node)
        definition = self._def_named(node)
        return self._op_function(definition, role) if definition is not None else None

    def _lambda_def(self, node: cst.Lambda) -> cst.FunctionDef:
        """``lambda a, b: e`` as ``def <lambda>(a, b): return e``, so that the method builder
        describes it; the new nodes take the lambda's position, ``e`` keeps its own."""
        returned = cst.Return(node.body)
        line = cst.SimpleStatementLine([returned])
        name = cst.Name("_")
        definition = cst.FunctionDef(name, node.params, cst.IndentedBlock([line]))
        self.unit.add_positions(node, (returned, line, name, definition))
        return definition

    def _op_function(self, node: cst.FunctionDef, role: str | None = None) -> OpFunction:
        method = MethodBuilder(node, self.unit, self.imports, self._owner, role=role).build()
        return OpFunction(node.name.value, method.position, method, node)

    def _register(
        self,
        kind: str,
        key: str,
        where: cst.CSTNode,
        function: OpFunction | None,
        call: cst.Call | None = None,
        unknown: bool = False,
    ) -> Registration:
        registration = Registration(kind, key, self.unit.position(where), self.unit.path, function)
        registration.function_unknown = unknown
        if call is not None:
            if kind == "autograd":
                setup = _keyword(call, "setup_context")
                if setup is not None and not (isinstance(setup.value, cst.Name) and setup.value.value == "None"):
                    registration.setup_context = self._handed(setup.value, "setup_context")
                    registration.setup_context_unknown = registration.setup_context is None
        self.registrations.append(registration)
        return registration


def _block(body: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return body.body if isinstance(body, cst.IndentedBlock) else ()


def _bodies(statement: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    for name in ("body", "orelse", "finalbody"):
        child = getattr(statement, name, None)
        if isinstance(child, cst.BaseSuite):
            yield _block(child)
        elif child is not None and hasattr(child, "body") and isinstance(child.body, cst.BaseSuite):
            yield _block(child.body)
    for handler in getattr(statement, "handlers", ()):
        yield _block(handler.body)
    for case in getattr(statement, "cases", ()):
        yield _block(case.body)
