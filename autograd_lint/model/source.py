r"""Reading Python source files: bytes to text, with one clear error per bad file.

It also holds the one definition of a *line* that every scan, cut and position
uses, Python's tokenizer's: a line ends at ``\n``, ``\r\n`` or a lone ``\r``,
and nowhere else.  ``str.splitlines()`` also splits at form feeds, U+2028,
U+0085 and other characters that Python reads as part of a line (in a comment,
a string, or indentation); it must not be used on source text.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import threading
import tokenize
from dataclasses import dataclass
from typing import Sequence

from autograd_lint.files import Refused, read_regular

# The largest source file read: its text is scanned whole.  What is parsed has its
# own, tighter bound (model.guard.MAX_PARSED_CHARS).
MAX_SOURCE_BYTES = 32 << 20
_LONE_CR = re.compile(r"\r(?!\n)")
# One line and its break, as the tokenizer ends lines (the last line may have no break).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
# Python's first two lines, where a PEP 263 cookie counts: a lone \r ends a line too.
_FIRST_TWO_LINES = re.compile(rb"([^\r\n]*(?:\r\n|\r|\n)?)([^\r\n]*(?:\r\n|\r|\n)?)")


class SourceError(Exception):
    """A file that could not be read, decoded or parsed.

    ``str()`` gives the single line the front ends print: ``path: problem``.
    """

    def __init__(self, path: str, problem: str, line: int | None = None) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem
        self.line = line

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.problem}"

    def __reduce__(self) -> tuple[type, tuple[str, str, int | None]]:
        # Keeps the extra fields when the error crosses a process boundary.
        return (SourceError, (self.path, self.problem, self.line))


@dataclass(frozen=True)
class SourceFile:
    r"""The decoded text of one file, and the dotted module name it would import as.

    ``text`` has its lone ``\r`` line breaks (old Mac files, mixed endings) turned
    into ``\n``, as Python's tokenizer and flake8 read them: the same length, so
    offsets, lines and columns are the file's, and every scan can look for ``\n``
    alone.  ``\r\n`` is kept.
    """

    path: str
    text: str
    module: str | None

    def __post_init__(self) -> None:
        if "\r" in self.text:
            object.__setattr__(self, "text", without_lone_cr(self.text))


def without_lone_cr(text: str) -> str:
    r"""``text`` with each ``\r`` that is not followed by ``\n`` replaced by ``\n``."""
    return _LONE_CR.sub("\n", text)


def has_lone_cr(text: str) -> bool:
    r"""Whether ``text`` ends a line with a lone ``\r``."""
    return "\r" in text and _LONE_CR.search(text) is not None


# The last texts parsed by :mod:`ast`, with their trees (None: it does not parse), newest last.
_TREES: dict[str, ast.Module | None] = {}
_TREES_KEPT = 2
_TREES_LOCK = threading.Lock()


def python_tree(text: str) -> ast.Module | None:
    """``text`` parsed by :mod:`ast` (a small fraction of a libcst parse), or None when it does
    not parse.  Cached: the module's ``apply`` call sites are read for discovery's
    cross-file counts and for the rules, from the same text; and the guard, which parses
    every analysed text with CPython first, leaves its tree here (:func:`keep_python_tree`).
    Callers only read the tree."""
    with _TREES_LOCK:
        if text in _TREES:
            tree = _TREES.pop(text)
            _TREES[text] = tree
            return tree
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None
    keep_python_tree(text, tree)
    return tree


def keep_python_tree(text: str, tree: ast.Module | None) -> None:
    """Remember ``tree`` as what ``ast.parse(text)`` gives (the guard's own parse of ``text``,
    made with the same flags: a whole-file parse less per check of a large file)."""
    with _TREES_LOCK:
        _TREES.pop(text, None)
        _TREES[text] = tree
        while len(_TREES) > _TREES_KEPT:
            del _TREES[next(iter(_TREES))]


@functools.lru_cache(maxsize=16)
def split_lines(text: str) -> tuple[str, ...]:
    r"""``text``'s lines as Python's tokenizer counts them, each with its line break.

    A line ends at ``\n``, ``\r\n`` or a lone ``\r`` (the Language Server
    Protocol counts lines the same way), and each line keeps its own break;
    unlike ``str.splitlines(keepends=True)``, nothing else ends a line.  Cached:
    the engine and the rules ask for the lines of the same file again and again.
    """
    if "\r" in text:
        return tuple(_LINE.findall(text))
    lines = [line + "\n" for line in text.split("\n")]
    last = lines.pop()[:-1]
    if last:
        lines.append(last)
    return tuple(lines)


def decode_source(data: bytes, path: str, *, for_rewrite: bool = False) -> str:
    """Decode ``data`` as Python source (PEP 263 cookie or BOM, else UTF-8).

    CPython compiles a file whose undecodable bytes are all in comments (importlib
    hands ``compile`` the bytes, so such a module imports); those bytes are read
    as U+FFFD, which keeps every line and every column of code.  A rewrite
    (``for_rewrite``) would change them, so there they are an error.

    Raises :class:`SourceError` for NUL bytes, an unknown encoding or undecodable
    bytes that Python does not accept either.
    """
    nul = data.find(b"\x00")
    if nul != -1:
        line = _byte_line(data, nul)
        raise SourceError(path, "contains a NUL byte; is it a Python file?", line)
    try:
        encoding = source_encoding(data)
    except SyntaxError as exc:
        # detect_encoding also fails on undecodable bytes in the first two lines;
        # decoding as UTF-8 then says exactly where they are.
        encoding, cookie_problem = "utf-8", exc.msg
    else:
        cookie_problem = None
    codec = "utf-8-sig" if encoding == "utf-8-sig" else encoding
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        line = _byte_line(data, exc.start)
        bad = data[exc.start : exc.start + 1].hex()
        where = f"byte 0x{bad} at offset {exc.start}"
        if not python_compiles(data):
            raise SourceError(path, f"cannot be decoded as {encoding} ({where})", line) from None
        if for_rewrite:
            raise SourceError(
                path, f"not rewritten: {where} is not {encoding} (Python skips it in a comment)", line
            ) from None
        return data.decode(codec, errors="replace")
    except LookupError:
        raise SourceError(path, f"unknown encoding {encoding!r}") from None
    if cookie_problem is not None:
        raise SourceError(path, f"bad encoding declaration: {cookie_problem}")
    return text


def encode_source(text: str, encoding: str) -> bytes:
    """``text`` as the bytes of a file read in ``encoding`` (:func:`source_encoding`'s: ``utf-8-sig``
    writes the BOM back); raises ``UnicodeEncodeError`` for a character the encoding lacks."""
    return text.encode(encoding)


def with_line_ends_of(original: str, text: str, path: str) -> str:
    r"""``text``, a rewrite of the :class:`SourceFile` text read from ``original``, with ``original``'s line ends.

    A :class:`SourceFile` reads a lone ``\r`` as ``\n``: a file that ends its
    lines with ``\r`` gets them back.  A file that mixes lone ``\r`` with other
    endings can't be given its own back: :class:`SourceError`.
    """
    if not has_lone_cr(original):
        return text
    if "\n" in original:
        raise SourceError(path, "mixes lone \\r line endings with others; fixes not written")
    return text.replace("\n", "\r")


def source_encoding(data: bytes) -> str:
    r"""The encoding Python reads ``data`` in: a BOM or a PEP 263 cookie, else UTF-8.

    ``tokenize.detect_encoding`` reads lines up to ``\n`` only, so in a file whose
    lines end with a lone ``\r`` it takes the whole file for its first line and may
    find a "cookie" far below (a comment saying ``coding: ...``); Python's tokenizer
    does not.  Raises ``SyntaxError`` as ``detect_encoding`` does.
    """
    first_two = _FIRST_TWO_LINES.match(data)
    lines = iter(first_two.groups() if first_two is not None else ())
    encoding, _ = tokenize.detect_encoding(lambda: next(lines, b""))
    return encoding


def python_compiles(data: bytes) -> bool:
    """Whether CPython parses ``data`` as a module, the way ``import`` reads a file's bytes."""
    try:
        compile(data, "<source>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


def _byte_line(data: bytes, offset: int) -> int:
    r"""The 1-based line of byte ``offset`` (``\n``, ``\r\n`` and a lone ``\r`` end lines)."""
    before = data[:offset]
    return before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1


def module_name(path: str | os.PathLike[str]) -> str | None:
    """The dotted name ``path`` imports as, found by walking up through ``__init__.py`` packages.

    ``pkg/sub/mod.py`` gives ``pkg.sub.mod`` when ``pkg`` and ``sub`` hold an
    ``__init__.py``; a file outside any package gives its bare stem.
    """
    given, name = os.path.split(os.fspath(path))
    stem, suffix = os.path.splitext(name)
    if suffix not in (".py", ".pyi"):
        return None
    prefix = _package_parts(_absolute(os.getcwd(), given))
    parts = [*prefix] if stem == "__init__" else [*prefix, stem]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


@functools.lru_cache(maxsize=4096)
def _absolute(cwd: str, directory: str) -> str:
    # os.path.abspath of a file's directory, once per directory: normalising every file's
    # path was most of the cost of a run whose results come from the cache.
    return os.path.normpath(os.path.join(cwd, directory))


@functools.lru_cache(maxsize=4096)
def _package_parts(directory: str) -> tuple[str, ...]:
    # Cached per directory: a run over a tree asks for every file of a directory.
    name = os.path.basename(directory)
    if not name.isidentifier() or not os.path.isfile(os.path.join(directory, "__init__.py")):
        return ()
    return (*_package_parts(os.path.dirname(directory)), name)


def namespace_names(path: str | os.PathLike[str], roots: Sequence[str]) -> list[str]:
    """The other dotted names ``path`` imports as when ``roots`` are on ``sys.path`` and the
    directories between a root and the file are namespace packages (no ``__init__.py``).

    :func:`module_name` walks up through ``__init__.py`` packages only, so in a tree
    without them ``models/base.py`` is ``base``; here it is also ``models.base`` for the
    root above ``models``.  For each root (absolute paths, in order) that holds the
    file: the names relative to the root, then relative to the root's ``src/`` (a src
    layout).  Names equal to :func:`module_name`'s are left out; every part must be an
    identifier.
    """
    regular = module_name(path)
    if regular is None:
        return []
    directory = os.path.dirname(os.path.abspath(path))
    # The directory above the file's regular package chain (its own directory without one).
    top = directory
    for _ in range(len(regular.split(".")) - (0 if os.path.basename(path).startswith("__init__.") else 1)):
        top = os.path.dirname(top)
    names: list[str] = []
    for root in roots:
        for base in (root, os.path.join(root, "src")):
            relative = os.path.relpath(top, base)
            if relative == os.curdir:
                continue  # the regular name itself
            parts = relative.split(os.sep)
            if parts[0] == os.pardir or not all(part.isidentifier() for part in parts):
                continue
            name = ".".join([*parts, regular])
            if name not in names:
                names.append(name)
    return names


def read_source_bytes(path: str) -> bytes:
    """The bytes of the source file ``path``, through the one reader (regular files only).

    Every command reads the user's source through here; raises :class:`SourceError`
    with the reason when it can't (a FIFO, a device, a file over
    :data:`MAX_SOURCE_BYTES`, a missing or unreadable file).
    """
    try:
        return read_regular(path, MAX_SOURCE_BYTES)
    except Refused as exc:
        raise SourceError(path, exc.reason) from None
    except IsADirectoryError:
        raise SourceError(path, "is a directory") from None
    except FileNotFoundError:
        raise SourceError(path, "no such file or directory") from None
    except OSError as exc:
        raise SourceError(path, f"cannot be read: {exc.strerror or exc}") from None


def read_source(path: str) -> SourceFile:
    """Read and decode one file; raises :class:`SourceError` with the reason when it can't."""
    data = read_source_bytes(path)
    return SourceFile(path=path, text=decode_source(data, path), module=module_name(path))
