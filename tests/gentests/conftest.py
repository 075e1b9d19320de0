"""Shared set-up of the gen-tests suite."""

import contextlib

# The fixture project is data for the end-to-end tests, not part of this suite.
collect_ignore = ["fixtures"]

# pytester restores sys.modules after each test, so torch imported for the first
# time inside such a test would be dropped and imported again by the next one,
# which its C extension does not survive.  Imported here, it is in every snapshot.
with contextlib.suppress(ImportError):
    import torch  # noqa: F401

# The same for the analysis: a libcst tree parsed in one test stays in the parse
# caches of modules imported before the snapshot, while libcst's node classes
# imported inside that test would be dropped and made anew for the next one, whose
# isinstance checks would then fail on the cached tree.  Imported here, they are shared.
import autograd_lint.gentests.command  # noqa: F401
import autograd_lint.model.analysis  # noqa: F401
