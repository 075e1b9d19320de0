"""The flake8 plugin: ``flake8 --select AGL`` reports what ``autograd-lint check`` reports.

flake8 hands each file over on its own, so a Function whose base class is defined
in another file is not recognised here (``autograd-lint check`` analyses whole
runs); everything else goes through the same analysis and rules.  Selection,
``# noqa`` and ``# flake8: noqa`` are flake8's own (flake8 reads ``# flake8: noqa: E501``
as silencing the whole file, where ``check`` reads it as ruff does: E501 only), and
``# autograd-lint: noqa`` file-level comments are honoured here as by ``autograd-lint check``.

The project options come from flake8's own options (``--agl-extra-function-bases``,
``--agl-allowed-ctx-tensor-attributes``, also read from flake8's config files) and
otherwise from ``[tool.autograd-lint]`` in the ``pyproject.toml`` nearest the working
directory.  That table is read even under ``flake8 --isolated``: flake8 consumes that
flag before plugins see their options, so a plugin cannot tell.
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import replace
from typing import Any, Iterator, Sequence

from flake8.exceptions import ExecutionError

from autograd_lint import __version__
from autograd_lint.model.analysis import analyze
from autograd_lint.model.custom_ops import mentions_custom_op
from autograd_lint.config import ConfigError, identifiers, project_settings, qualified_names
from autograd_lint.lint.engine import check_analysis, module_needs
from autograd_lint.noqa import own_file_noqa
from autograd_lint.rules import all_rules
from autograd_lint.rules.agl100_unused_noqa import UnusedNoqa
from autograd_lint.settings import Settings
from autograd_lint.model.guard import run_guarded
from autograd_lint.model.source import SourceError, SourceFile, module_name
from autograd_lint.rules.base import Diagnostic

# Reported at line 1 of a file the plugin could not analyse (the CLI prints such a
# file as an error line and exits 2; flake8 has findings only).
UNCHECKED_CODE = "AGL000"


def _codes_to_run(options: argparse.Namespace) -> tuple[str, ...]:
    """Rules on by default, plus those off by default that flake8 was told to select by code.

    flake8 lets an explicit ``--select AGL`` win over a default ignore, so a rule
    that is off by default runs only when its own code is selected, as with
    ``autograd-lint check``.  AGL100 never runs here: flake8 applies ``# noqa``
    itself, and one file at a time, so a noqa for a Function whose base is in
    another file would look unused.
    """
    named = {
        code.strip().upper()
        for option in ("select", "extend_select")
        for code in (getattr(options, option, None) or ())
    }
    return tuple(
        rule.code
        for rule in all_rules()
        if (rule.enabled_by_default or rule.code in named) and rule.code != UnusedNoqa.code
    )


class AutogradLintChecker:
    """flake8 entry point (``flake8.extension``: ``AGL``)."""

    name = "autograd-lint"
    version = __version__
    # Rules on by default all run; flake8's --select/--ignore/--extend-select decide
    # what shows.  See _codes_to_run for the rules that are off by default.
    settings = Settings(select=tuple(rule.code for rule in all_rules() if rule.enabled_by_default))

    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        # Rules that are off by default stay off unless selected explicitly.
        off = [rule.code for rule in all_rules() if not rule.enabled_by_default]
        if off:
            option_manager.extend_default_ignore(off)
        option_manager.add_option(
            "--agl-extra-function-bases",
            default="",
            parse_from_config=True,
            comma_separated_list=True,
            help="qualified names of the project's own autograd.Function base classes (comma separated)",
        )
        option_manager.add_option(
            "--agl-allowed-ctx-tensor-attributes",
            default="",
            parse_from_config=True,
            comma_separated_list=True,
            help="ctx attributes that may hold tensors on purpose, for AGL003 and AGL032 (comma separated)",
        )

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        try:
            project = project_settings(["."])
            extra_bases = qualified_names(options.agl_extra_function_bases, "--agl-extra-function-bases")
            allowed = identifiers(options.agl_allowed_ctx_tensor_attributes, "--agl-allowed-ctx-tensor-attributes")
        except ConfigError as error:
            # flake8 prints an ExecutionError's text and exits 1, instead of a traceback.
            raise ExecutionError(str(error)) from None
        cls.settings = replace(
            cls.settings,
            select=_codes_to_run(options),
            extra_bases=extra_bases or project.extra_bases,
            allowed_ctx_tensor_attributes=allowed or project.allowed_ctx_tensor_attributes,
        )

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        text = "".join(self.lines)
        if "Function" not in text and not self.settings.extra_bases and not mentions_custom_op(text):
            return
        source = SourceFile(self.filename, text, module_name(self.filename))
        try:
            diagnostics = run_guarded(self.filename, "reading the file", lambda: self._check(source))
        except SourceError as error:
            # flake8 runs this plugin only on files that Python parsed (it reports
            # syntax errors itself, E999), so this file could not be analysed: say so.
            yield 1, 0, f"{UNCHECKED_CODE} file not checked by autograd-lint: {error.problem}", type(self)
            return
        # flake8 applies line noqa and `# flake8: noqa` itself, but does not know ours.
        whole_file = own_file_noqa(self.lines)
        for diagnostic in diagnostics:
            if whole_file.silences(diagnostic.code):
                continue
            yield diagnostic.line, diagnostic.column, f"{diagnostic.code} {diagnostic.message}", type(self)

    def _check(self, source: SourceFile) -> list[Diagnostic]:
        analysis = analyze(source, {}, self.settings, module_needs(self.settings))
        return check_analysis(analysis, self.settings, honour_noqa=False)
