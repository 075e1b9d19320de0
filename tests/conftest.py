"""Hypothesis settings for the whole suite: derandomized, so that every run tries the same examples.

A property test that fails once must fail again on the next run and on another machine,
and one that passes must not pass by luck of the draw.  The default profile, ``derandomized``,
draws examples from a seed fixed by each test's own code (Hypothesis' ``derandomize``) and
keeps no example database.  To look for new failures, run with
``HYPOTHESIS_PROFILE=explore``: random draws, and a failure prints the
``@reproduce_failure(...)`` decorator and seed that replay it.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("derandomized", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "derandomized"))
