"""A persistent store of per-file results, so that a run re-analyses only what changed.

:mod:`autograd_lint.model.discovery` decides what one file's result depends on
(its text, its module name, the run's settings, and the facts of other files
that its analysis read); this module keeps the results under those keys, in
one file per *context*: the tool's own code, the interpreter, libcst, the
settings and the kind of job (see :func:`context_digest`).  A result is only
ever taken for a key equal to the one it was stored under, and its recorded
dependencies are checked by the caller, so a result read from here is the one
a fresh run would compute.

Layout (as ruff's ``.ruff_cache``)::

    .autograd_lint_cache/
        .gitignore          "*": git never shows the cache
        CACHEDIR.TAG        backup tools skip it
        v1/<context>.pickle
        v1/run-<key>.pickle the last report of one command line (see replay_run)

Concurrent runs are safe: each run reads the store once, and writes it once at
its end through :func:`autograd_lint.files.write_atomically` (a temporary file
and one ``os.replace``), after merging what another run wrote meanwhile.  A
reader sees a whole store, old or new; the worst a race does is lose the other
run's new entries, which the next run computes again.  A store that can't be
read (truncated, from another version) counts as empty; one that can't be
written is skipped with a warning.

Above the per-file results, a *run record* (:func:`record_run`, :func:`replay_run`)
keeps the last report of one command line over one list of files, with each
file's signature and content digest: a run over an unchanged tree (most runs of
pre-commit, CI and an editor's save) prints it after a walk and one ``stat`` per
file, without reading the per-file store or importing the analysis.  Any
difference in the list or a content sends the run the per-file way.

A file's content is hashed to find its results; the hash is remembered with
the file's ``stat`` signature (inode, size, modification and change times, as
git's index does), so that an unchanged file is not read again.  A signature is
only remembered when both times lie more than :data:`_RACY_NS` before it was
taken: a file written within the clock's granularity of being read could
change again without changing its signature.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import pickle
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from autograd_lint.files import write_atomically

if TYPE_CHECKING:
    from autograd_lint.settings import Settings

try:  # the builtin module itself: hashlib would load OpenSSL first (0.01-0.02 s of every run)
    from _blake2 import blake2b
except ImportError:  # another Python implementation
    from hashlib import blake2b

DIRECTORY = ".autograd_lint_cache"
_FORMAT = "v1"
_GITIGNORE = b"# Written by autograd-lint: the cache is never committed.\n*\n"
_CACHEDIR_TAG = b"Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by autograd-lint.\n"
_RACY_NS = 2_000_000_000
# Entries and stores unused for this long are dropped when a store is written.
_KEEP_NS = 30 * 24 * 3600 * 1_000_000_000

# (inode, size, mtime_ns, ctime_ns)
Signature = tuple[int, int, int, int]


def _canonical(value: Any) -> Any:
    """``value`` as nested tuples of plain values that compare and print the same in every process.

    Sets are sorted (their iteration order follows string hashes, which differ per
    process); dataclass fields that do not take part in comparison (libcst nodes,
    semantic models) are left out, as pickling leaves them out.
    """
    if value is None or isinstance(value, (str, int, float, bytes)):
        return value
    if isinstance(value, enum.Enum):
        return (type(value).__qualname__, value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple(
            (f.name, _canonical(getattr(value, f.name))) for f in dataclasses.fields(value) if f.compare
        )
        return (type(value).__qualname__, fields)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((_canonical(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted((_canonical(item) for item in value), key=repr)))
    pattern = getattr(value, "pattern", None)
    if isinstance(pattern, str):  # a compiled regular expression
        return ("re", pattern, value.flags)
    raise TypeError(f"no canonical form for {type(value).__qualname__}")


def fingerprint(*values: Any) -> bytes:
    """A digest of ``values`` that is the same in every process for equal values."""
    return blake2b(repr(_canonical(values)).encode("utf-8", "surrogatepass"), digest_size=20).digest()


def key(*parts: str | bytes) -> bytes:
    """A digest of strings and bytes, each told apart from the next (a quicker
    :func:`fingerprint`, for the key of every file of a run)."""
    encoded = [part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part for part in parts]
    lengths = b"".join(len(data).to_bytes(4, "little") for data in encoded)
    return blake2b(lengths + b"".join(encoded), digest_size=20).digest()


def _tool_fingerprint() -> bytes:
    """The running code: autograd-lint's modules (by name, size and modification time),
    its version, the interpreter and libcst, whose parser and code generation results
    depend on."""
    import autograd_lint

    package = os.path.dirname(os.path.abspath(autograd_lint.__file__))
    parts: list[object] = [autograd_lint.__version__, sys.version, sys.implementation.cache_tag]
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                info = os.stat(os.path.join(root, name))
                parts.append((os.path.relpath(os.path.join(root, name), package), info.st_size, info.st_mtime_ns))
    parts.append(_libcst_version())
    return fingerprint(*parts)


def _libcst_version() -> str:
    """libcst's version, read from its ``_version.py`` without importing libcst (0.1 s)."""
    import importlib.util

    spec = importlib.util.find_spec("libcst")
    if spec is None or spec.origin is None:
        return "?"
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "_version.py"), "rb") as stream:
            return stream.read().decode("utf-8", "replace")
    except OSError:
        return spec.origin


