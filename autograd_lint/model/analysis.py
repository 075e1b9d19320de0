"""Analysing one file, in stages that each run once and hand the next their result:

    read -> guard -> locate -> parse -> describe

* **read** (the caller): the :class:`SourceFile`, its text and module name.
* **guard** (:class:`Guard`): CPython's verdict on the text, which is what libcst may
  parse.  The whole text is compiled at most once: up front for a file named on the
  command line (``compile_whole``), else only when a later stage needs it; each part cut
  out of the file (a class block, custom-op statements) is compiled where it is cut.
* **locate** (:func:`locate`): from the text alone, the imports, the class headers that
  can be Functions, whether a rule needs the whole module, whether custom ops can be here.
* **parse** (:func:`parse`): this is the only place that decides how much of a file
  libcst parses:

  - nothing, when no class header has a base that can lead to a Function;
  - the candidate class blocks alone, in the common case;
  - the whole module, when a block does not parse on its own or when the module
    uses one of its Functions outside the class in a way a selected rule declares
    it needs to see (:class:`ModuleNeed`: ``Fn(...)``, ``Fn.forward(...)``,
    ``Fn.apply([a, b])``, ``Fn.apply`` in a module that uses torch.func).

  For custom ops (files whose text passes :func:`mentions_custom_op`), it parses the
  whole module when the Function analysis already did, else only the statements
  the custom-op finder can read (:func:`~autograd_lint.model.custom_ops.custom_op_source`),
  else (statements that a text scan can't tell apart, or that don't parse alone)
  the whole module.
* **describe** (:func:`describe`): the :class:`FunctionSpec` of each Function, each of
  its methods with its semantic model (:mod:`.semantic`, built by the same builder as
  the method's spec), and the custom ops and registrations: the :class:`FileAnalysis`.
"""

from __future__ import annotations

import enum
import functools
import keyword
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Mapping

from autograd_lint.model.guard import TooLarge, compile_like_cpython, stage
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.locate import (
    FUNCTION_BASES,
    FUNCTION_METHODS,
    ClassHeader,
    candidate_headers,
    class_block,
    class_headers,
    mentions_custom_op,
    outside_strings,
    scope_prefix,
)
from autograd_lint.settings import Settings
from autograd_lint.model.source import SourceError, SourceFile, python_tree, split_lines

if TYPE_CHECKING:
    import libcst as cst
    from libcst.metadata import Scope

    from autograd_lint.model.apply_sites import RunApply
    from autograd_lint.model.op_spec import CustomOpModule, RunCustomOps
    from autograd_lint.model.spec import FunctionSpec, MethodSpec
    from autograd_lint.model.extract import ParsedUnit
    from autograd_lint.model.helpers import ModuleHelpers, SavedReads
    from autograd_lint.model.semantic import InplaceWrite
    from autograd_lint.model.usage import ApplyIndex, FunctionUse

# libcst and what is built on it (parsing, extraction, the custom-op finder, uses) are
# imported where code is parsed: a file the text scans pass over never needs them, and
# a run that checks only such files (a commit's files, often) starts 0.2 s sooner.

# Calls that the module-level rules look at: instantiation and direct method calls.
_USE_TEMPLATE = r"\b(?:{names})\s*(?:\(|\.\s*(?:{methods})\s*\()"
_CLASS_KEYWORD = re.compile(r"\bclass\s+$")
# `Fn.apply`, found from the word `apply` (a literal, which `re` finds fast): group 1
# holds the `(` of a call.  What precedes it, `Fn.` or an alias `f = Fn.`, is
# checked on a short window before it.
_APPLY = re.compile(r"apply\b(\s*\()?")
_BEFORE_APPLY_TEMPLATE = r"(?:(\w+)\s*=\s*)?\b(?:{names})\s*\.\s*$"
_BEFORE_APPLY_WINDOW = 200
# The torch.func transforms AGL010 looks at, and the modules that export them.
TRANSFORMS = frozenset("grad grad_and_value vjp jvp jacrev jacfwd hessian vmap linearize".split())
TRANSFORM_MODULES = ("torch.func", "functorch")
# How far to look for the end of an argument list before giving up (and parsing).
_ARGUMENTS_SCAN_LIMIT = 5000


