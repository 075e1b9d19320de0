"""Shared set-up of the custom-op tests."""

import contextlib
import sys
from pathlib import Path

# repro_cases.py is imported by name, as tests/gentests/gentests_support.py is.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "gentests"))

# See tests/gentests/conftest.py: torch must be in pytester's sys.modules snapshots.
with contextlib.suppress(ImportError):
    import torch  # noqa: F401