def context_digest(*values: Any) -> str:
    """The name of the store for a run of this code with ``values`` (settings, job, ...)."""
    return fingerprint(_tool_fingerprint(), *values).hex()


def job_context(settings: Settings, job: Callable[..., object], needs: object) -> str:
    """The store's name for runs of ``job`` (a function of a module) with these settings and
    ``needs`` (a frozenset, None, or a function of a module); without the settings that change
    no result: the number of workers and where the cache lives."""
    from dataclasses import replace

    named = needs if needs is None or isinstance(needs, frozenset) else f"{needs.__module__}.{needs.__qualname__}"  # type: ignore[attr-defined]
    return context_digest(replace(settings, jobs=None, cache_dir=None), f"{job.__module__}.{job.__qualname__}", named)


def content_digest(data: bytes) -> bytes:
    """The digest a file's bytes are known by."""
    return blake2b(data, digest_size=20).digest()


def signature(info: os.stat_result) -> Signature:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclasses.dataclass
class _Store:
    # path -> (signature, content digest), for files unchanged since they were hashed
    contents: dict[str, tuple[Signature, bytes]] = dataclasses.field(default_factory=dict)
    # key -> (last used, ns since the epoch; dependencies; the result, pickled unless it
    # is a plain value: most files of a run are looked at and passed over, and unpickling
    # each of their results on its own cost more than the rest of a warm run)
    results: dict[bytes, tuple[int, object, object]] = dataclasses.field(default_factory=dict)


class ResultCache:
    """The store of one context, read when made and written by :meth:`save`."""

    def __init__(self, directory: str, context: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, _FORMAT, f"{context}.pickle")
        # The store as read, and the signature of the file it was read from (None: none read).
        self._read_as: Signature | None = None
        self._store = self._read() or _Store()
        self._now = time.time_ns()
        self._used: set[bytes] = set()
        self._added: dict[bytes, tuple[int, object, object]] = {}
        self._contents: dict[str, tuple[Signature, bytes]] = {}
        # What this run read of each file, for record_run: (signature or None, content digest).
        self.inputs: dict[str, tuple[Signature | None, bytes]] = {}
        self.inputs_changed = False

    def _read(self) -> _Store | None:
        try:
            with open(self.path, "rb") as stream:
                read_as = signature(os.fstat(stream.fileno()))
                store = pickle.load(stream)
        except Exception:  # missing, truncated, or written by other code: start empty
            return None
        self._read_as = read_as
        return store if isinstance(store, _Store) else None

    def known_content(self, path: str, info: os.stat_result) -> bytes | None:
        """The content digest of ``path`` if it is unchanged since it was hashed."""
        entry = self._store.contents.get(path)
        if entry is not None and entry[0] == signature(info):
            self._contents[path] = entry
            return entry[1]
        return None

    def hashed(self, path: str, info: os.stat_result, digest: bytes, taken_ns: int) -> None:
        """Remember that ``path``, with the ``stat`` ``info`` taken at ``taken_ns``, hashed to ``digest``."""
        if _trusted(info, taken_ns):
            self._contents[path] = (signature(info), digest)

    def read(self, path: str, info: os.stat_result, digest: bytes, taken_ns: int) -> None:
        """Note that this run read ``path`` (``stat`` ``info`` taken at ``taken_ns``) as ``digest``,
        for :func:`record_run`: its signature only when it can be trusted (see :func:`_trusted`).
        A file seen with two contents in one run leaves the run unrecorded."""
        seen = (signature(info) if _trusted(info, taken_ns) else None, digest)
        first = self.inputs.setdefault(path, seen)
        if first[1] != digest:
            self.inputs_changed = True

    def get(self, key: bytes) -> tuple[object, Any] | None:
        """The dependencies and result stored under ``key``, or None."""
        entry = self._added.get(key) or self._store.results.get(key)
        if entry is None:
            return None
        try:
            result = pickle.loads(entry[2]) if isinstance(entry[2], bytes) else entry[2]
        except Exception:
            return None
        self._used.add(key)
        return entry[1], result

    def put(self, key: bytes, dependencies: object, result: object, plain: bool = False) -> None:
        """Store ``result``, computed from what ``key`` names and ``dependencies`` held;
        ``plain`` for a value of builtin types that is never changed (not bytes), kept as it is."""
        value = result if plain else pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        self._added[key] = (self._now, dependencies, value)

    def save(self) -> str | None:
        """Write the store if this run added to it; the problem, in words, if it can't be written."""
        if not self._added and all(self._store.contents.get(p) == e for p, e in self._contents.items()):
            return None
        # What other runs wrote since this one read the store; none when the file is still the
        # one read (a store is only ever replaced whole, by a new file): reading it again after
        # an analysis cost 0.05-0.1 s of CPU, a tenth of a run over a tree with one file edited.
        latest = self._store if self._unchanged_on_disk() else self._read() or _Store()
        results = {k: v for k, v in latest.results.items() if v[0] >= self._now - _KEEP_NS}
        for key in self._used:
            entry = results.get(key) or self._store.results.get(key)
            if entry is not None:
                results[key] = (self._now, entry[1], entry[2])
        results.update(self._added)
        contents = {**latest.contents, **self._contents}
        try:
            _prepare(self.directory)
            _drop_stale_stores(os.path.dirname(self.path), self._now)
            data = pickle.dumps(_Store(contents, results), protocol=pickle.HIGHEST_PROTOCOL)
            write_atomically(self.path, data)
        except OSError as error:
            return f"{self.path}: cannot be written ({getattr(error, 'strerror', None) or error})"
        return None

    def _unchanged_on_disk(self) -> bool:
        """Whether the store's file is the one this run read (same inode, size and times)."""
        try:
            return self._read_as is not None and signature(os.stat(self.path)) == self._read_as
        except OSError:
            return False