class ModuleNeed(enum.Enum):
    """What a rule needs to see outside the Function classes; a file is parsed whole
    only when its text shows something a selected rule needs (``Rule.needs``)."""

    FUNCTION_USES = "calls on a Function class: Fn(...), Fn(...)(...), Fn.forward(...)"
    APPLY_CONTAINERS = "container literals passed to Fn.apply or an alias of it"
    APPLY_TRANSFORMS = "Fn.apply reached by a torch.func transform"
    APPLY_DUPLICATES = "the same name passed twice to Fn.apply or an alias of it"


EVERY_NEED = frozenset(ModuleNeed)


@dataclass
class FileAnalysis:
    """What one file holds: its Functions, and the parsed code they came from."""

    source: SourceFile
    imports: ImportMap
    functions: list[FunctionSpec] = field(default_factory=list)
    units: dict[str, ParsedUnit] = field(default_factory=dict)  # Function qualname -> unit
    whole_module: ParsedUnit | None = None
    # Qualified names of bases that are not known to be Functions (yet).
    open_refs: set[str] = field(default_factory=set)
    # The custom ops the file defines and registers on; None for a file that has none.
    custom_ops: CustomOpModule | None = None
    # The needs whose signs the text shows (a subset of the caller's): a module-level rule
    # whose needs are not among them has nothing to find, whatever else made the module
    # be parsed whole, and is not run (see the engine).
    shown_needs: frozenset[ModuleNeed] = frozenset()
    # The count every ``apply`` call of the run agrees on, by Function full name
    # (:mod:`autograd_lint.model.apply_sites`); None until every file of the run is read
    # (always under flake8, stdin, an editor: one file at a time).
    run_applies: Mapping[str, RunApply] | None = None

    @property
    def nothing_to_check(self) -> bool:
        """No Function and no custom op: no rule has anything to look at (most analysed files)."""
        return not self.functions and self.custom_ops is None

    # What model.usage derives from the whole module, built on the first rule's request
    # and shared by the others.
    @cached_property
    def scopes(self) -> Mapping[cst.CSTNode, Scope | None]:
        """libcst's scopes of :attr:`whole_module` (which must have been parsed)."""
        from autograd_lint.model import usage

        assert self.whole_module is not None
        return usage.scopes_of(self.whole_module)

    @cached_property
    def function_uses(self) -> list[FunctionUse]:
        """Every call on a Function class of this module (:func:`usage.function_uses`);
        none when the text shows no such call (the module may be parsed whole for another need)."""
        from autograd_lint.model import usage

        if ModuleNeed.FUNCTION_USES not in self.shown_needs:
            return []
        return usage.function_uses(self)

    @cached_property
    def apply_index(self) -> ApplyIndex | None:
        """The module's ``Fn.apply`` calls and aliases (:class:`usage.ApplyIndex`); None when
        the module was not parsed whole or defines no Function, so has none to look at."""
        from autograd_lint.model import usage

        if self.whole_module is None or not self.functions:
            return None
        return usage.ApplyIndex(self)

    @cached_property
    def bindings_anywhere(self) -> Mapping[str, int] | None:
        """How many times each name is bound anywhere in the module (:func:`.scopes.bindings_anywhere`);
        None when the text does not parse or a star import may bind any name."""
        from autograd_lint.model.scopes import bindings_anywhere

        tree = python_tree(self.source.text)
        return bindings_anywhere(tree) if tree is not None else None

    @cached_property
    def helpers(self) -> ModuleHelpers:
        """The module's functions as helpers whose in-place writes are known (:mod:`.helpers`)."""
        from autograd_lint.model.helpers import ModuleHelpers

        return ModuleHelpers(self.source.path, self.source.text, self.imports)

    def helper_writes(self, method: MethodSpec) -> list[InplaceWrite]:
        """The in-place writes ``method`` makes through calls of same-module functions
        (:func:`.helpers.helper_writes`); none for a method of another file, or of a class
        defined in a function (whose locals may hold the called name)."""
        from autograd_lint.model.helpers import helper_writes

        if method.semantic is None or method.path != self.source.path or "<locals>" in method.defined_in:
            return []
        return helper_writes(method.semantic, self.helpers)

    def helper_saved_reads(self, method: MethodSpec) -> list[tuple[cst.Call, SavedReads]]:
        """The calls of ``method``'s body that hand its ctx to a same-module helper reading
        ``ctx.saved_tensors`` (:func:`.helpers.helper_saved_reads`); none where
        :meth:`helper_writes` has none to give, or without a ctx parameter."""
        from autograd_lint.model.helpers import helper_saved_reads

        if (
            method.semantic is None
            or method.ctx_name is None
            or method.path != self.source.path
            or "<locals>" in method.defined_in
        ):
            return []
        return helper_saved_reads(method.semantic, self.helpers, method.ctx_name)

    def returned_count(self, method: MethodSpec, value: cst.BaseExpression) -> tuple[int, str] | None:
        """How many values ``value``, returned by ``method``, holds through a same-module
        helper's tuple, and that helper's name (:func:`.helpers.returned_count`); None where
        :meth:`helper_writes` has none to give."""
        from autograd_lint.model.helpers import returned_count

        if method.semantic is None or method.path != self.source.path or "<locals>" in method.defined_in:
            return None
        return returned_count(method.semantic, self.helpers, value)


