"""The pytest plugin: inert unless ``--autograd-cov`` or ``autograd_cov = true`` enables it."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("autograd-cov", "truthful coverage for autograd code")
    group.addoption(
        "--autograd-cov",
        action="store_true",
        default=None,
        help="trace backward code on autograd engine threads and record torch.compile code",
    )
    parser.addini("autograd_cov", "enable --autograd-cov", type="bool", default=False)
