"""What the whole suite shares: Hypothesis settings, and which tests need torch.

Hypothesis is derandomized, so that every run tries the same examples: a property
test that fails once must fail again on the next run and on another machine, and
one that passes must not pass by luck of the draw.  The default profile,
``derandomized``, draws examples from a seed fixed by each test's own code
(Hypothesis' ``derandomize``) and keeps no example database.  To look for new
failures, run with ``HYPOTHESIS_PROFILE=explore``: random draws, and a failure
prints the ``@reproduce_failure(...)`` decorator and seed that replay it.

CI runs the suite with torch on one interpreter, and ``-m "not requires_torch"``
without torch on the others (``.ci/run``).  A test needs torch when it runs code
that imports it: everything under the directories below (generated tests, the
record and coverage plugins), and the tests elsewhere that carry the marker
themselves.  The static faces (check, flake8, the language server, add-noqa,
baseline, fixes, docs) never import torch and run everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("derandomized", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "derandomized"))

TESTS = Path(__file__).parent
# Every test below these directories of tests/ runs torch (in process or in a subprocess).
TORCH_DIRECTORIES = ("coverage", "gentests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    torch_directories = [TESTS / name for name in TORCH_DIRECTORIES]
    for item in items:
        if any(directory in item.path.parents for directory in torch_directories):
            item.add_marker(pytest.mark.requires_torch)
