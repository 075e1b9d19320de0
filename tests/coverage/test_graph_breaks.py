"""The plugin never changes a test's outcome: graph-breaking Functions under torch.compile.

``graph_breaks/`` holds Functions whose forward or backward makes Dynamo
break the graph (``print``, ``torch._dynamo.graph_break()``, a data-dependent
branch, ``.item()``), compiled with the eager, aot_eager and inductor
backends, with ``.backward()`` outside and inside the compiled function, and
a Module hook registered inside it.  After a graph break Dynamo runs the rest
natively and compiles each new frame it meets, the plugin's wrappers
included unless they are marked as skipped (``dynamo_skip``); before they
were, every one of these tests failed with the plugin on.
"""

from __future__ import annotations

import importlib.util
import re

import pytest

from conftest import GRAPH_BREAKS, Run, run_in_copy

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
]

OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.MULTILINE)


def outcomes(run: Run) -> dict[str, str]:
    """test id -> outcome, from pytest's ``-rA`` short summary."""
    return {test: outcome for outcome, test in OUTCOME.findall(run.output)}


def test_every_graph_breaking_case_passes_with_the_plugin_on(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Each case asserts its exact gradient, and every one passes under coverage alone (this
    # was compared run against run until session 5 and never differed): so "the plugin never
    # changes an outcome" is "every case passes with the plugin on".  The run without the
    # plugin cost as much again (~75 s of CPU under coverage), for no extra assertion.
    on = run_in_copy(
        tmp_path_factory, ["coverage", "run", "-m", "pytest", "-rA", "--autograd-cov"], GRAPH_BREAKS
    )
    seen = outcomes(on)
    assert len(seen) == 27 and set(seen.values()) == {"PASSED"}, on.output
    assert on.returncode == 0