@functools.lru_cache(maxsize=8)
def python_rejects(text: str, path: str) -> tuple[str, int | None] | None:
    """Why CPython, at its default recursion limit, does not compile ``text``, and on which line.

    ``None`` when it does.  Code that passes this is what libcst may parse (see
    :func:`autograd_lint.model.guard.compile_like_cpython`).  Cached: a file checked
    on its own is compiled by the syntax check and again before its whole-module parse.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        compile_like_cpython(text, path)
    except SyntaxError as exc:
        return (
            f"syntax error: {exc.msg} (checked with Python {version}; syntax newer than that can't be analysed)",
            exc.lineno,
        )
    except (RecursionError, MemoryError):
        return f"too deeply nested: Python {version} does not compile it either", None
    except TooLarge as exc:
        return str(exc), None
    except ValueError as exc:  # e.g. "source code string cannot contain null bytes"
        return str(exc), None
    return None


class Guard:
    """CPython's verdict (:func:`python_rejects`) on one file's text, asked at most once,
    and on the parts cut out of it, each asked where it is cut."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self._asked = False
        self._problem: tuple[str, int | None] | None = None

    def require_whole(self) -> None:
        """Raise :class:`SourceError` when the running Python cannot compile the whole text."""
        if not self._asked:
            self._problem = python_rejects(self.source.text, self.source.path)
            self._asked = True
        if self._problem is not None:
            raise SourceError(self.source.path, *self._problem)

    def accepts(self, part: str) -> bool:
        """Whether the running Python compiles ``part``, a piece cut out of the file."""
        return python_rejects(part, self.source.path) is None


@dataclass(frozen=True)
class Located:
    """What the text of a file shows before anything is parsed."""

    imports: ImportMap
    # The class headers whose bases can lead to a Function (none inside a string).
    headers: list[ClassHeader]
    # The needs whose signs the text shows: the whole module is parsed when there is one.
    shown_needs: frozenset[ModuleNeed]
    # Whether the file can define or register a custom op (:func:`mentions_custom_op`).
    mentions_ops: bool


@dataclass(frozen=True)
class Parsed:
    """The parsed code of a file: what :func:`describe` reads."""

    # The Functions' code: their class blocks, or the whole module; empty without candidates.
    function_units: list[ParsedUnit]
    # The whole module, when the Functions' code needed it.
    whole_module: ParsedUnit | None
    # The code the custom-op finder reads; None for a file without custom ops.
    ops_unit: ParsedUnit | None


def analyze(
    source: SourceFile,
    known: Mapping[str, FunctionSpec],
    settings: Settings,
    needs: frozenset[ModuleNeed] | Callable[[], frozenset[ModuleNeed]] = EVERY_NEED,
    run_ops: RunCustomOps | None = None,
    mentions_ops: bool | None = None,
    *,
    compile_whole: bool = False,
) -> FileAnalysis:
    """Find and describe the Functions and custom ops of ``source``; raises :class:`SourceError`.

    ``needs`` says what outside the Function classes the caller's rules look at
    (every need when the caller is not running rules, e.g. gen-tests); a function
    giving them is called only for a file with candidate classes (working them out
    imports the rules).
    ``run_ops`` holds the custom ops and registrations of the other files of the
    run, once they are known (see :func:`autograd_lint.model.discovery.run`).
    ``mentions_ops`` is :func:`mentions_custom_op` of the text, when the caller
    has asked already (a scan of the whole text).  ``compile_whole`` compiles the
    whole text first, so that any syntax error in it is reported (a file named on
    the command line, stdin, an editor's buffer).

    Each step runs as a named :func:`~autograd_lint.model.guard.stage`, so that a
    failure says where it happened.
    """
    guard = Guard(source)
    if compile_whole:
        guard.require_whole()
    located = locate(source, known, settings, needs, mentions_ops)
    parsed = parse(source, located, guard)
    return describe(source, located, parsed, known, settings, run_ops, guard)


