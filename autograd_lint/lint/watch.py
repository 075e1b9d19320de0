"""``check --watch``: check, then check again whenever a watched file changes (ruff's ``--watch``).

Changes are found by polling, so that no file-notification package is needed:
every :data:`POLL_SECONDS` the watched files (those the check reads, and every
configuration file that may apply) are listed again and their modification
times and sizes compared with the last look.  A file added to, or removed from,
a checked directory is a change too.  The state is taken *before* each check,
so that an edit made while a check runs is not missed; a ``--fix`` that wrote
files is then followed by one more check, which finds nothing to write.

The loop ends on Ctrl-C (exit code 0); a check's own exit code does not end it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Sequence

# Seconds between two looks at the watched files.
POLL_SECONDS = 0.5

# A file's state: modification time (ns) and size, or None when it does not exist.
State = dict[str, "tuple[int, int] | None"]


def state_of(paths: Sequence[str]) -> State:
    """The modification time and size of each of ``paths`` (None for a file that is not there)."""
    state: State = {}
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            state[path] = None
        else:
            state[path] = (status.st_mtime_ns, status.st_size)
    return state


def _announce(args: argparse.Namespace, message: str) -> None:
    """A line on stderr for the person watching, with the time (left out under ``-q``)."""
    if not args.quiet:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def watch(args: argparse.Namespace, check: Callable[[argparse.Namespace], int], watched: Callable[[], Sequence[str]]) -> int:
    """Run ``check(args)``, then again each time the state of the files ``watched()`` lists changes."""
    message = "Starting check in watch mode..."
    try:
        while True:
            before = state_of(watched())
            if sys.stdout.isatty():
                sys.stdout.write("\x1b[2J\x1b[H")  # a fresh screen per check, as ruff's watch mode clears it
                sys.stdout.flush()
            _announce(args, message)
            check(args)
            sys.stdout.flush()
            while state_of(watched()) == before:
                time.sleep(POLL_SECONDS)
            message = "File change detected..."
    except KeyboardInterrupt:
        return 0
