"""CPU time of one check of a file on its own, as the language server checks a buffer.

Usage: python bench/check_cpu.py FILE [RUNS] [--at-line N]

Checks FILE once to warm up, then RUNS times (default 3), each time with a
different trailing comment line, as every edit changes the text, so that
nothing cached by the whole text carries over (what is cached by top-level
statement does, as in an editor: see model/incremental.py); with ``--at-line N``
the comment is put before line N instead, indented as that line is (an edit
inside the statement that holds it, which is parsed again); prints the median CPU time
(``time.process_time``), every run, and the number of findings.  Run it with
``PYTHONPATH=<another checkout>`` in alternation with this one for paired figures.
"""

from __future__ import annotations

import statistics
import sys
import time

from autograd_lint.lint.engine import check_source
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings


def main() -> None:
    args = sys.argv[1:]
    at_line = None
    if "--at-line" in args:
        index = args.index("--at-line")
        at_line = int(args[index + 1])
        del args[index : index + 2]
    path = args[0]
    runs = int(args[1]) if len(args) > 1 else 3
    with open(path, encoding="utf-8") as handle:
        text = handle.read()

    def edited(label: str) -> str:
        if at_line is None:
            return text + f"\n# {label}\n"
        lines = text.split("\n")
        target = lines[at_line - 1]
        indent = target[: len(target) - len(target.lstrip())]
        return "\n".join([*lines[: at_line - 1], f"{indent}# {label}", *lines[at_line - 1 :]])

    settings = Settings()
    check_source(SourceFile(path, edited("warm-up"), "bench"), settings)
    times = []
    for run in range(runs):
        edited_text = edited(f"edit {run}")
        start = time.process_time()
        result = check_source(SourceFile(path, edited_text, "bench"), settings)
        times.append(time.process_time() - start)
    shown = ", ".join(f"{t:.3f}" for t in sorted(times))
    print(f"{path}: median {statistics.median(times):.3f} s CPU per check ({shown}); {len(result.diagnostics)} findings")


if __name__ == "__main__":
    main()