def locate(
    source: SourceFile,
    known: Mapping[str, FunctionSpec],
    settings: Settings,
    needs: frozenset[ModuleNeed] | Callable[[], frozenset[ModuleNeed]],
    mentions_ops: bool | None,
) -> Located:
    """What the text shows: imports, candidate Function classes, uses a rule needs, custom ops."""
    text = source.text
    with stage(source.path, "scanning the text"):
        imports = ImportMap.from_text(text, source.module, source.path.endswith("__init__.py"))
        bases = FUNCTION_BASES | settings.extra_bases

        def is_function_base(name: str) -> bool:
            qualified = imports.resolve(name)
            return qualified is not None and (qualified in bases or qualified in known)

        headers = outside_strings(candidate_headers(class_headers(text), is_function_base), text)
        shown: set[ModuleNeed] = set()
        if headers:
            if callable(needs):
                needs = needs()
            names = "|".join(sorted({re.escape(h.name) for h in headers}))
            uses = re.compile(_USE_TEMPLATE.format(names=names, methods="|".join(FUNCTION_METHODS)))
            if ModuleNeed.FUNCTION_USES in needs and _is_used(text, uses):
                shown.add(ModuleNeed.FUNCTION_USES)
            for need in needs - {ModuleNeed.FUNCTION_USES}:
                if _apply_needs_module(text, names, imports, frozenset({need})):
                    shown.add(need)
        if mentions_ops is None:
            mentions_ops = mentions_custom_op(text)
    return Located(imports, headers, frozenset(shown), mentions_ops)


def parse(source: SourceFile, located: Located, guard: Guard) -> Parsed:
    """Parse what :func:`locate` found: the Functions' class blocks or the whole module, and
    the custom-op statements (see the module's docstring)."""
    function_units: list[ParsedUnit] = []
    whole_module = None
    ops_unit = None
    with stage(source.path, "parsing"):
        if located.headers:
            blocks = None if located.shown_needs else _block_units(source, located.headers, guard)
            if blocks is None:
                whole_module = _parse_whole(source, guard)
                blocks = [whole_module]
            function_units = blocks
        if located.mentions_ops:
            ops_unit = whole_module or _custom_op_unit(source, located.imports, guard)
    return Parsed(function_units, whole_module, ops_unit)


def describe(
    source: SourceFile,
    located: Located,
    parsed: Parsed,
    known: Mapping[str, FunctionSpec],
    settings: Settings,
    run_ops: RunCustomOps | None,
    guard: Guard,
) -> FileAnalysis:
    """The Functions (each method with its semantic model) and custom ops of the parsed code."""
    path = source.path
    analysis = FileAnalysis(
        source, located.imports, whole_module=parsed.whole_module, shown_needs=located.shown_needs
    )
    if parsed.function_units:
        from autograd_lint.model.extract import extract_functions

        with stage(path, "building the model"):
            extraction = extract_functions(
                parsed.function_units, located.imports, source.module, known, settings.extra_bases
            )
        analysis.functions = extraction.functions
        analysis.units = extraction.units
        analysis.open_refs = extraction.open_refs
    unit = parsed.ops_unit
    if unit is not None:
        from autograd_lint.model.custom_ops import extract_custom_ops

        with stage(path, "describing custom ops"):
            found = extract_custom_ops(unit, located.imports, source.module, run_ops)
            if found.ops or found.foreign:
                if unit.line_map is not None:
                    # Parsed in part: a file with custom ops that Python does not compile
                    # is still reported as such, as when it was parsed whole.
                    guard.require_whole()
                analysis.custom_ops = found
    return analysis


def _custom_op_unit(source: SourceFile, imports: ImportMap, guard: Guard) -> ParsedUnit | None:
    """The statements of ``source`` that can define or register a custom op, parsed
    (positions are the file's); ``None`` when there are none.

    Most files that mention a custom-op word use it in a few statements, or only in
    text; the whole module is parsed only when the statements can't be cut out.
    """
    import libcst as cst

    from autograd_lint.model.custom_ops import custom_op_source
    from autograd_lint.model.extract import ParsedUnit

    picked = custom_op_source(source.text, imports)
    if picked is None:
        return None
    text, line_map = picked
    if line_map is not None and guard.accepts(text):
        try:
            return ParsedUnit.parse(source.path, text, line_map=line_map)
        except cst.ParserSyntaxError:
            pass
    return _parse_whole(source, guard)


