"""Programs drawn from Python's grammar (hypothesmith), built when a test first draws.

``hypothesmith.from_grammar()`` builds a LALR parser of the grammar: about 3 s of CPU.
Called in a ``@given`` decorator it ran at collection, in every xdist worker of every CI
stage, also where the test was deselected or ran on the other worker; deferred, only the
worker that runs the test pays it.
"""

from __future__ import annotations

from hypothesis import strategies as st


def _from_grammar() -> st.SearchStrategy[str]:
    import hypothesmith

    return hypothesmith.from_grammar()


PROGRAMS: st.SearchStrategy[str] = st.deferred(_from_grammar)
