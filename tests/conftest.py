"""What the whole suite shares: which tests need torch.

CI runs the suite with torch on one interpreter, and ``-m "not requires_torch"``
without torch on the others (``.ci/run``).  A test needs torch when it runs code
that imports it: everything under the directories below (generated tests, the
record and coverage plugins), and the tests elsewhere that carry the marker
themselves.  The static faces (check, flake8, the language server, add-noqa,
baseline, fixes, docs) never import torch and run everywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent
# Every test below these directories of tests/ runs torch (in process or in a subprocess).
TORCH_DIRECTORIES = ("coverage", "gentests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    torch_directories = [TESTS / name for name in TORCH_DIRECTORIES]
    for item in items:
        if any(directory in item.path.parents for directory in torch_directories):
            item.add_marker(pytest.mark.requires_torch)