def _is_used(text: str, uses: re.Pattern[str]) -> bool:
    for match in uses.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if not _CLASS_KEYWORD.search(text, line_start, match.start()):
            return True
    return False


def _apply_needs_module(text: str, names: str, imports: ImportMap, needs: frozenset[ModuleNeed]) -> bool:
    """Whether ``Fn.apply`` is used in a way that ``needs`` asks to see.

    That is a container literal among the arguments of ``Fn.apply(...)`` or of a
    call through an alias ``f = Fn.apply`` (:attr:`ModuleNeed.APPLY_CONTAINERS`), or a torch.func
    transform called on ``Fn.apply``, on its alias, on a ``lambda`` or on a ``def``
    whose body uses ``Fn.apply`` (:attr:`ModuleNeed.APPLY_TRANSFORMS`).  Otherwise
    the fast path parses class blocks alone.
    """
    containers = ModuleNeed.APPLY_CONTAINERS in needs
    duplicates = ModuleNeed.APPLY_DUPLICATES in needs
    if not containers and not duplicates and ModuleNeed.APPLY_TRANSFORMS not in needs:
        return False

    def shows(start: int) -> bool:
        return (containers and _container_argument(text, start)) or (
            duplicates and _duplicate_name_argument(text, start)
        )

    before = re.compile(_BEFORE_APPLY_TEMPLATE.format(names=names))
    applied = False
    aliases: set[str] = set()
    for match in _APPLY.finditer(text):
        prefix = before.search(text, max(0, match.start() - _BEFORE_APPLY_WINDOW), match.start())
        if prefix is None:
            continue
        if match.group(1) and shows(match.end()):
            return True
        applied = True
        if prefix.group(1) is not None and not match.group(1):
            aliases.add(prefix.group(1))
    if not applied:
        return False
    if aliases and (containers or duplicates):
        calls = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(aliases))) + r")\s*\(")
        if any(shows(m.end()) for m in calls.finditer(text)):
            return True
    transform_calls = _transform_calls(text, imports) if ModuleNeed.APPLY_TRANSFORMS in needs else None
    if transform_calls is None:
        return False
    apply = re.compile(r"\b(?:" + names + r")\s*\.\s*apply\b")
    position = 0
    # Searched one start at a time, so that `vmap(grad(f))` finds both calls.
    while (match := transform_calls.search(text, position)) is not None:
        position = match.start() + 1
        argument = match.group(1)
        if argument == "lambda" or apply.fullmatch(argument) or argument in aliases:
            return True
        if _def_uses(text, argument, apply):
            return True
    return False


def _transform_calls(text: str, imports: ImportMap) -> re.Pattern[str] | None:
    """A pattern for calls of torch.func transforms, capturing the first argument's
    start (``lambda`` or a dotted name); ``None`` when the module can't call one."""
    spellings = set()
    if re.search(r"torch\s*\.\s*(?:func|vmap)\b", text):
        spellings.update({r"torch\s*\.\s*func\s*\.\s*\w+", r"torch\s*\.\s*vmap"})
    for local, target in imports.aliases.items():
        if target in TRANSFORM_MODULES:
            spellings.add(re.escape(local) + r"\s*\.\s*\w+")
        elif target == "torch.vmap" or (
            target.rpartition(".")[0] in TRANSFORM_MODULES and target.rpartition(".")[2] in TRANSFORMS
        ):
            spellings.add(re.escape(local))
    if not spellings:
        return None
    return re.compile(r"\b(?:" + "|".join(sorted(spellings)) + r")\s*\(\s*(lambda\b|[\w.]+)")


