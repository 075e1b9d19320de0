"""CPU time of one check of a file on its own, as the language server checks a buffer.

Usage: python bench/check_cpu.py FILE [RUNS]

Checks FILE once to warm up, then RUNS times (default 3), each time with a
different trailing comment line, as every edit changes the text, so that
nothing cached by text carries over; prints the median CPU time
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
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    settings = Settings()
    check_source(SourceFile(path, text + "\n# warm-up\n", "bench"), settings)
    times = []
    for run in range(runs):
        edited = text + f"\n# edit {run}\n"
        start = time.process_time()
        result = check_source(SourceFile(path, edited, "bench"), settings)
        times.append(time.process_time() - start)
    shown = ", ".join(f"{t:.3f}" for t in sorted(times))
    print(f"{path}: median {statistics.median(times):.3f} s CPU per check ({shown}); {len(result.diagnostics)} findings")


if __name__ == "__main__":
    main()
