"""pytest plugin that records the arguments of every ``Function.apply`` call.

Registered through the ``pytest11`` entry point, so it is loaded in every pytest
run: it stays inert, and never imports torch, unless ``--autograd-record`` is given.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("autograd-lint")
    group.addoption(
        "--autograd-record",
        action="store",
        nargs="?",
        const=".autograd-lint/inputs.json",
        default=None,
        metavar="FILE",
        help="record the argument structure of every autograd.Function.apply call "
        "to FILE (default .autograd-lint/inputs.json) for autograd-lint gen-tests",
    )