def _def_uses(text: str, name: str, pattern: re.Pattern[str]) -> bool:
    """Whether a ``def name(...)`` block in ``text`` contains ``pattern`` (by indentation)."""
    for match in re.finditer(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+" + re.escape(name) + r"\b", text, re.MULTILINE):
        indent = len(match.group(1))
        body = text.find("\n", match.end()) + 1 or len(text)
        end = len(text)
        # The block ends at the first line indented no deeper than `def` (a
        # closing bracket of a multi-line signature and comments don't count).
        for line in re.compile(r"^([ \t]*)([^\s#)\]])", re.MULTILINE).finditer(text, body):
            if len(line.group(1)) <= indent:
                end = line.start()
                break
        if pattern.search(text, match.end(), end):
            return True
    return False


@dataclass(frozen=True)
class _Arguments:
    """The arguments of a call as a cheap scan of its text finds them (see :func:`_scan_arguments`)."""

    texts: tuple[str, ...]  # each argument's text, split at top-level commas (the last one as far as read)
    closed: bool  # the call's closing bracket was found
    cut: bool  # the scan stopped at :data:`_ARGUMENTS_SCAN_LIMIT` first


def _scan_arguments(text: str, start: int) -> _Arguments:
    """The arguments of the call whose ``(`` ends at ``start``: one scan of the characters,
    not a parse.  Brackets are followed by depth and string quotes skipped (comments are
    not told apart); whatever closes the depth the call opened ends it."""
    depth = 1
    quote = ""
    index = start
    argument_start = start
    texts: list[str] = []
    end = min(len(text), start + _ARGUMENTS_SCAN_LIMIT)
    while index < end:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                texts.append(text[argument_start:index])
                return _Arguments(tuple(texts), closed=True, cut=False)
        elif char == "," and depth == 1:
            texts.append(text[argument_start:index])
            argument_start = index + 1
        index += 1
    texts.append(text[argument_start:index])
    return _Arguments(tuple(texts), closed=False, cut=end < len(text))


def _duplicate_name_argument(text: str, start: int) -> bool:
    """Whether two arguments of the call whose ``(`` ends at ``start`` are the same bare name.

    An argument list the scan does not see end counts as True (a whole-module parse).
    """
    arguments = _scan_arguments(text, start)
    if not arguments.closed:
        return True
    names = [t.strip() for t in arguments.texts]
    names = [n for n in names if n.isidentifier() and not keyword.iskeyword(n)]
    return len(set(names)) < len(names)


def _container_argument(text: str, start: int) -> bool:
    """Whether an argument of the call whose ``(`` ends at ``start`` opens with a bracket.

    It errs towards True (a parenthesised expression or a bracket in an odd string counts,
    and so does an argument list longer than the scan limit), which only costs a
    whole-module parse.
    """
    arguments = _scan_arguments(text, start)
    return arguments.cut or any(t.lstrip()[:1] in ("(", "[", "{") for t in arguments.texts)


def _block_units(source: SourceFile, headers: list[ClassHeader], guard: Guard) -> list[ParsedUnit] | None:
    """Parse each candidate class on its own; ``None`` if one of them doesn't parse,
    if two of them have the same qualified name (their rules would not know which
    block holds which), or if a base names a candidate that has another ``class``
    definition the blocks leave out (which may be the one the base refers to)."""
    import libcst as cst

    from autograd_lint.model.extract import ParsedUnit

    counts = Counter(h.name for h in headers)
    for name in {b.split(".", 1)[0] for h in headers for b in h.base_names} & counts.keys():
        if len(re.findall(rf"\bclass[ \t]+{name}\b", source.text)) > counts[name]:
            return None
    lines = split_lines(source.text)
    units: list[ParsedUnit] = []
    qualnames: set[str] = set()
    covered_until = 0
    for header in headers:
        if header.line <= covered_until:
            continue  # nested in a block already taken
        block = class_block(lines, header)
        qualname = scope_prefix(block.enclosing) + header.name
        if qualname in qualnames or not guard.accepts(block.source):
            return None
        qualnames.add(qualname)
        try:
            units.append(
                ParsedUnit.parse(
                    source.path,
                    block.source,
                    line_offset=block.first_line - 1,
                    column_offset=block.column_offset,
                    enclosing=block.enclosing,
                    column_shifts=block.column_shifts,
                )
            )
        except cst.ParserSyntaxError:
            return None
        covered_until = block.last_line
    return units


def _parse_whole(source: SourceFile, guard: Guard) -> ParsedUnit:
    import libcst as cst

    from autograd_lint.model.extract import ParsedUnit

    guard.require_whole()
    try:
        return ParsedUnit.parse(source.path, source.text)
    except cst.ParserSyntaxError as exc:
        # Python compiles it (checked above): the limit is libcst's, say so.
        raise SourceError(
            source.path, f"not analysed: libcst cannot parse it, although Python compiles it ({exc.message})", exc.raw_line
        ) from None
