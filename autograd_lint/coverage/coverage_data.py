"""Adding evidence to the running coverage through coverage.py's public data API.

Only files coverage already measures get evidence, so coverage's own
``source``/``include``/``omit`` settings decide what is in scope.  A data
file holds either lines or arcs, never both: arcs are added when coverage
measures branches, their lines otherwise.
"""

from __future__ import annotations

import os
from typing import Mapping

from autograd_lint.coverage.compile_recorder import Arc, arcs_to_lines


def add_evidence(store: Mapping[str, Mapping[str, set[Arc]]], suffix: str) -> int | None:
    """Add ``store`` (label -> file -> arcs) to ``coverage.Coverage.current()``'s data.

    Each label's evidence goes under the dynamic context ``label + suffix``
    (just ``suffix`` without its leading ``|`` for the empty label).  Returns
    how many (context, file) records were added, or None when coverage is
    not running.
    """
    try:
        import coverage
    except ImportError:
        return None
    cov = coverage.Coverage.current()
    if cov is None:
        return None
    data = cov.get_data()
    measured = {os.path.realpath(f): f for f in data.measured_files()}
    branch = bool(cov.get_option("run:branch"))
    added = 0
    for label, files in store.items():
        records = {
            measured[real]: arcs
            for real, arcs in ((os.path.realpath(f), a) for f, a in files.items())
            if real in measured and arcs
        }
        if not records:
            continue
        previous = data.set_context(label + suffix if label else suffix.lstrip("|"))
        try:
            if branch:
                data.add_arcs({f: sorted(a) for f, a in records.items()})
            else:
                data.add_lines({f: sorted(arcs_to_lines(a)) for f, a in records.items()})
        finally:
            data.set_context(previous)
        added += len(records)
    return added
