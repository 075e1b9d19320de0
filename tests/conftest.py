"""What the whole suite shares: Hypothesis settings, and which tests need torch.

Hypothesis is derandomized, so that every run tries the same examples: a property
test that fails once must fail again on the next run and on another machine, and
one that passes must not pass by luck of the draw.  The default profile,
``derandomized``, draws examples from a seed fixed by each test's own code
(Hypothesis' ``derandomize``) and keeps no example database.  To look for new
failures, run with ``HYPOTHESIS_PROFILE=explore``: random draws, and a failure
prints the ``@reproduce_failure(...)`` decorator and seed that replay it.

CI runs the whole suite with torch on Python 3.11, and ``-m static_faces`` without
torch on 3.10, 3.12 and 3.13 (``.ci/run``).  A test needs torch when it runs code
that imports it: everything under the torch directories below (generated tests, the
record and coverage plugins), and the tests elsewhere that carry the marker
themselves.  The static faces (check, flake8, the language server, add-noqa,
baseline, fixes, docs), the new-syntax tests, the rules' own examples and the
robustness tests that depend on the interpreter's own limits never import torch:
they are marked ``static_faces`` by the paths below and run on every interpreter.
The pre-commit hook's ``try-repo`` tests run on 3.11 only: the hook's definition
does not depend on the interpreter, the per-interpreter venvs already install the
package, and each run builds the hook's own environment (about 20 s per interpreter).
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


# The tests run on every interpreter CI has (directories and files of tests/).
STATIC_FACES = (
    "cli",
    "docs",
    "frontends/test_flake8_agrees.py",
    "server",
    "model/test_new_syntax.py",
    "rules/test_rule_examples.py",
    "robustness/test_deep_code_and_lines.py",
    "robustness/test_discovery_scopes.py",
    "robustness/test_fuzz.py",
)


def _place(path: Path) -> str:
    """"torch", "static" or "" for a test file, from the directories above."""
    parents = set(path.parents)
    if any(TESTS / name in parents for name in TORCH_DIRECTORIES):
        return "torch"
    if any(TESTS / name == path or TESTS / name in parents for name in STATIC_FACES):
        return "static"
    return ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    places: dict[Path, str] = {}  # a file's place is read once, not once per test in it
    for item in items:
        place = places.get(item.path)
        if place is None:
            place = places[item.path] = _place(item.path)
        if place == "torch":
            item.add_marker(pytest.mark.requires_torch)
        elif place == "static" and not item.get_closest_marker("requires_torch"):
            item.add_marker(pytest.mark.static_faces)
