"""The flake8 plugin: ``flake8 --select AGL`` reports what ``autograd-lint check`` reports.

flake8 hands each file over on its own, so a Function whose base class is defined
in another file is not recognised here (``autograd-lint check`` analyses whole
runs); everything else goes through the same analysis and rules.  Selection and
``# noqa`` are flake8's own.
"""

from __future__ import annotations

import ast
from typing import Any, Iterator, Sequence

from autograd_lint import __version__
from autograd_lint.analysis import analyze
from autograd_lint.engine import check_analysis
from autograd_lint.rules import all_rules
from autograd_lint.settings import Settings
from autograd_lint.source import SourceError, SourceFile, module_name


class AutogradLintChecker:
    """flake8 entry point (``flake8.extension``: ``AGL``)."""

    name = "autograd-lint"
    version = __version__
    # Every rule runs; flake8's --select/--ignore/--extend-select decide what shows.
    settings = Settings(select=tuple(rule.code for rule in all_rules()))

    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        # Rules that are off by default stay off unless selected explicitly.
        off = [rule.code for rule in all_rules() if not rule.enabled_by_default]
        if off:
            option_manager.extend_default_ignore(off)

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        text = "".join(self.lines)
        if "Function" not in text and not self.settings.extra_bases:
            return
        source = SourceFile(self.filename, text, module_name(self.filename))
        try:
            analysis = analyze(source, {}, self.settings)
        except SourceError:
            return  # flake8 reports syntax errors itself (E999)
        for diagnostic in check_analysis(analysis, self.settings, honour_noqa=False):
            yield diagnostic.line, diagnostic.column, f"{diagnostic.code} {diagnostic.message}", type(self)
