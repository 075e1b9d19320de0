"""The report's static half, run beside the tests: ``python -m autograd_lint.coverage.discovery_worker ROOT...``.

The per-Function report joins run-time counts with the Functions the analyser
finds, so that a Function that never ran still shows.  Importing the analyser
(libcst) and running it costs a fixed ~0.2 s, which in the test process would
add to the suite's wall time and be traced by coverage.  The pytest plugin
runs it here instead, in a child process started when the session starts, so
it overlaps the tests; it falls back to :func:`discover` in-process if the
child fails.

Prints one JSON list of ``[path, qualname, line, has_backward, backward_owner]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Discovered:
    """What the report needs of one analyser :class:`~autograd_lint.model.spec.FunctionSpec`."""

    path: str
    qualname: str
    line: int | None
    has_backward: bool
    # (path, qualname) of the Function whose backward (or vjp) this one uses; None if it has none.
    backward_owner: tuple[str, str] | None


def discover(roots: Sequence[str]) -> list[Discovered]:
    """The analyser's Functions under ``roots``; empty until the analyser is installed."""
    try:
        from autograd_lint.model.discovery import discover_functions
    except ImportError:
        return []
    found = []
    for spec in discover_functions(roots):
        backward = spec.backward_method
        owner = None if backward is None else (os.path.abspath(backward.path), backward.defined_in)
        found.append(Discovered(os.path.abspath(spec.path), spec.qualname, spec.position.line, backward is not None, owner))
    return found


# Variables that would make the child measure itself (coverage's subprocess
# support, pytest-cov's): the analyser is not the code under test.
_MEASURING_ENV = ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG", "COV_CORE_")


class Background:
    """:func:`discover` in a child process, started now, collected by :meth:`result`."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = list(roots)
        env = {k: v for k, v in os.environ.items() if not k.startswith(_MEASURING_ENV)}
        try:
            self.process: subprocess.Popen[str] | None = subprocess.Popen(
                [sys.executable, "-m", __name__, *self.roots],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
            )
        except OSError:
            self.process = None

    def result(self) -> list[Discovered]:
        """The child's answer, or :func:`discover` run here if it has none."""
        process, self.process = self.process, None
        if process is not None:
            try:
                out, _ = process.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
            else:
                if process.returncode == 0:
                    try:
                        return [
                            Discovered(p, q, line, bool(b), None if o is None else (o[0], o[1]))
                            for p, q, line, b, o in json.loads(out)
                        ]
                    except (ValueError, TypeError):
                        pass
        return discover(self.roots)

    def cancel(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        self.process = None


def main(argv: Sequence[str]) -> int:
    found = discover(argv)
    json.dump([[d.path, d.qualname, d.line, d.has_backward, d.backward_owner] for d in found], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
