"""pytest plugin of bench/mutation.py: which tests run which lines, and running only those.

Loaded with ``-p bench.mutation_plugin`` by ``bench/mutation.py --whole-area``; inert
unless one of its environment variables is set.

``AGL_MUTATION_TESTS=<file>`` (the area's unmutated run, under coverage.py): each test is
named as coverage.py's context while it runs (setup, call and teardown), in the test
process, in every process forked from it and in every Python process it starts (they read
the name from ``AGL_MUTATION_TEST``; see ``SITECUSTOMIZE`` in bench/mutation.py).  A
fixture of a wider scope than a function is set up under ``@<node id of its scope>``: every
test of that module, class or package may read what it made, so each of them is selected
for a mutant on those lines (the session's scope is ``@``: every test).  The node ids of
the tests that ran are written to the file, in order.

``AGL_MUTATION_SELECT=<file>`` (a mutant's run): only the tests named in the file (one node
id a line) run; the ids not collected are written to ``<file>.missing`` (the bench then runs
the whole list instead: a selection that silently runs fewer tests would overstate survival).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CURRENT = "AGL_MUTATION_TEST"


def _switch(name: str) -> None:
    """Name ``name`` as the context of what runs from now on, here and in later children."""
    import coverage

    os.environ[CURRENT] = name
    measuring = coverage.Coverage.current()
    if measuring is not None:
        measuring.switch_context(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    log = os.environ.get("AGL_MUTATION_TESTS")
    if not log:
        yield
        return
    with open(log, "a", encoding="utf-8") as names:
        names.write(item.nodeid + "\n")
    _switch(item.nodeid)
    try:
        yield
    finally:
        _switch("")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> Iterator[None]:
    if not os.environ.get("AGL_MUTATION_TESTS") or fixturedef.scope == "function":
        yield
        return
    before = os.environ.get(CURRENT, "")
    scope = "" if fixturedef.scope == "session" else request.node.nodeid
    _switch("@" + scope)
    try:
        yield
    finally:
        _switch(before)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = os.environ.get("AGL_MUTATION_SELECT")
    if not chosen:
        return
    wanted = set(Path(chosen).read_text(encoding="utf-8").splitlines())
    kept = [item for item in items if item.nodeid in wanted]
    missing = wanted - {item.nodeid for item in kept}
    if missing:
        Path(chosen + ".missing").write_text("".join(sorted(f"{name}\n" for name in missing)), encoding="utf-8")
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in wanted])
    items[:] = kept
