"""Analysing one file: locate the classes that can be Functions, parse them, describe them.

This is the only place that decides how much of a file libcst parses:

* nothing, when no class header has a base that can lead to a Function;
* the candidate class blocks alone, in the common case;
* the whole module, when a block does not parse on its own or when the module
  uses one of its Functions outside the class (``Fn(...)``, ``Fn.forward(...)``),
  which the module-level rules need to see.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from typing import Mapping

import libcst as cst

from autograd_lint.extract import FUNCTION_BASES, ParsedUnit, extract_functions
from autograd_lint.imports import ImportMap
from autograd_lint.locate import (
    ClassHeader,
    candidate_headers,
    class_block,
    class_headers,
    outside_strings,
)
from autograd_lint.settings import Settings
from autograd_lint.source import SourceError, SourceFile
from autograd_lint.spec import FUNCTION_METHODS, FunctionSpec

# Calls that the module-level rules look at: instantiation and direct method calls.
_USE_TEMPLATE = r"\b(?:{names})\s*(?:\(|\.\s*(?:{methods})\s*\()"
_CLASS_KEYWORD = re.compile(r"\bclass\s+$")


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


def mentions_function(text: str, extra_words: re.Pattern[str] | None = None) -> bool:
    """The cheapest test: can this text define a Function subclass at all?"""
    return "Function" in text or (extra_words is not None and extra_words.search(text) is not None)


def syntax_check(source: SourceFile) -> None:
    """Raise :class:`SourceError` when the running Python cannot compile ``source``."""
    try:
        compile(source.text, source.path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        raise SourceError(
            source.path,
            f"syntax error: {exc.msg} (checked with Python {version}; "
            "syntax newer than that can't be analysed)",
            exc.lineno,
        ) from None
    except ValueError as exc:  # e.g. "source code string cannot contain null bytes"
        raise SourceError(source.path, str(exc)) from None


def analyze(
    source: SourceFile,
    known: Mapping[str, FunctionSpec],
    settings: Settings,
) -> FileAnalysis:
    """Find and describe the Functions of ``source``; raises :class:`SourceError`."""
    is_package = source.path.endswith("__init__.py")
    imports = ImportMap.from_text(source.text, source.module, is_package)
    analysis = FileAnalysis(source, imports)
    bases = FUNCTION_BASES | settings.extra_bases

    def is_function_base(name: str) -> bool:
        qualified = imports.resolve(name)
        return qualified is not None and (qualified in bases or qualified in known)

    headers = outside_strings(candidate_headers(class_headers(source.text), is_function_base), source.text)
    if not headers:
        return analysis
    names = "|".join(sorted({re.escape(h.name) for h in headers}))
    uses = re.compile(_USE_TEMPLATE.format(names=names, methods="|".join(FUNCTION_METHODS)))
    units = None if _is_used(source.text, uses) else _block_units(source, headers)
    if units is None:
        analysis.whole_module = _parse_whole(source)
        units = [analysis.whole_module]
    extraction = extract_functions(units, imports, source.module, known, settings.extra_bases)
    analysis.functions = extraction.functions
    analysis.units = extraction.units
    analysis.open_refs = extraction.open_refs
    return analysis


def _is_used(text: str, uses: re.Pattern[str]) -> bool:
    for match in uses.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if not _CLASS_KEYWORD.search(text, line_start, match.start()):
            return True
    return False


def _block_units(source: SourceFile, headers: list[ClassHeader]) -> list[ParsedUnit] | None:
    """Parse each candidate class on its own; ``None`` if one of them doesn't parse."""
    lines = source.text.splitlines(keepends=True)
    units: list[ParsedUnit] = []
    covered_until = 0
    for header in headers:
        if header.line <= covered_until:
            continue  # nested in a block already taken
        block = class_block(source.text, lines, header)
        try:
            units.append(
                ParsedUnit.parse(
                    source.path,
                    block.source,
                    line_offset=block.first_line - 1,
                    column_offset=block.column_offset,
                    enclosing=block.enclosing,
                )
            )
        except (cst.ParserSyntaxError, RecursionError):
            return None
        covered_until = block.last_line
    return units


def _parse_whole(source: SourceFile) -> ParsedUnit:
    try:
        return ParsedUnit.parse(source.path, source.text)
    except cst.ParserSyntaxError as exc:
        raise SourceError(source.path, f"syntax error: {exc.message}", exc.raw_line) from None
    except RecursionError:
        raise SourceError(source.path, "too deeply nested to parse") from None
