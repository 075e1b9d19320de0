"""Mutation measure of gen-tests: bugs planted in backward, the share the generated tests catch.

Usage (after ``bench/gentests_real_packages.py --modes without`` wrote its suites)::

    python bench/gentests_mutations.py --venv /work/venvs/gentests-real25 \\
        --suites /tmp/g25/without --package snntorch --work /tmp/g25/mutants

For every Function whose generated gradcheck passed,
each applicable mutation of its ``backward`` is written into a copy of the
package (never into site-packages), and that Function's generated test class is
run against the copy (``PYTHONPATH`` puts the copy first).  A mutant is *caught*
when its test_gradcheck fails (an expected failure or a skip is not a catch).  Mutations:

* ``sign``: the first returned gradient negated;
* ``term``: the first ``a + b`` / ``a - b`` in backward replaced by ``a`` (a dropped term);
* ``swap``: the first two returned gradients swapped (Functions with two or more);
* ``grad_output``: the first ``g * x`` / ``x * g`` with ``g`` an incoming gradient replaced by ``x``.

Prints one line per mutant and the share caught.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

WORKTREE = Path(__file__).resolve().parents[1]
TIMEOUT = 600


def passing_functions(report: Path) -> list[str]:
    """Test classes (Function names) whose gradcheck passed."""
    outcomes: dict[str, Counter[str]] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1]
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        check = (case.get("name") or "").split("[", 1)[0]
        outcomes.setdefault(name, Counter())[(check, kinds[0] if kinds else "passed")] += 1
    return sorted(name for name, counts in outcomes.items()
                  if counts[("test_gradcheck", "passed")] and not counts[("test_gradcheck", "failure")])


class _Mutate(ast.NodeTransformer):
    """One mutation of the ``backward`` of class ``name``; ``done`` says whether it applied."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind, self.done = name, kind, False
        self.grads: set[str] = set()

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        if node.name != self.name:
            return node
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "backward" and not self.done:
                self.grads = {arg.arg for arg in item.args.args[1:]}
                if item.args.vararg is not None:
                    self.grads.add(item.args.vararg.arg)
                self._backward(item)
        return node

    def _backward(self, function: ast.FunctionDef) -> None:
        returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]
        if self.kind in ("sign", "swap"):
            for ret in returns:
                elements = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
                gradients = [i for i, e in enumerate(elements) if not (isinstance(e, ast.Constant) and e.value is None)]
                if self.kind == "sign" and gradients:
                    negated = ast.UnaryOp(ast.USub(), elements[gradients[0]])
                    if isinstance(ret.value, ast.Tuple):
                        elements[gradients[0]] = negated
                    else:  # ``return dx * dy``: the list above is a copy, the return itself changes
                        ret.value = negated
                    self.done = True
                elif self.kind == "swap" and len(gradients) >= 2 and isinstance(ret.value, ast.Tuple):
                    a, b = gradients[:2]
                    elements[a], elements[b] = elements[b], elements[a]
                    self.done = True
                if self.done:
                    return
            return
        for node in ast.walk(function):
            for field, value in ast.iter_fields(node):
                if not isinstance(value, ast.BinOp) or self.done:
                    continue
                if self.kind == "term" and isinstance(value.op, (ast.Add, ast.Sub)):
                    setattr(node, field, value.left)
                    self.done = True
                elif self.kind == "grad_output" and isinstance(value.op, ast.Mult):
                    for side, other in ((value.left, value.right), (value.right, value.left)):
                        if isinstance(side, ast.Name) and side.id in self.grads:
                            setattr(node, field, other)
                            self.done = True
                            break


def class_file(package_root: Path, test_class: str) -> tuple[Path, str] | None:
    """The file defining the Function of ``test_class`` and the Function's own class name.

    The test class is ``Test`` + the qualified name with dots as underscores
    (``TestSpikeTime_FirstSpike``, ``TestSO3_Log``): the longest underscore-separated
    tail that a file defines as a class is the name.
    """
    parts = test_class.removeprefix("Test").split("_")
    names = [name for name in ("_".join(parts[i:]) for i in range(len(parts))) if name.strip("_")]
    files = [(path, path.read_text(errors="replace")) for path in sorted(package_root.rglob("*.py"))]
    for name in names:
        for path, text in files:
            if f"class {name}(" in text:
                return path, name
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--suites", type=Path, required=True, help="--work of gentests_real_packages.py")
    parser.add_argument("--package", required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--max-functions", type=int, default=8)
    parser.add_argument("--mode", choices=("without", "with"), default="without")
    args = parser.parse_args()
    python = args.venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    suite = args.suites / f"{args.package}-{args.mode}"
    classes = passing_functions(args.suites / f"{args.package}-{args.mode}.xml")[: args.max_functions]
    caught: Counter[str] = Counter()
    planted: Counter[str] = Counter()
    for test_class in classes:
        for kind in ("sign", "term", "swap", "grad_output"):
            copy = args.work / f"{args.package}-{test_class}-{kind}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(site / args.package, copy / args.package)
            found = class_file(copy / args.package, test_class)
            if found is None:
                shutil.rmtree(copy)
                continue
            source, name = found
            tree = ast.parse(source.read_text())
            mutation = _Mutate(name, kind)
            mutation.visit(tree)
            if not mutation.done:
                shutil.rmtree(copy)
                continue
            source.write_text(ast.unparse(tree))
            env = {**os.environ, "PYTHONPATH": f"{copy}{os.pathsep}{WORKTREE}"}
            try:
                selected = f"{test_class} and test_gradcheck and not non_contiguous and not gradgradcheck"
                result = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite),
                                         "-k", selected], capture_output=True, text=True, env=env, timeout=TIMEOUT)
                summary = [line for line in result.stdout.splitlines() if line.strip()][-1:]
                failed = result.returncode == 1
            except subprocess.TimeoutExpired:
                summary, failed = [f"timed out after {TIMEOUT} s"], False
            planted[kind] += 1
            caught[kind] += failed
            print(f"{args.package} {name} {kind}: {'caught' if failed else 'MISSED'} ({' '.join(summary)})",
                  flush=True)
            shutil.rmtree(copy)
    total, hits = sum(planted.values()), sum(caught.values())
    print(f"{args.package}: {hits} of {total} planted bugs caught "
          f"({100 * hits / total if total else 0:.0f}%); by kind: "
          + ", ".join(f"{k} {caught[k]}/{planted[k]}" for k in planted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
