"""Shared set-up of the gen-tests suite."""

import contextlib

# The fixture project is data for the end-to-end tests, not part of this suite.
collect_ignore = ["fixtures"]

# pytester restores sys.modules after each test, so torch imported for the first
# time inside such a test would be dropped and imported again by the next one,
# which its C extension does not survive.  Imported here, it is in every snapshot.
with contextlib.suppress(ImportError):
    import torch  # noqa: F401
