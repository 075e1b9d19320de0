"""Reading the JSON side files (baselines, recordings, autograd-cov reports), the one guarded way.

Side files are data that another run (or a person, or a merge) wrote: every
reader goes through :func:`load_json`, which reads a regular file only (through
:func:`autograd_lint.files.read_regular`), within a size limit, decodes UTF-8,
accepts strict JSON only (no ``NaN`` or ``Infinity``, which no writer of ours
emits and which would flow into generated code) and at most :data:`MAX_DEPTH`
levels of nesting.  Every problem is a :class:`SideFileError`, whose text is the
one line a front end prints: the file and what is wrong with it.  What the
document must hold is the caller's to check, with :meth:`SideFileError` too.
"""

from __future__ import annotations

import json
from typing import Any

from autograd_lint.files import Refused, read_regular

# Larger than any side file of a real project (a baseline of 100,000 findings is about 20 MiB).
MAX_BYTES = 256 << 20
# Deeper than any side file we write (a recording nests arguments a few levels).
MAX_DEPTH = 100


class SideFileError(Exception):
    """A side file that cannot be used; ``str()`` is ``path: problem``."""

    def __init__(self, path: str, problem: str, missing: bool = False) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.missing = missing


def load_json(path: str, what: str, limit: int = MAX_BYTES) -> Any:
    """The JSON document in the file ``path``, ``what`` ("a baseline file"), checked as the module says.

    Raises :class:`SideFileError` (``missing`` set when there is no such file).
    """
    try:
        data = read_regular(path, limit)
    except Refused as error:
        raise SideFileError(path, error.reason) from None
    except FileNotFoundError:
        raise SideFileError(path, "cannot be read (No such file or directory)", missing=True) from None
    except IsADirectoryError:
        raise SideFileError(path, f"is a directory, not {what}") from None
    except OSError as error:
        raise SideFileError(path, f"cannot be read ({error.strerror or error})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SideFileError(path, f"not {what} (not UTF-8: byte 0x{data[error.start]:02x} at offset {error.start})") from None
    try:
        document = json.loads(text, parse_constant=_no_constant)
    except ValueError as error:  # JSONDecodeError, or NaN and Infinity (_no_constant)
        raise SideFileError(path, f"not {what} (invalid JSON: {error})") from None
    except RecursionError:
        raise SideFileError(path, f"not {what} (nested deeper than {MAX_DEPTH} levels)") from None
    if _depth_over(document, MAX_DEPTH):
        raise SideFileError(path, f"not {what} (nested deeper than {MAX_DEPTH} levels)")
    return document


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth_over(document: Any, limit: int) -> bool:
    """Whether ``document`` nests lists and objects more than ``limit`` deep (iteratively: no recursion)."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (list, dict)):
            if depth > limit:
                return True
            stack.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return False
