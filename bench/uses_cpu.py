"""CPU time of the Function-use stage alone (AGL002/AGL021's ``FileAnalysis.function_uses``).

Usage: python bench/uses_cpu.py FILE [RUNS]

Analyses FILE as the language server does (its positions computed, as the
analysis of such a file computes them), once to warm up and then RUNS times
(default 3), each on a text that differs by one trailing comment line, and
times only the finding of the uses; prints the median CPU time and every run.
A whole check's time moves more under load than this stage's share of it: run
it with ``PYTHONPATH=<another checkout>`` in alternation with this one for paired figures.
"""

from __future__ import annotations

import statistics
import sys
import time

from autograd_lint.lint.engine import module_needs
from autograd_lint.model.analysis import analyze
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings


def main() -> None:
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    sys.setrecursionlimit(20000)  # the analysis of a deep file, outside the server's guard
    settings = Settings()
    times = []
    for run in range(runs + 1):
        source = SourceFile(path, text + f"\n# edit {run}\n", "bench")
        analysis = analyze(source, {}, settings, module_needs(settings), compile_whole=True)
        unit = analysis.whole_module
        if unit is not None:
            # Computed by the analysis of a file with Functions (`_table` in checkouts before `ranges`).
            unit.ranges if hasattr(type(unit), "ranges") else unit._table
        start = time.process_time()
        uses = analysis.function_uses
        if run:
            times.append(time.process_time() - start)
    shown = ", ".join(f"{t * 1000:.0f}" for t in times)
    print(f"{path}: uses stage median {statistics.median(times) * 1000:.0f} ms CPU ({shown}); {len(uses)} uses")


if __name__ == "__main__":
    main()
