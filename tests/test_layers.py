"""The layers of the package, read from its imports: no import runs up a layer, none runs in a circle.

Layers, lowest first: the base shared modules, the model, the rules, the faces.
Each module's imports are read with ``ast`` (nothing is imported), function-local
imports included; imports under ``if TYPE_CHECKING:`` are left out (they never
run), and so is a package importing its own submodules (``__init__`` gathering
its parts).  The faces (the lint front end, gen-tests, coverage, the command
line) stand side by side and do not import each other.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "autograd_lint"
BASE, MODEL, RULES, FACES = range(4)
LAYER_NAMES = ("base", "model", "rules", "faces")



def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = modules()


def layer(module: str) -> tuple[int, str]:
    """The layer of ``module`` and, for a face, which face it is."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top in ("", "settings", "files", "sidefiles", "config"):
        return BASE, ""
    if top in ("model", "noqa"):
        return MODEL, ""
    if top == "rules":
        return RULES, ""
    if top in ("lint", "gentests", "coverage", "cli", "__main__"):
        return FACES, top
    raise AssertionError(f"{module}: not in any layer; add its place to tests/test_layers.py")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> set[str]:
    """The autograd_lint modules that ``module`` imports at run time (also inside functions)."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()

    def known(name: str) -> str | None:
        # `from autograd_lint.model import flow` names a module; `from x import f` a value of x.
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("autograd_lint"):
                    found.add(known(alias.name) or alias.name)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, is_package, node)
            if target.startswith("autograd_lint"):
                for alias in node.names:
                    name = known(f"{target}.{alias.name}") or known(target)
                    if name is not None:
                        found.add(name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    if is_package:  # a package gathering its own submodules
        found = {name for name in found if not name.startswith(module + ".")}
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's imports; read when a test first asks (not at collection, which every
    xdist worker of every CI stage pays)."""
    return {module: imports_of(module) for module in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_up_a_layer(module: str) -> None:
    own, own_face = layer(module)
    wrong = []
    for imported in sorted(graph()[module]):
        theirs, their_face = layer(imported)
        if theirs > own:
            wrong.append(f"{imported} ({LAYER_NAMES[theirs]})")
        elif own == theirs == FACES and own_face != their_face and "cli" not in (own_face, their_face):
            wrong.append(f"{imported} (another face)")
    assert not wrong, f"{module} ({LAYER_NAMES[own]}) imports " + ", ".join(wrong)


def circles() -> set[tuple[str, ...]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph()[module]:
            if imported not in index:
                connect(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.add(tuple(sorted(group)))

    for module in sorted(graph()):
        if module not in index:
            connect(module)
    return found


def test_no_import_circle() -> None:
    found = circles()
    assert found == set(), "import circles: " + "; ".join(" <-> ".join(c) for c in sorted(found))
