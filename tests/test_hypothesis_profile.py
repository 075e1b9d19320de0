"""The suite's property tests draw the same examples on every run (tests/conftest.py)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

DRAWN: list[int] = []


@settings(max_examples=5)
@given(st.integers())
def _draw(value: int) -> None:
    DRAWN.append(value)


def test_the_default_profile_is_derandomized() -> None:
    if os.environ.get("HYPOTHESIS_PROFILE", "derandomized") != "derandomized":
        pytest.skip("another Hypothesis profile was chosen")
    assert settings.default.derandomize and settings.default.database is None
    runs = []
    for _ in range(2):
        DRAWN.clear()
        _draw()
        runs.append(list(DRAWN))
    assert runs[0] == runs[1]
