"""Run ``autograd-lint`` as a process, the way the tests of the command line need it.

``run_cli(args, cwd=...)`` returns what ``subprocess.run([sys.executable, "-m",
"autograd_lint", *args], capture_output=True)`` would: the exit code, stdout and stderr
of a separate process, with its own working directory, environment and standard
streams.  By default that process is forked from the test process after the command
line, the sub-command's module, libcst and the rules are imported once there: the
child then runs :func:`autograd_lint.cli.main` exactly as the console script does,
but skips the interpreter start and the imports, which cost about 0.7 s of CPU per
run (0.09 s forked; a few hundred runs per interpreter in CI).

What a fork cannot show, a real interpreter start does: the tests of the entry
point, of the interpreter's own stream settings (``PYTHONIOENCODING``, closed
streams), of signals, of deep code (a forked child starts deep in pytest's stack)
and of ``--watch`` start ``python -m autograd_lint`` themselves
(tests/robustness/test_hostile_input.py, test_deep_code_and_lines.py,
tests/cli/test_ruff_conventions.py).  ``run_cli`` also starts a real interpreter when
the environment it is given changes a ``PYTHON*`` variable, where ``os.fork`` is
missing, and for every run when ``AUTOGRAD_LINT_TESTS_SUBPROCESS=1`` is set (a
full-fidelity run of the suite).
"""

from __future__ import annotations

import importlib
import locale
import os
import selectors
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Mapping, Sequence

ALWAYS_SUBPROCESS = os.environ.get("AUTOGRAD_LINT_TESTS_SUBPROCESS") == "1"


def run_cli(
    args: Sequence[str],
    *,
    cwd: Path | str,
    input: bytes | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    text: bool = True,
) -> subprocess.CompletedProcess:
    """``autograd-lint *args`` run in ``cwd`` as its own process; see the module docstring.

    ``env`` replaces the whole environment, as ``subprocess.run``'s does; ``text``
    decodes the output as ``subprocess.run(text=True)`` does (locale encoding, universal
    newlines); ``subprocess.TimeoutExpired`` is raised after ``timeout`` seconds, with
    the process killed.
    """
    command = [sys.executable, "-m", "autograd_lint", *args]
    if ALWAYS_SUBPROCESS or not hasattr(os, "fork") or _changes_interpreter_settings(env):
        return subprocess.run(
            command, cwd=cwd, input=input, env=None if env is None else dict(env),
            capture_output=True, text=text, timeout=timeout,
        )  # fmt: skip
    _import_for(args)
    stdin_data = input.encode(locale.getpreferredencoding(False)) if isinstance(input, str) else input
    returncode, stdout, stderr = _run_forked(list(args), Path(cwd), stdin_data, env, timeout, command)
    if text:
        return subprocess.CompletedProcess(command, returncode, _decode(stdout), _decode(stderr))
    return subprocess.CompletedProcess(command, returncode, stdout, stderr)


def interpreter_settings(env: Mapping[str, str], ignore: tuple[str, ...] = ()) -> dict[str, str]:
    """The ``PYTHON*`` variables of ``env`` but ``ignore``: they act when an interpreter
    starts, which a forked process never does."""
    return {name: value for name, value in env.items() if name.startswith("PYTHON") and name not in ignore}


def _changes_interpreter_settings(env: Mapping[str, str] | None) -> bool:
    """Whether ``env`` sets or drops a ``PYTHON*`` variable the test process has."""
    return env is not None and interpreter_settings(env) != interpreter_settings(os.environ)


def _import_for(args: Sequence[str]) -> None:
    """Import, in this process, what a run of ``args`` imports, so that each child has it."""
    from autograd_lint import cli

    command = next((argument for argument in args if not argument.startswith("-")), None)
    if command in cli.SUBCOMMANDS:
        importlib.import_module(cli.SUBCOMMANDS[command][0])
    if command == "check":
        from autograd_lint.lint import output
        from autograd_lint.rules import all_rules

        all_rules()
        del output


def _run_forked(
    args: list[str], cwd: Path, stdin_data: bytes | None, env: Mapping[str, str] | None,
    timeout: float, command: list[str],
) -> tuple[int, bytes, bytes]:  # fmt: skip
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    with warnings.catch_warnings():
        # 3.12+ warns that forking a process with threads (pytest-xdist's I/O thread) may
        # deadlock in the child; the child runs only autograd-lint, which takes none of their locks.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(args, cwd, env, (in_read, out_write, err_write), (in_write, out_read, err_read))
    os.close(in_read)
    os.close(out_write)
    os.close(err_write)
    if stdin_data:
        # Written before reading: the tests' inputs are far smaller than a pipe's buffer.
        os.write(in_write, stdin_data)
    os.close(in_write)
    outputs = {out_read: bytearray(), err_read: bytearray()}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for descriptor in outputs:
            selector.register(descriptor, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            ready = selector.select(max(remaining, 0)) if remaining > 0 else []
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                for descriptor in outputs:
                    os.close(descriptor)
                raise subprocess.TimeoutExpired(command, timeout, bytes(outputs[out_read]), bytes(outputs[err_read]))
            for key, _ in ready:
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    outputs[key.fd] += chunk
                else:
                    selector.unregister(key.fd)
                    os.close(key.fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), bytes(outputs[out_read]), bytes(outputs[err_read])


def _child(args: list[str], cwd: Path, env: Mapping[str, str] | None, ours: tuple[int, int, int],
           theirs: tuple[int, int, int]) -> None:  # fmt: skip
    """Become ``autograd-lint *args``: standard streams on the pipes, then ``main``; exit with its code."""
    code = 70
    try:
        for descriptor in theirs:
            os.close(descriptor)
        for descriptor, standard in zip(ours, (0, 1, 2)):
            os.dup2(descriptor, standard)
            os.close(descriptor)
        os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        # New stream objects on the pipes: pytest's capture objects are not the process's streams.
        sys.stdin = open(0, encoding=locale.getpreferredencoding(False), closefd=False)
        sys.stdout = open(1, "w", encoding=locale.getpreferredencoding(False), closefd=False)
        sys.stderr = open(2, "w", encoding=locale.getpreferredencoding(False), errors="backslashreplace",
                          closefd=False, buffering=1)  # fmt: skip
        sys.argv = ["autograd-lint", *args]
        from autograd_lint.cli import main

        try:
            code = main(args)
        except SystemExit as exit_:  # argparse's usage errors and --help
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            if isinstance(exit_.code, str):
                print(exit_.code, file=sys.stderr)
    except BaseException:  # as an interpreter would: the traceback on stderr, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _decode(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` gives them: locale encoding, universal newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")
