"""Resolving names to qualified names through a module's import statements.

The analyser reads only the parts of a file that can hold a Function (see
:mod:`autograd_lint.model.locate`), so it cannot use libcst's scope analysis over the
whole module.  Instead every import statement in the file, at any indentation, is
collected once with a regular expression and parsed with :mod:`ast`.  This
resolves every import form (``import torch.autograd as ag``, ``from
torch.autograd import Function as F``, relative imports) and errs towards
resolving a name that a nested scope shadows, which only ever makes a class *less*
likely to be taken for a Function.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field

from autograd_lint.model.locate import INDENT, line_matches

# An import statement: `from x import (a,\n b)`, `from x import a, \\\n b`, `import a.b as c`.
# (Matched at the starts of the lines holding "import"; see locate.line_matches.)
_IMPORT = re.compile(
    rf"{INDENT}(?:from[ \t]+\.*[\w.]*[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*(?:\\\r?\n[^\n]*)*)"
    r"|import[ \t]+[^\n]*(?:\\\r?\n[^\n]*)*)"
)
_BUILTINS = frozenset(dir(builtins))


@dataclass
class ImportMap:
    """Local names bound by imports, mapped to the qualified names they stand for."""

    module: str | None = None
    is_package: bool = False
    aliases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str, module: str | None, is_package: bool = False) -> "ImportMap":
        imports = cls(module=module, is_package=is_package)
        statements = [match.group(0).strip() for match in line_matches(text, "import", _IMPORT)]
        try:
            # One parse for all of them; most files have no import inside a string.
            trees = [ast.parse("\n".join(statements))]
        except SyntaxError:
            trees = []
            for statement in statements:
                try:
                    trees.append(ast.parse(statement))
                except SyntaxError:
                    continue  # an "import" inside a string or a comment
        for tree in trees:
            for node in tree.body:
                imports._bind(node)
        return imports

    def _bind(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    self.aliases[head] = head
        elif isinstance(node, ast.ImportFrom):
            base = self._absolute(node.module or "", node.level)
            for alias in node.names:
                if alias.name == "*":
                    continue
                self.aliases[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name

    def _absolute(self, module: str, level: int) -> str:
        if level == 0:
            return module
        if self.module is None:
            return "." * level + module
        parts = self.module.split(".")
        # A module's package is its parent; a package's __init__ is its own package.
        keep = len(parts) - level + (1 if self.is_package else 0)
        if keep < 0:
            return "." * level + module
        prefix = ".".join(parts[:keep])
        return f"{prefix}.{module}" if prefix and module else prefix or module

    def resolve(self, dotted: str) -> str | None:
        """The qualified name for ``dotted`` (``ag.Function`` -> ``torch.autograd.Function``).

        Returns ``None`` when the first component is neither imported nor a builtin.
        """
        head, _, rest = dotted.partition(".")
        if head in self.aliases:
            qualified = self.aliases[head]
        elif head in _BUILTINS:
            qualified = f"builtins.{head}"
        else:
            return None
        return f"{qualified}.{rest}" if rest else qualified
