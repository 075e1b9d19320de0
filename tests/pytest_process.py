"""``pytester.runpytest_subprocess`` without an interpreter start and a torch import per run.

The generated tests, the record plugin and the custom-op repros are tested by running
pytest on them in a process of its own (``pytester.runpytest_subprocess``), the way a
user runs them.  Each such process imports torch: about 3.5 s of CPU, paid by some
hundred runs of the suite.  ``run_pytest(pytester, *args)`` makes the same run, through
pytester's own ``runpytest_subprocess`` (same arguments, ``--basetemp``, output files,
timeout handling and ``RunResult``), but the process is forked from a *zygote*: a
process started once per test process, which imported torch and pytest and then waits.
The forked child takes the run's working directory, environment, ``sys.path`` (the
working directory first, then ``PYTHONPATH``, as ``python -m pytest`` has them),
``sys.argv``, standard streams (the output files, stdin at end of file) and a fresh
``random`` seed, runs ``pytest.console_main()`` as ``python -m pytest`` does, then the
``atexit`` functions, and exits with pytest's exit code.

Forking is safe only from a single-threaded process: torch starts no thread at import
and the zygote never runs a torch operation; it checks that it has exactly one thread
before it serves, and a real interpreter is started for every run otherwise.  A real
interpreter is also started when the run's environment changes a ``PYTHON*`` variable
other than ``PYTHONPATH`` (they take effect at interpreter start), where ``os.fork`` is
missing, and for every run when ``AUTOGRAD_LINT_TESTS_SUBPROCESS=1`` is set (a
full-fidelity run of the suite, as for ``cli_process.run_cli``).
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest
from cli_process import ALWAYS_SUBPROCESS, interpreter_settings

# The child sets sys.path from PYTHONPATH itself; every other PYTHON* variable needs a real start.
_SET_BY_THE_CHILD = ("PYTHONPATH",)

# The zygote: imports what every run imports, checks that it is alone, then serves one
# JSON request per line on stdin: forks, answers the child's pid, waits, answers its status.
_ZYGOTE = r"""
import json, os, sys
base_path = sys.path[1:]  # without this script's directory, as in `python -m pytest`
# A real child writes to a file, as the zygote to a pipe: the same encoding and errors.
encoding, errors = sys.stdout.encoding, sys.stdout.errors
import torch, pytest  # noqa: E401,F401  (what every run imports: the time saved)
if len(os.listdir("/proc/self/task")) != 1:
    print(json.dumps({"unsafe": "threads after import"}), flush=True)
    sys.exit(0)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            import atexit, random
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
            sys.path[:] = [request["cwd"], *extra, *base_path]
            stdin = os.open(os.devnull, os.O_RDONLY)
            out = os.open(request["stdout"], os.O_WRONLY | os.O_APPEND)
            err = os.open(request["stderr"], os.O_WRONLY | os.O_APPEND)
            for fd, target in ((stdin, 0), (out, 1), (err, 2)):
                os.dup2(fd, target)
                os.close(fd)
            sys.stdin = open(0, "r", closefd=False)
            sys.stdout = open(1, "w", encoding=encoding, errors=errors, closefd=False)
            sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", closefd=False)
            sys.argv = [pytest.__file__, *request["args"]]
            random.seed()
            try:
                code = pytest.console_main()
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(int(code))
        except BaseException:
            import traceback
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(70)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
"""


class _Zygote:
    """The zygote process of this test process, started at the first run."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _SET_BY_THE_CHILD}
        self.python_settings = interpreter_settings(env)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=os.getcwd(),
        )
        atexit.register(self.close)
        first = self._answer(timeout=300)
        self.usable = first is not None and first.get("ready") is True

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)

    def _answer(self, timeout: float | None) -> dict[str, Any] | None:
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                raise subprocess.TimeoutExpired("zygote", timeout or 0)
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def start(self, request: dict[str, Any]) -> _ForkedRun:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self._answer(timeout=60)
        assert answer is not None and "pid" in answer, answer
        return _ForkedRun(self, answer["pid"], request["args"])


class _ForkedRun:
    """What ``pytester.run`` uses of a ``subprocess.Popen``: ``stdin``, ``wait``, ``kill``."""

    stdin = None

    def __init__(self, zygote: _Zygote, pid: int, args: list[str]) -> None:
        self.zygote, self.pid, self.args = zygote, pid, args
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                answer = self.zygote._answer(timeout)
            except subprocess.TimeoutExpired:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            assert answer is not None and "returncode" in answer, answer
            self.returncode = answer["returncode"]
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


_zygote: _Zygote | None = None


def _forked_popen(pytester: pytest.Pytester, cmdargs: Any, stdout: IO[str], stderr: IO[str], stdin: Any = None, **kw: Any) -> Any:
    """``pytester.popen`` for ``python -mpytest ...``, forked from the zygote when it can be."""
    global _zygote
    args = [os.fspath(arg) for arg in cmdargs]
    env = os.environ.copy()  # what pytester.popen gives the process
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
    if _zygote is None:
        _zygote = _Zygote()
    plain = (
        not _zygote.usable
        or args[:2] != list(pytester._getpytestargs())
        or stdin is not pytester.CLOSE_STDIN
        or kw
        or interpreter_settings(env, ignore=_SET_BY_THE_CHILD) != _zygote.python_settings
    )
    if plain:
        return type(pytester).popen(pytester, cmdargs, stdout=stdout, stderr=stderr, stdin=stdin, **kw)
    return _zygote.start(
        {
            "cwd": os.getcwd(), "env": env, "args": args[2:],
            "stdout": stdout.name, "stderr": stderr.name,
        }
    )


def run_pytest(pytester: pytest.Pytester, *args: str | os.PathLike[str], timeout: float | None = None) -> pytest.RunResult:
    """``pytester.runpytest_subprocess(*args, timeout=timeout)``, its process forked from the
    zygote (see the module docstring)."""
    if ALWAYS_SUBPROCESS or not hasattr(os, "fork") or not Path("/proc/self/task").is_dir():
        return pytester.runpytest_subprocess(*args, timeout=timeout)
    pytester.popen = lambda cmdargs, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=pytester.CLOSE_STDIN, **kw: (  # type: ignore[method-assign]
        _forked_popen(pytester, cmdargs, stdout, stderr, stdin, **kw)
    )
    try:
        return pytester.runpytest_subprocess(*args, timeout=timeout)
    finally:
        del pytester.popen
