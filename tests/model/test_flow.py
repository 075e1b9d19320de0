"""Path counts over method bodies (:mod:`autograd_lint.model.flow`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_lint.model.flow import NEVER, path_counts


def _calls(node: cst.CSTNode) -> int:
    return 1 if isinstance(node, cst.Call) else 0


def _counts(source: str) -> tuple[int, int]:
    return path_counts(cst.parse_module(textwrap.dedent(source)).body, _calls)


def test_a_path_that_returns_in_an_else_counts_what_ran_before_the_if() -> None:
    # One call before the `if`, one in the returning `else`: two on that path.
    assert _counts(
        """
        y = f(x)
        if c:
            pass
        else:
            return g(y)
        return y
        """
    ) == (NEVER, 2)


def test_the_longest_returning_path_wins_over_a_shorter_one() -> None:
    through, ended = _counts(
        """
        y = f(x)
        if c:
            return y
        else:
            return g(h(y))
        """
    )
    assert through < 0 and ended == 3  # no path falls through