def _trusted(info: os.stat_result, taken_ns: int) -> bool:
    """Whether a file's signature, taken at ``taken_ns``, changes with its content: both its
    times lie more than :data:`_RACY_NS` back (a write within the clock's granularity of the
    read could leave the signature as it was)."""
    return max(info.st_mtime_ns, info.st_ctime_ns) < taken_ns - _RACY_NS


# A whole run: each file read, in the walk's order, with its signature (None: not trusted,
# so its content is hashed again) and content digest; and what the run printed and returned.
RunInputs = tuple[tuple[str, "Signature | None", bytes], ...]


@dataclasses.dataclass
class RunRecord:
    inputs: RunInputs
    report: str
    code: int


def _run_path(directory: str, run_key: bytes) -> str:
    return os.path.join(directory, _FORMAT, f"run-{run_key.hex()}.pickle")


def replay_run(directory: str, run_key: bytes, files: Sequence[tuple[str, os.stat_result | None]]) -> RunRecord | None:
    """The record of the last run under ``run_key`` if it read exactly the paths of ``files``
    (in this order; each with its ``stat`` as the walk took it) and each still holds what
    it read, else None.

    This is what makes a run over an unchanged tree cost a walk and one ``stat`` per
    file (as ruff's warm run): the per-file store, the analysis, the custom-op and
    ``apply`` rounds and the rules are not loaded at all.  A file whose signature
    changed (touched, copied back) is hashed: the same content still replays, and the
    record is written again with the new signature so that the next run does not hash it.
    """
    from autograd_lint.model.source import SourceError, read_source_bytes

    path = _run_path(directory, run_key)
    try:
        with open(path, "rb") as stream:
            record = pickle.load(stream)
    except Exception:  # none yet, truncated, or from other code: the run goes the usual way
        return None
    if not isinstance(record, RunRecord) or len(record.inputs) != len(files):
        return None
    renewed: list[tuple[str, Signature | None, bytes]] = []
    for (name, walked), (recorded_name, recorded, digest) in zip(files, record.inputs):
        if name != recorded_name:
            return None
        if walked is not None and recorded is not None and signature(walked) == recorded:
            renewed.append((name, recorded, digest))
            continue
        try:
            taken = time.time_ns()
            info = os.stat(name)
            if content_digest(read_source_bytes(name)) != digest:
                return None
        except (OSError, SourceError):  # the usual way names the problem
            return None
        renewed.append((name, signature(info) if _trusted(info, taken) else None, digest))
    if any(new[1] != old[1] for new, old in zip(renewed, record.inputs)):
        record_run(directory, run_key, RunRecord(tuple(renewed), record.report, record.code))
    return record


def record_run(directory: str, run_key: bytes, record: RunRecord) -> str | None:
    """Write ``record`` for :func:`replay_run`; the problem, in words, if it can't be written."""
    path = _run_path(directory, run_key)
    try:
        _prepare(directory)
        write_atomically(path, pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError as error:
        return f"{path}: cannot be written ({getattr(error, 'strerror', None) or error})"
    return None


def _prepare(directory: str) -> None:
    """Create the cache directory with its ``.gitignore`` and ``CACHEDIR.TAG``, once."""
    for name, data in ((".gitignore", _GITIGNORE), ("CACHEDIR.TAG", _CACHEDIR_TAG)):
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            write_atomically(path, data)


def _drop_stale_stores(directory: str, now: int) -> None:
    """Remove stores no run has written for :data:`_KEEP_NS` (other versions, other settings)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if name.endswith(".pickle"):
            path = os.path.join(directory, name)
            try:
                if os.stat(path).st_mtime_ns < now - _KEEP_NS:
                    os.unlink(path)
            except OSError:
                pass
