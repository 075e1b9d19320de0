"""Draw a recall sample: Functions at random (seeded), at most K per repository.

Usage: python bench/recall_sample.py SEED K TREE...

A Function is a class with both ``forward`` and ``backward`` methods (an ``ast`` walk of
every ``*.py`` under the tree, sorted by path).  Prints ``tree path:line Class`` per draw,
so the sample can be read before the tool's output is looked at.
"""

from __future__ import annotations

import ast
import random
import sys
from pathlib import Path


def functions(tree: Path) -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(tree.rglob("*.py")):
        try:
            module = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef):
                methods = {m.name for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
                if {"forward", "backward"} <= methods:
                    found.append((str(path.relative_to(tree)), node.lineno, node.name))
    return sorted(found)


def main() -> None:
    seed, k, trees = int(sys.argv[1]), int(sys.argv[2]), [Path(t) for t in sys.argv[3:]]
    rng = random.Random(seed)
    for tree in trees:
        found = functions(tree)
        for path, line, name in rng.sample(found, min(k, len(found))):
            print(f"{tree.name} {path}:{line} {name}  (of {len(found)})")


if __name__ == "__main__":
    main()
