"""``[tool.autograd-lint]`` in ``pyproject.toml``: finding it, checking it, and turning it into :class:`Settings`.

Discovery follows ruff: the configuration is the closest ``pyproject.toml``
that has a ``[tool.autograd-lint]`` table, looking first in the directory that
holds every checked path and then in each parent up to the filesystem root;
a ``pyproject.toml`` without the table is passed over.  Unlike ruff, one run
uses one configuration for all its files, because a Function's base class may
live in another file and both must be analysed with the same settings.

A table may name another configuration file with ``extend = "../pyproject.toml"``
(ruff's key), resolved from the directory of the file that names it: the base
is read first (and its own base before it), and each key of the extending file
replaces the base's value, except ``extend-select`` and ``extend-exclude``,
which add to it.  A chain that comes back to a file it already read is refused.

Every problem with a configuration is a :class:`ConfigError` whose text is the
one line a front end prints: the file, the key, and what is wrong with it.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from autograd_lint.files import Refused, read_regular
from autograd_lint.settings import Settings

CONFIG_FILE = "pyproject.toml"
# No real pyproject.toml comes near this; a larger file is not read.
_MAX_CONFIG_BYTES = 16 << 20
TABLE = "tool.autograd-lint"

# A rule code or a prefix of one; "ALL" selects every rule.
_SELECTOR = re.compile(r"^(?:ALL|AGL[0-9]{0,3})$", re.IGNORECASE)


class ConfigError(Exception):
    """A configuration that cannot be used; ``str()`` is the one line to print."""


@functools.lru_cache(maxsize=1)
def rule_codes() -> frozenset[str]:
    """Every rule's code, read from the names of the rule modules (``rules/aglNNN_*.py``).

    The rule catalogue (:func:`autograd_lint.rules.all_rules`) finds the rules by
    the same names; it is not imported here, as configuration sits below the rules.
    """
    directory = Path(__file__).parent / "rules"
    return frozenset(
        name[:6].upper() for name in os.listdir(directory) if re.match(r"agl[0-9]{3}_\w*\.py$", name)
    )


def selectors(values: Sequence[str], where: str) -> tuple[str, ...]:
    """``values`` as upper-case rule selectors; :class:`ConfigError` names ``where`` for a bad one.

    A selector that selects no rule (``AGL999``, ``AGL9``: a typo) is an error too,
    not a run that silently checks nothing.
    """
    result = []
    for value in values:
        if not isinstance(value, str) or not _SELECTOR.match(value):
            raise ConfigError(f"{where}: {value!r} is not a rule code or prefix (AGL001, AGL0, AGL or ALL)")
        selector = value.upper()
        if selector != "ALL" and not any(code.startswith(selector) for code in rule_codes()):
            raise ConfigError(f"{where}: {value!r} selects no rule (no rule code starts with it)")
        result.append(selector)
    return tuple(result)


def qualified_names(values: Sequence[str], where: str) -> frozenset[str]:
    """``values`` as dotted Python names (``pkg.module.Base``)."""
    for value in values:
        if not isinstance(value, str) or not all(part.isidentifier() for part in value.split(".")):
            raise ConfigError(f"{where}: {value!r} is not a qualified name such as 'mypkg.autograd.Base'")
    return frozenset(values)


def identifiers(values: Sequence[str], where: str) -> frozenset[str]:
    """``values`` as attribute names (``cache``)."""
    for value in values:
        if not isinstance(value, str) or not value.isidentifier():
            raise ConfigError(f"{where}: {value!r} is not an attribute name")
    return frozenset(values)


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return value


def _per_file_ignores(value: object, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table of glob = [codes], got {value!r}")
    return tuple(
        (glob, selectors(_strings(codes, f"{where} {glob!r}"), f"{where} {glob!r}")) for glob, codes in value.items()
    )


def _function_table(what: str) -> Callable[[object, str], tuple[tuple[str, str], ...]]:
    """The parser of a table of ``'pkg.module.Function' = what`` (a string, checked by gen-tests)."""

    def parse(value: object, where: str) -> tuple[tuple[str, str], ...]:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{where}: expected a table of 'pkg.module.Function' = {what}, got {value!r}")
        qualified_names(list(value), where)
        return tuple(sorted(value.items()))

    return parse


# key -> (Settings field, parse(value, where) -> the field's value)
KEYS: dict[str, tuple[str, Callable[[Any, str], Any]]] = {
    "select": ("select", lambda v, w: selectors(_strings(v, w), w)),
    "ignore": ("ignore", lambda v, w: selectors(_strings(v, w), w)),
    "extend-select": ("extend_select", lambda v, w: selectors(_strings(v, w), w)),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores),
    "exclude": ("exclude", lambda v, w: tuple(_strings(v, w))),
    "extend-exclude": ("extend_exclude", lambda v, w: tuple(_strings(v, w))),
    "extra-function-bases": ("extra_bases", lambda v, w: qualified_names(_strings(v, w), w)),
    "allowed-ctx-tensor-attributes": ("allowed_ctx_tensor_attributes", lambda v, w: identifiers(_strings(v, w), w)),
    "surrogate-gradients": ("surrogate_gradients", _function_table("'reference or empty'")),
    "gradcheck-tolerances": ("gradcheck_tolerances", _function_table("'atol=..., rtol=...'")),
    "low-precision": ("low_precision", _function_table("'dtype=... [device=...] [k=...] reference=...'")),
    "uses-compile": ("uses_compile", lambda v, w: _boolean(v, w)),
    "cache-dir": ("cache_dir", lambda v, w: _string(v, w)),
}


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a directory path, got {value!r}")
    return value


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _display(path: Path) -> str:
    """``path`` relative to the working directory when it is under it, as people typed it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_table(path: Path) -> dict[str, Any] | None:
    """The ``[tool.autograd-lint]`` table of the TOML file ``path``, or None when it has none."""
    # Imported here: a run without a configuration file (--isolated, none found) does
    # not need the parser, 5-10% of a run replayed from the cache.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # tomllib is new in 3.11; tomli is the same parser, published on its own.
        import tomli as tomllib
    try:
        # Through the one reader: a FIFO named pyproject.toml must not block the run.
        document = tomllib.loads(read_regular(str(path), _MAX_CONFIG_BYTES).decode("utf-8"))
    except Refused as error:
        raise ConfigError(f"{_display(path)}: {error.reason}") from None
    except OSError as error:
        raise ConfigError(f"{_display(path)}: cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError as error:
        # TOML is UTF-8; tomllib decodes the whole file and lets the decoder's error through.
        problem = f"not UTF-8 (byte 0x{error.object[error.start]:02x} at offset {error.start})"
        raise ConfigError(f"{_display(path)}: {problem}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{_display(path)}: invalid TOML ({error})") from None
    except RecursionError:
        raise ConfigError(f"{_display(path)}: invalid TOML (nested too deeply)") from None
    tool = document.get("tool")
    table = tool.get("autograd-lint") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{_display(path)}: [{TABLE}] must be a table")
    return table


# The key naming the configuration file a table builds on; not a setting itself.
EXTEND = "extend"
# Keys whose value adds to the base's instead of replacing it, as in ruff.
_ADDED_TO_BASE = frozenset({"extend-select", "extend-exclude"})


def settings_from_table(table: dict[str, Any], path: Path, base: Settings | None = None) -> Settings:
    """``base`` (the defaults) with the keys of ``table`` (read from ``path``) applied."""
    base = base or Settings()
    changes = {}
    for key, value in table.items():
        if key == EXTEND:
            continue  # followed by load_settings
        if key not in KEYS:
            import difflib  # for the hint only: its import costs every run 0.01 s

            close = difflib.get_close_matches(key, [*KEYS, EXTEND], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{_display(path)}: [{TABLE}] unknown key {key!r}{hint}")
        field, parse = KEYS[key]
        changes[field] = parse(value, f"{_display(path)}: [{TABLE}] {key}")
        if key == "cache-dir":
            # Relative to the file that sets it, wherever the run started (as ruff's cache-dir).
            changes[field] = os.path.abspath(path.parent / os.path.expanduser(changes[field]))
        if key in _ADDED_TO_BASE:
            changes[field] = getattr(base, field) + changes[field]
    return replace(base, **changes)


def extended_chain(path: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The tables of ``path`` and of the files it extends, the base of them all first.

    Raises :class:`ConfigError` for a file without the table, a missing file or a cycle.
    """
    chain: list[tuple[Path, dict[str, Any]]] = []
    seen: list[Path] = []
    current = path
    while True:
        resolved = current.resolve()
        if resolved in seen:
            cycle = " -> ".join(_display(file) for file in [*seen[seen.index(resolved):], resolved])
            raise ConfigError(f"{_display(chain[-1][0])}: [{TABLE}] {EXTEND}: cycle {cycle}")
        seen.append(resolved)
        table = read_table(current)
        if table is None:
            raise ConfigError(f"{_display(current)}: has no [{TABLE}] table")
        chain.append((current, table))
        base = table.get(EXTEND)
        if base is None:
            return chain[::-1]
        where = f"{_display(current)}: [{TABLE}] {EXTEND}"
        if not isinstance(base, str) or not base:
            raise ConfigError(f"{where}: expected the path of a configuration file, got {base!r}")
        # Relative to the file that names it, wherever the run started (ruff's rule).
        current = current.parent / os.path.expanduser(base)
        if not current.is_file():
            raise ConfigError(f"{where}: {base!r}: no such file")


def find_config(paths: Sequence[str | os.PathLike[str]]) -> Path | None:
    """The closest ``pyproject.toml`` with a ``[tool.autograd-lint]`` table, above every path in ``paths``."""
    absolute = [os.path.abspath(p) for p in paths] or [os.getcwd()]
    try:
        start = Path(os.path.commonpath(absolute))
    except ValueError:  # paths on different drives have no common parent
        start = Path.cwd()
    if not start.is_dir():
        start = start.parent
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_FILE
        if candidate.is_file() and read_table(candidate) is not None:
            return candidate
    return None


def extended_files(path: Path) -> list[Path]:
    """``path`` and the files its ``extend`` chain names, as far as the chain can be followed.

    What a watcher looks at: a file that is missing, or that cannot be read, ends
    the list (it is in it, so that its repair is seen); a cycle ends it too.
    """
    files: list[Path] = []
    current = path
    while current.resolve() not in {file.resolve() for file in files}:
        files.append(current)
        try:
            table = read_table(current) if current.is_file() else None
        except ConfigError:
            break
        base = table.get(EXTEND) if table else None
        if not isinstance(base, str) or not base:
            break
        current = current.parent / os.path.expanduser(base)
    return files


def load_settings(path: Path) -> Settings:
    """The settings that the configuration file ``path`` asks for, with the files it extends; it must have the table."""
    settings = Settings()
    for file, table in extended_chain(path):
        settings = settings_from_table(table, file, settings)
    return settings


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config PATH`` and ``--isolated``, as every command that analyses code takes them."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--config", type=Path, metavar="PATH", help="read [tool.autograd-lint] from this file only")
    group.add_argument("--isolated", action="store_true", help="ignore every configuration file")


def project_settings(
    paths: Sequence[str | os.PathLike[str]], config: Path | None = None, isolated: bool = False
) -> Settings:
    """The settings of the project that holds ``paths``: ``config`` if given, else the file
    :func:`find_config` finds, else the defaults (always the defaults when ``isolated``).

    Every front end (``check``, ``gen-tests``, ``pragma``, flake8) reads the
    configuration through here, so they all see the same bases and options.
    Raises :class:`ConfigError`.
    """
    if isolated:
        return Settings()
    path = config or find_config(paths)
    return load_settings(path) if path else Settings()
