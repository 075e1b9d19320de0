"""The ``autograd-lint`` command line: one sub-command per front end.

Each sub-command lives in its own module, imported only when it runs, that
defines ``add_arguments(parser)`` and ``run(args) -> int``.  Exit codes are the
sub-command's own; every sub-command uses 2 for a usage error.
"""

from __future__ import annotations

import argparse
import codecs
import importlib
import io
import os
import sys
from typing import NoReturn, Sequence

from autograd_lint import __version__

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "check": ("autograd_lint.lint.commands.check", "lint autograd.Function subclasses"),
    "rule": ("autograd_lint.lint.commands.rule", "show the documentation of a rule"),
    "gen-tests": ("autograd_lint.gentests.command", "write gradcheck tests for every Function"),
    "pragma": ("autograd_lint.coverage.pragma", "add or remove coverage pragmas on backward methods"),
    "server": ("autograd_lint.lint.commands.server", "serve diagnostics, quick fixes and rule pages to editors (LSP, stdio)"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command; with ``command``, only that one's module is
    imported to add its arguments (the others' imports cost every run 0.03 s)."""
    parser = argparse.ArgumentParser(
        prog="autograd-lint",
        description="Static checks, generated gradchecks and truthful coverage "
        "for custom torch.autograd.Function code.",
    )
    parser.add_argument("--version", action="version", version=f"autograd-lint {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(_module=module_name)
        if command is None or command == name:
            importlib.import_module(module_name).add_arguments(sub)
    return parser


# Options whose value must be attached with `=` (clap's require_equals, as in ruff's
# `--add-noqa[=REASON]`): argparse would otherwise take `--add-noqa ops.py` as a reason.
EQUALS_ONLY = frozenset({"--add-noqa"})


def _unencodable(error: UnicodeError) -> tuple[str | bytes, int]:
    """Write what the output's encoding lacks rather than fail: a file name's undecodable bytes
    (surrogate escapes) as the bytes they were, any other character as a ``\\u`` escape."""
    assert isinstance(error, UnicodeEncodeError)
    text = error.object[error.start : error.end]
    if all("\udc80" <= character <= "\udcff" for character in text):
        return codecs.lookup_error("surrogateescape")(error)
    return codecs.lookup_error("backslashreplace")(error)


codecs.register_error("autograd-lint-output", _unencodable)


def _robust_output() -> None:
    """Findings and errors are printed whatever the terminal's encoding (``PYTHONIOENCODING=ascii``)
    and whatever bytes a file name holds; a closed stdout or stderr (``>&-``) is read as /dev/null,
    so that the exit code still tells."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="autograd-lint-output")


def main(argv: Sequence[str] | None = None) -> int:
    _robust_output()
    arguments = sys.argv[1:] if argv is None else list(argv)
    # The sub-command is the first argument that is not an option (the parser's own
    # options take no value); anything else gets every sub-command's arguments.
    first = next((argument for argument in arguments if not argument.startswith("-")), None)
    parser = build_parser(first if first in SUBCOMMANDS else None)
    args = parser.parse_args([f"{a}=" if a in EQUALS_ONLY else a for a in arguments])
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        module = importlib.import_module(args._module)
        return int(module.run(args))
    except KeyboardInterrupt:
        # Writes are atomic (autograd_lint.files): an interrupted run leaves each file old or new.
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`check | head`): nothing more to say, and nowhere to say it.
        _quiet_broken_stdout()
        return 1


def _quiet_broken_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def console() -> NoReturn:
    """The console script and ``python -m autograd_lint``: :func:`main`, then the exit.

    After a ``check``, the process ends without the interpreter's teardown once its
    output is flushed, as mypy's command line does: freeing the objects of libcst and
    the rules, one by one, cost 0.15-0.2 s of CPU, a fifth of a run over a tree with one
    file edited.  Only when nothing waits for the exit: no ``atexit`` handler (coverage.py
    measuring the run, a pool's clean-up), no thread the interpreter would join, and no
    profiler or tracer (``python -m cProfile``/``trace`` write their results after the
    module returns, without ``atexit``).
    """
    code = main()
    if _exits_quickly():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # the usual exit says what went wrong
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def _exits_quickly() -> bool:
    """Whether this run may end without the interpreter's teardown (see :func:`console`)."""
    import atexit
    import threading

    first = next((argument for argument in sys.argv[1:] if not argument.startswith("-")), None)
    callbacks = getattr(atexit, "_ncallbacks", None)  # CPython's; elsewhere: the usual exit
    monitoring = getattr(sys, "monitoring", None)  # 3.12+: cProfile registers a tool there
    return (
        first == "check"
        and callbacks is not None
        and callbacks() == 0
        and sys.getprofile() is None
        and sys.gettrace() is None
        and (monitoring is None or all(monitoring.get_tool(tool) is None for tool in range(6)))
        and all(thread.daemon or thread is threading.main_thread() for thread in threading.enumerate())
    )
